package drill

import (
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestLockAuditSummary: rounds outside the window are ignored; a queue held
// by two clients in one round is a conflict; an owner change between
// rounds is a hand-over, not a conflict.
func TestLockAuditSummary(t *testing.T) {
	q0 := client.MessageQueue{Topic: "T", BrokerName: "broker-idc1", QueueID: 0}
	q1 := client.MessageQueue{Topic: "T", BrokerName: "broker-idc1", QueueID: 1}
	t0 := time.Now()
	round := func(at time.Duration, failed int, held map[client.MessageQueue][]string) lockRound {
		r := lockRound{at: t0.Add(at), failed: failed, owners: map[client.MessageQueue]map[string]bool{}}
		for q, owners := range held {
			r.owners[q] = map[string]bool{}
			for _, o := range owners {
				r.owners[q][o] = true
			}
		}
		return r
	}
	a := &lockAudit{rounds: []lockRound{
		round(-time.Second, 0, map[client.MessageQueue][]string{q0: {"A", "B"}}), // before the window
		round(0, 0, map[client.MessageQueue][]string{q0: {"A"}, q1: {"A"}}),
		round(100*time.Millisecond, 1, map[client.MessageQueue][]string{q0: {"B"}, q1: {"A"}}),
		round(200*time.Millisecond, 0, map[client.MessageQueue][]string{q0: {"B"}, q1: {"A", "C"}}),
		round(300*time.Millisecond, 0, map[client.MessageQueue][]string{q0: {"B"}}),
	}}
	s := a.summary(t0, t0.Add(time.Second))
	testutil.Equal(t, s.Rounds, 4, "rounds in the window")
	testutil.Equal(t, s.Unread, 1, "unanswered reads")
	testutil.Equal(t, s.Conflicts, 1, "rounds with a queue of two owners")
	testutil.Equal(t, s.Changes, 1, "owner changes (q0: A → B)")
	testutil.Equal(t, s.MaxLocked, 2, "most queues locked")
	testutil.Equal(t, s.EndLocked, 1, "queues locked at the end")
	testutil.True(t, s.Example != "", "the conflict is described")

	clean := a.summary(t0, t0.Add(150*time.Millisecond))
	testutil.Equal(t, clean.Conflicts, 0, "no conflict before the third round")
}
