package broker

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

func testQueues(topic string, n int) []protocol.MessageQueue {
	out := make([]protocol.MessageQueue, n)
	for i := range out {
		out[i] = protocol.MessageQueue{Topic: topic, BrokerName: "b", QueueID: i}
	}
	return out
}

// TestBrokerLockTableHammer locks, renews and unlocks from many goroutines
// and checks that a queue is never granted to a client while another one
// holds it.
func TestBrokerLockTableHammer(t *testing.T) {
	lt := newLockTable(time.Hour)
	qs := testQueues("T", 6)
	var holder [6]atomic.Int32 // client index+1 believed to own each queue
	var violations atomic.Int32
	const clients, rounds = 12, 1500
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() { // concurrent readers
		for {
			select {
			case <-stop:
				return
			default:
				lt.owners("g", members{})
				lt.sweep(func(string) members { return members{} })
			}
		}
	}()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			me := int32(c + 1)
			id := fmt.Sprintf("client-%d", c)
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			var mine []int
			for range rounds {
				ask := []protocol.MessageQueue{qs[rng.IntN(len(qs))], qs[rng.IntN(len(qs))]}
				for _, mq := range lt.tryLock("g", id, ask, members{}) {
					h := &holder[mq.QueueID]
					if h.Load() == me {
						continue // a renewal
					}
					if !h.CompareAndSwap(0, me) {
						violations.Add(1)
						t.Errorf("%s was granted queue %d held by client-%d", id, mq.QueueID, h.Load()-1)
						continue
					}
					mine = append(mine, mq.QueueID)
				}
				if len(mine) > 0 && rng.IntN(2) == 0 {
					q := mine[0]
					mine = mine[1:]
					// Give up the belief before the lock, so a grant that
					// follows the unlock never sees a stale holder.
					holder[q].Store(0)
					lt.unlock("g", id, qs[q:q+1])
				}
			}
			for _, q := range mine {
				holder[q].Store(0)
				lt.unlock("g", id, qs[q:q+1])
			}
		}()
	}
	wg.Wait()
	close(stop)
	testutil.Equal(t, violations.Load(), int32(0), "double grants")
	testutil.Equal(t, len(lt.owners("g", members{})), 0, "every lock released")
}

func TestBrokerLockTableLease(t *testing.T) {
	now := time.Unix(1_000, 0)
	lt := newLockTable(10 * time.Second)
	lt.now = func() time.Time { return now }
	qs := testQueues("T", 2)
	all := members{}
	names := func(mqs []protocol.MessageQueue) string {
		s := ""
		for _, q := range mqs {
			s += fmt.Sprint(q.QueueID)
		}
		return s
	}

	testutil.Equal(t, names(lt.tryLock("g", "A", qs, all)), "01", "A locks both")
	testutil.Equal(t, names(lt.tryLock("g", "B", qs, all)), "", "B is refused")
	testutil.Equal(t, names(lt.tryLock("other", "B", qs, all)), "01", "groups are separate")
	now = now.Add(5 * time.Second)
	testutil.Equal(t, names(lt.tryLock("g", "A", qs[:1], all)), "0", "A renews queue 0")
	now = now.Add(6 * time.Second) // queue 1's lease (10 s) has passed, queue 0's not
	testutil.Equal(t, names(lt.tryLock("g", "B", qs, all)), "1", "B takes the lapsed queue only")
	testutil.Equal(t, len(lt.unlock("g", "B", qs[:1])), 0, "B cannot unlock A's queue")
	testutil.Equal(t, lt.owners("g", all)[qs[0]], "A", "queue 0 still A's")
	testutil.Equal(t, len(lt.unlock("g", "A", qs[:1])), 1, "A unlocks queue 0")
	testutil.Equal(t, names(lt.tryLock("g", "B", qs[:1], all)), "0", "B takes the unlocked queue")

	// An owner that left the group loses its locks at once, unless it
	// locked after the membership was read.
	gone := members{ids: map[string]bool{"C": true}, at: now.Add(time.Second)}
	testutil.Equal(t, len(lt.owners("g", gone)), 0, "B is not a member: its locks are not held")
	testutil.Equal(t, names(lt.tryLock("g", "C", qs, gone)), "01", "C takes the queues of a departed owner")
	stale := members{ids: map[string]bool{}, at: now.Add(-time.Second)}
	testutil.Equal(t, names(lt.tryLock("g", "D", qs, stale)), "", "an owner that locked after the membership was read is kept")

	// Sweeping forgets lapsed locks only.
	now = now.Add(11 * time.Second)
	lt.tryLock("g", "E", qs[:1], all) // queue 0 lapsed, E takes it
	testutil.Equal(t, lt.sweep(func(string) members { return all }), 3, "lapsed locks dropped: C's queue 1 and the other group's two")
	testutil.Equal(t, lt.owners("g", all)[qs[0]], "E", "E's fresh lock kept")
}
