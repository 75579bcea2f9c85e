package ledger

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// history: group g has master A (id 0) at epoch 1 from t0, then B (id 1)
// at epoch 2 from 1000 ms, then A again at epoch 3 from 5000 ms (fail-back).
func history() []Epoch {
	return []Epoch{
		{Group: "g", Epoch: 1, MasterID: 0, Addr: "A", At: at(0)},
		{Group: "g", Epoch: 2, MasterID: 1, Addr: "B", At: at(1000)},
		{Group: "g", Epoch: 3, MasterID: 0, Addr: "A", At: at(5000)},
	}
}

func ack(key, addr string, epoch int64, sent, acked int) Ack {
	return Ack{Key: key, Group: "g", Addr: addr, Epoch: epoch, SentAt: at(sent), AckedAt: at(acked)}
}

func got(key string, ms int) Consumption { return Consumption{Key: key, Group: "g", At: at(ms)} }

// A correct run through a failover and a fail-back passes, duplicates
// counted but allowed.
func TestLedgerCheckPassesACorrectFailover(t *testing.T) {
	in := Input{
		Acks: []Ack{
			ack("m1", "A", 1, 100, 110),
			ack("m2", "A", 1, 900, 1200), // started before B's election: valid
			ack("m3", "B", 2, 1500, 1510),
			ack("m4", "A", 3, 6000, 6010),
			{Key: "m5", Group: "other", Addr: "X", Epoch: 9, SentAt: at(1), AckedAt: at(2)}, // no history: unchecked
		},
		Consumptions: []Consumption{got("m1", 200), got("m2", 1300), got("m3", 1600), got("m3", 1700), got("m4", 6100), got("m5", 3)},
		History:      history(),
	}
	r := Check(in)
	testutil.True(t, r.OK(), "correct run", r)
	testutil.Equal(t, r.Acked, 5, "acked")
	testutil.Equal(t, r.Consumed, 5, "consumed")
	testutil.Equal(t, r.Duplicates, 1, "duplicates")
	testutil.Equal(t, r.Unchecked, 1, "unchecked")
}

func TestLedgerCheckFindsLoss(t *testing.T) {
	r := Check(Input{
		Acks:         []Ack{ack("m1", "A", 1, 100, 110), ack("m2", "A", 1, 120, 130)},
		Consumptions: []Consumption{got("m1", 200)},
		History:      history(),
	})
	testutil.True(t, !r.OK(), "loss must fail", r)
	testutil.Equal(t, r.Lost, 1, "lost")
	testutil.Equal(t, len(r.LostExamples), 1, "lost example")
}

func TestLedgerCheckFindsFencedAcks(t *testing.T) {
	cases := []struct {
		name string
		a    Ack
	}{
		// The old master acknowledged a send that started after the new
		// master's election (the partition case).
		{"old epoch after the election", ack("m", "A", 1, 1500, 1600)},
		// A broker claims an epoch whose master was another broker.
		{"not the master of its epoch", ack("m", "A", 2, 1500, 1600)},
		// An epoch the controller never granted.
		{"unknown epoch", ack("m", "B", 7, 1500, 1600)},
		// After the fail-back, B (epoch 2) must not acknowledge.
		{"demoted master after fail-back", ack("m", "B", 2, 5200, 5300)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Check(Input{Acks: []Ack{c.a}, Consumptions: []Consumption{got("m", 2000)}, History: history()})
			testutil.True(t, !r.OK(), "must fail", r)
			testutil.Equal(t, r.FencedAcks, 1, "fenced acks")
			testutil.Equal(t, len(r.FencedExamples), 1, "example")
		})
	}
}

func TestLedgerCheckFindsOrderViolations(t *testing.T) {
	ordered := func(key, orderKey string, queue int, offset int64, acked int) Ack {
		return Ack{Key: key, OrderKey: orderKey, Group: "g", Addr: "A", Epoch: 1, Queue: queue, Offset: offset,
			SentAt: at(acked - 5), AckedAt: at(acked)}
	}
	acks := []Ack{
		ordered("k1-1", "k1", 0, 10, 100),
		ordered("k1-2", "k1", 0, 11, 200),
		ordered("k1-3", "k1", 0, 12, 300),
		ordered("k2-1", "k2", 1, 5, 150),
	}
	// In order (with a redelivery of k1-1 after k1-2): passes.
	r := Check(Input{Acks: acks, History: history(), Consumptions: []Consumption{
		got("k1-1", 400), got("k1-2", 500), got("k1-1", 550), got("k1-3", 600), got("k2-1", 410)}})
	testutil.True(t, r.OK(), "in order", r)
	testutil.Equal(t, r.OrderedKeys, 2, "ordered keys")

	// k1-3 first delivered before k1-2: fails, by key and by queue.
	r = Check(Input{Acks: acks, History: history(), Consumptions: []Consumption{
		got("k1-1", 400), got("k1-3", 500), got("k1-2", 600), got("k2-1", 410)}})
	testutil.True(t, !r.OK(), "out of order must fail", r)
	testutil.Equal(t, r.OrderViolations, 2, "one by key, one by queue")

	// Same time: Seq decides.
	c1, c2 := got("k1-1", 400), got("k1-2", 400)
	c1.Seq, c2.Seq = 2, 1
	r = Check(Input{Acks: acks[:2], History: history(), Consumptions: []Consumption{c1, c2}})
	testutil.True(t, r.OrderViolations > 0, "seq order counts", r)
}

// Examples are bounded however many violations there are.
func TestLedgerCheckBoundsExamples(t *testing.T) {
	var acks []Ack
	for i := range 3 * maxExamples {
		acks = append(acks, ack(fmt.Sprint("m", i), "A", 1, 2000, 2001))
	}
	r := Check(Input{Acks: acks, History: history()})
	testutil.Equal(t, r.Lost, 3*maxExamples, "lost")
	testutil.Equal(t, r.FencedAcks, 3*maxExamples, "fenced")
	testutil.Equal(t, len(r.LostExamples), maxExamples, "lost examples bounded")
	testutil.Equal(t, len(r.FencedExamples), maxExamples, "fenced examples bounded")
}

// A delivery of a key never sent, or of one key from two positions, is
// unexpected; the same position delivered again is a duplicate only. A
// failed send's key may be delivered (its answer was lost).
func TestLedgerCheckFindsTheUnexpected(t *testing.T) {
	pos := func(key string, queue int, offset int64, ms int) Consumption {
		return Consumption{Key: key, Consumer: "c", Group: "g", Queue: queue, Offset: offset, At: at(ms)}
	}
	in := Input{
		Acks:    []Ack{ack("m1", "A", 0, 0, 1), ack("m2", "A", 0, 0, 1)},
		Unacked: []string{"m3"},
		Consumptions: []Consumption{
			pos("m1", 0, 10, 5), pos("m1", 0, 10, 6), // redelivered
			pos("m2", 1, 20, 5),
			pos("m3", 1, 21, 5), // a failed send that was stored: fine
		},
	}
	r := Check(in)
	testutil.Equal(t, r.Unexpected, 0, "unexpected in a correct run")
	testutil.Equal(t, r.Duplicates, 1, "duplicates")
	testutil.Equal(t, r.DuplicateCauses["redelivered"], 1, "redelivered")
	testutil.True(t, r.OK(), r)

	// A copy in another group: a retry's, a duplicate only.
	other := pos("m1", 0, 3, 7)
	other.Group = "h"
	in.Consumptions = append(in.Consumptions, other)
	r = Check(in)
	testutil.Equal(t, r.Unexpected, 0, "a copy in another group")
	testutil.Equal(t, r.DuplicateCauses["resent to another group"], 1, "resent")
	testutil.Equal(t, r.StoredTwice, 1, "keys stored twice")
	testutil.True(t, r.OK(), r)

	in.Consumptions = append(in.Consumptions, pos("ghost", 0, 11, 7), pos("m2", 2, 5, 8), pos("m2", 2, 5, 9))
	r = Check(in)
	testutil.Equal(t, r.Unexpected, 2, "a ghost and a second position in one group")
	testutil.Equal(t, r.StoredTwice, 2, "keys stored twice")
	testutil.Equal(t, r.DuplicateCauses["stored twice in one group"], 1, "stored twice in one group")
	testutil.Equal(t, r.DuplicateCauses["redelivered"], 2, "the second copy redelivered too")
	testutil.True(t, !r.OK(), "unexpected deliveries fail the check")
	testutil.Equal(t, len(r.UnexpectedExamples), 2, fmt.Sprint(r.UnexpectedExamples))
}

// The epoch history and the acknowledgements' epochs read as a register:
// a correct failover is linearizable; a late answer of a fenced master, or
// an answer at an epoch its broker was never elected to, is not.
func TestLedgerEpochHistoryIsALinearizableRegister(t *testing.T) {
	correct := Input{History: history(), Acks: []Ack{
		ack("m1", "A", 1, 100, 110),
		ack("m2", "A", 1, 900, 1200), // in flight across B's election
		ack("m3", "B", 2, 1500, 1510),
		ack("m4", "A", 3, 6000, 6010),
	}}
	for _, a := range correct.Acks {
		correct.Consumptions = append(correct.Consumptions, got(a.Key, 7000))
	}
	r := Check(correct)
	testutil.Equal(t, r.EpochHistory, EpochsLinearizable, "a correct failover")
	testutil.True(t, r.OK(), r)

	for name, late := range map[string]Ack{
		"a fenced master's late answer":   ack("m5", "A", 1, 1100, 1110),
		"a master never elected":          ack("m6", "C", 2, 2000, 2010),
		"the epoch before a fail-back, B": ack("m7", "B", 2, 5500, 5600),
	} {
		in := correct
		in.Acks = append(append([]Ack(nil), correct.Acks...), late)
		in.Consumptions = append(append([]Consumption(nil), correct.Consumptions...), got(late.Key, 7000))
		r := Check(in)
		testutil.Equal(t, r.EpochHistory, EpochsNotLinearizable, name)
		testutil.True(t, !r.OK(), name)
	}
	var page strings.Builder
	testutil.NoError(t, VisualizeEpochs(correct, &page))
	testutil.True(t, strings.Contains(page.String(), "<html"), "the picture is an HTML page")
}
