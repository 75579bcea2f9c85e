package drill

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// ledgerBuilder makes synthetic drill ledgers on a timeline of seconds.
type ledgerBuilder struct {
	t0    time.Time
	sends []sendRecord
	recvs map[string][]recvRecord
}

func newLedgerBuilder() *ledgerBuilder {
	return &ledgerBuilder{t0: time.Unix(1_700_000_000, 0), recvs: map[string][]recvRecord{}}
}

func (b *ledgerBuilder) at(sec float64) time.Time {
	return b.t0.Add(time.Duration(sec * float64(time.Second)))
}

func (b *ledgerBuilder) ack(key, producerIDC, brokerIDC string, sec float64) {
	b.sends = append(b.sends, sendRecord{key: key, producerIDC: producerIDC, start: b.at(sec), end: b.at(sec),
		brokerIDC: brokerIDC, broker: "broker-" + brokerIDC})
}

func (b *ledgerBuilder) fail(key, producerIDC string, sec float64) {
	b.sends = append(b.sends, sendRecord{key: key, producerIDC: producerIDC, start: b.at(sec), end: b.at(sec), err: errors.New("boom")})
}

func (b *ledgerBuilder) recv(key, consumerIDC, brokerIDC string, sec float64) {
	b.recvs[key] = append(b.recvs[key], recvRecord{consumerIDC: consumerIDC, brokerIDC: brokerIDC, broker: "broker-" + brokerIDC, at: b.at(sec)})
}

func TestDrillAnalyzeHealthyCountsCrossIDC(t *testing.T) {
	b := newLedgerBuilder()
	b.ack("a", "idc1", "idc1", 1)
	b.recv("a", "idc1", "idc1", 1.1)
	b.ack("b", "idc2", "idc1", 2) // crossed on the way in
	b.recv("b", "idc1", "idc1", 2.1)
	b.ack("c", "idc2", "idc2", 3)
	b.recv("c", "idc1", "idc2", 3.1) // crossed on the way out
	b.recv("c", "idc2", "idc2", 3.2) // and a duplicate
	res, totals := analyze(b.sends, b.recvs, b.at(0), b.at(10), nil)
	s1 := res[0]
	testutil.Equal(t, s1.Name, "S1", "first row")
	testutil.Equal(t, s1.CrossIDC, 2, "cross-IDC hops (b in, c out)")
	testutil.Equal(t, s1.Duplicates, 1, "duplicates")
	testutil.Equal(t, s1.Recovered, false, "S1 with cross-IDC traffic must not pass")
	testutil.Equal(t, totals.Acked, 3, "acked")
	testutil.Equal(t, totals.Lost, 0, "lost")
}

func TestDrillAnalyzeBrokerFailure(t *testing.T) {
	b := newLedgerBuilder()
	p := &phase{name: "S2", failure: "kill", failedIDC: "idc1",
		failAt: b.at(10), restoreAt: b.at(20), endAt: b.at(30)}
	// Acknowledged by idc1's broker before the failure, read only after the
	// repair: stranded, not lost.
	b.ack("stranded", "idc1", "idc1", 9.5)
	b.recv("stranded", "idc1", "idc1", 22)
	// idc1's producer reaches idc2 0.25 s after the failure; the message is
	// consumed 0.5 s after the failure by an idc2 consumer, and idc1's own
	// consumer reads idc2's broker 2 s after the failure.
	b.ack("moved", "idc1", "idc2", 10.25)
	b.recv("moved", "idc2", "idc2", 10.5)
	b.ack("moved2", "idc1", "idc2", 11)
	b.recv("moved2", "idc1", "idc2", 12)
	b.fail("err", "idc1", 10.1)
	// Fail-back: idc1's producer and consumer are local again 1 s and 1.5 s
	// after the repair.
	b.ack("back", "idc1", "idc1", 21)
	b.recv("back", "idc1", "idc1", 21.5)
	// Acknowledged during the failure and never consumed: lost.
	b.ack("lost", "idc2", "idc2", 15)

	res, totals := analyze(b.sends, b.recvs, b.at(0), b.at(5), []*phase{p})
	r := res[1]
	testutil.Equal(t, r.ProducerRTO, Millis(250), "producer RTO")
	testutil.Equal(t, r.ConsumerTakeover, Millis(500), "takeover of the redirected traffic")
	testutil.Equal(t, r.ConsumersMoved, Millis(2000), "idc1's consumers moved")
	testutil.Equal(t, r.FailbackProducer, Millis(1000), "producer fail-back")
	testutil.Equal(t, r.FailbackConsumer, Millis(1500), "consumer fail-back")
	testutil.Equal(t, r.Stranded, 1, "stranded")
	testutil.Equal(t, r.SendErrors, 1, "send errors")
	testutil.Equal(t, r.Lost, 1, "lost in the phase")
	testutil.Equal(t, r.Recovered, true, "recovered")
	testutil.Equal(t, totals.Lost, 1, "lost in all")
	testutil.Equal(t, totals.SendErrors, 1, "send errors in all")
}

func TestDrillAnalyzeNoFailoverIsReported(t *testing.T) {
	b := newLedgerBuilder()
	p := &phase{name: "S2", failure: "hang", failedIDC: "idc1",
		failAt: b.at(10), restoreAt: b.at(20), endAt: b.at(30)}
	b.fail("x", "idc1", 12) // idc1's producer never got anywhere
	res, _ := analyze(b.sends, b.recvs, b.at(0), b.at(5), []*phase{p})
	r := res[1]
	testutil.Equal(t, r.Recovered, false, "recovered")
	testutil.Equal(t, r.ProducerRTO, Millis(-1), "no RTO")
	testutil.True(t, len(r.Notes) > 0 && strings.Contains(r.Notes[0], "never reached another IDC"), r.Notes)
}

func TestDrillAnalyzeConsumerFailure(t *testing.T) {
	b := newLedgerBuilder()
	p := &phase{name: "S4", failure: "stop", failedIDC: "idc1", consumers: true,
		failAt: b.at(10), restoreAt: b.at(20), endAt: b.at(30)}
	b.ack("m1", "idc1", "idc1", 10.5)
	b.recv("m1", "idc2", "idc1", 10.75) // idc2 drains idc1's broker
	b.ack("m2", "idc1", "idc1", 21)
	b.recv("m2", "idc1", "idc1", 21.25)
	res, _ := analyze(b.sends, b.recvs, b.at(0), b.at(5), []*phase{p})
	r := res[1]
	testutil.Equal(t, r.ConsumerTakeover, Millis(750), "takeover")
	testutil.Equal(t, r.FailbackConsumer, Millis(1250), "consumer fail-back")
	testutil.Equal(t, r.ProducerRTO, Millis(-1), "no producer RTO for a consumer failure")
	testutil.Equal(t, r.Recovered, true, "recovered")
}

func TestDrillReportText(t *testing.T) {
	r := &Report{IDCs: 2, PhaseMillis: 5000, Elapsed: 60000,
		Scenarios: []ScenarioResult{{Name: "S1", Failure: "none", ProducerRTO: -1, ConsumerTakeover: -1, ConsumersMoved: -1,
			AddrsrvDrop: -1, FailbackProducer: -1, FailbackConsumer: -1, Acked: 10, Recovered: true}},
		Totals: Totals{Acked: 10}, OK: true}
	var sb strings.Builder
	testutil.NoError(t, r.WriteText(&sb))
	testutil.True(t, strings.Contains(sb.String(), "result: OK"), sb.String())
	r.OK, r.Problems = false, []string{"1 acknowledged messages lost"}
	sb.Reset()
	testutil.NoError(t, r.WriteText(&sb))
	testutil.True(t, strings.Contains(sb.String(), "FAILED: 1 acknowledged messages lost"), sb.String())
}

// A message acknowledged while healthy and delivered again after a later
// failure is a duplicate of that failure, not of the healthy window.
func TestDrillAnalyzeDuplicatesCountWhereTheyHappen(t *testing.T) {
	b := newLedgerBuilder()
	p := &phase{name: "S2", failure: "kill", failedIDC: "idc1",
		failAt: b.at(10), restoreAt: b.at(20), endAt: b.at(30)}
	b.ack("early", "idc1", "idc1", 4)
	b.recv("early", "idc1", "idc1", 4.1)
	b.recv("early", "idc1", "idc1", 21) // replayed after the broker's restart
	b.ack("twice-in-s1", "idc2", "idc2", 2)
	b.recv("twice-in-s1", "idc2", "idc2", 2.1)
	b.recv("twice-in-s1", "idc2", "idc2", 3)
	res, totals := analyze(b.sends, b.recvs, b.at(0), b.at(5), []*phase{p})
	testutil.Equal(t, res[0].Duplicates, 1, "S1 duplicates: only the one delivered again in S1")
	testutil.Equal(t, res[1].Duplicates, 1, "S2 duplicates: the replay after the restart")
	testutil.Equal(t, totals.Duplicates, 2, "total duplicates")
}
