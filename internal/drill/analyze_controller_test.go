package drill

import (
	"testing"

	"github.com/zonemq/zonemq/internal/ledger"
	"github.com/zonemq/zonemq/internal/testutil"
)

// A master-kill phase: the controller elects at 1.2 s, the group takes a
// write sent at 1.5 s acknowledged at 2 s and delivered at 2.1 s; an
// acknowledgement by the old master at its old epoch for a send started
// after the election is a fenced ack and fails the scenario.
func TestDrillAnalyzeControllerPhase(t *testing.T) {
	b := newLedgerBuilder()
	p := &phase{name: "master-kill", failure: "kill", controller: true, group: "broker-idc1",
		failAt: b.at(10), restoreAt: b.at(20), endAt: b.at(30)}
	hist := []ledger.Epoch{
		{Group: "broker-idc1", Epoch: 1, MasterID: 0, Addr: "A", At: b.at(0)},
		{Group: "broker-idc1", Epoch: 2, MasterID: 1, Addr: "B", At: b.at(11.2)},
	}
	in := ledger.Input{History: hist, Grace: checkGrace,
		Acks: []ledger.Ack{
			{Key: "k1", Group: "broker-idc1", Addr: "A", Epoch: 1, SentAt: b.at(9), AckedAt: b.at(9.1)},
			{Key: "k2", Group: "broker-idc1", Addr: "B", Epoch: 2, SentAt: b.at(11.5), AckedAt: b.at(12)},
			{Key: "k3", Group: "broker-idc2", Addr: "C", SentAt: b.at(10.1), AckedAt: b.at(10.2)},
		},
		Consumptions: []ledger.Consumption{{Key: "k1", At: b.at(9.2)}, {Key: "k2", At: b.at(12.1)}, {Key: "k3", At: b.at(10.3)}},
	}
	r := controllerPhaseResult(in, nil, nil, p)
	testutil.Equal(t, r.NewMaster, Millis(1200), "new master")
	testutil.Equal(t, r.ProducerRTO, Millis(2000), "producer RTO (the group's, not broker-idc2's)")
	testutil.Equal(t, r.ConsumerRTO, Millis(2100), "consumer RTO")
	testutil.True(t, r.Recovered, "passed", r.Notes)

	in.Acks = append(in.Acks, ledger.Ack{Key: "k4", Group: "broker-idc1", Addr: "A", Epoch: 1, SentAt: b.at(12), AckedAt: b.at(12.1)})
	in.Consumptions = append(in.Consumptions, ledger.Consumption{Key: "k4", At: b.at(12.2)})
	r = controllerPhaseResult(in, nil, nil, p)
	testutil.Equal(t, r.FencedAcks, 1, "the old master's late ack")
	testutil.True(t, !r.Recovered, "a fenced ack fails the scenario")

	// Two IDCs lost: an election, or an ack of a send started after the
	// loss and before the repair, fails it.
	lost := &phase{name: "two-idcs-lost", controller: true, failAt: b.at(10), lostAt: b.at(10.5),
		restoreAt: b.at(20), endAt: b.at(30)}
	in = ledger.Input{History: hist[:1],
		Acks:         []ledger.Ack{{Key: "k5", Group: "broker-idc1", SentAt: b.at(21), AckedAt: b.at(21.5)}},
		Consumptions: []ledger.Consumption{{Key: "k5", At: b.at(21.6)}}}
	r = controllerPhaseResult(in, nil, nil, lost)
	testutil.True(t, r.Recovered && r.NewMaster < 0 && r.ProducerRTO == Millis(1500), "writes after the repair", r)
	in.Acks = append(in.Acks, ledger.Ack{Key: "k6", Group: "broker-idc1", SentAt: b.at(11), AckedAt: b.at(11.1)})
	in.Consumptions = append(in.Consumptions, ledger.Consumption{Key: "k6", At: b.at(11.2)})
	r = controllerPhaseResult(in, nil, nil, lost)
	testutil.Equal(t, r.OneCopyAcks, 1, "one-copy ack")
	testutil.True(t, !r.Recovered, "a one-copy ack fails the scenario")
	in.Acks = in.Acks[:1]
	lost.epochsBefore = map[string]int64{"broker-idc1": 1, "broker-idc2": 1}
	lost.epochsDuring = map[string]int64{"broker-idc1": 1, "broker-idc2": 2}
	r = controllerPhaseResult(in, nil, nil, lost)
	testutil.True(t, !r.Recovered, "an epoch changed by the lone voter fails the scenario", r.Notes)
}
