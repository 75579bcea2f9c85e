package client

import (
	"context"
	"sync"
	"time"
)

// brokerCheckInterval is how often a clustering push consumer asks every
// broker of its routes whether it answers (GET_CONSUMER_LIST_BY_GROUP, a
// read of the broker's client registry). A hung broker keeps its
// connections open, so only an unanswered request reveals it; checking four
// times a second, each check waiting the usual request timeout, shows a hang
// to every consumer of every IDC between 1 and 1.25 s after it began — the
// same threshold as an unanswered heartbeat, so a broker that is merely
// slow is not judged any sooner than before, only checked more often.
const brokerCheckInterval = 250 * time.Millisecond

// livenessChecks tracks the checks in flight, one per broker at most.
type livenessChecks struct {
	mu       sync.Mutex
	inFlight map[string]bool
}

// livenessLoop checks every broker of the routes every brokerCheckInterval
// and rebalances at once when one stops or starts answering. What a
// consumer sees here feeds rebalance in two ways: a silent broker's view of
// the group is not asked (its queues are left), and an IDC whose every
// broker of a topic is silent counts as having no live broker, so its
// consumers become eligible for other IDCs' queues without waiting for the
// name server to expire the broker (3 s and more). Every consumer of every
// IDC checks the same broker alike, so their allocations agree within a
// check interval; where they briefly do not, the queue locks keep a queue
// with one owner.
func (pc *PushConsumer) livenessLoop(ctx context.Context) {
	lc := &livenessChecks{inFlight: map[string]bool{}}
	var wg sync.WaitGroup
	defer wg.Wait()
	everyTick(ctx, brokerCheckInterval, nil, func(ctx context.Context) {
		for _, addr := range pc.c.routes.brokerAddrs(pc.topics()) {
			lc.mu.Lock()
			busy := lc.inFlight[addr]
			lc.inFlight[addr] = true
			lc.mu.Unlock()
			if busy {
				continue // the last check is still waiting: it decides
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := pc.c.consumerList(ctx, addr, pc.cfg.Group)
				lc.mu.Lock()
				delete(lc.inFlight, addr)
				lc.mu.Unlock()
				if ctx.Err() != nil {
					return
				}
				pc.markSilent(addr, err != nil && isTransportError(err))
			}()
		}
	})
}

// markSilent records whether addr answers and acts on a change: a broker
// gone silent hurries the routes and rebalances; one answering again has
// its routes re-read and rebalances (it may hold queues for us).
func (pc *PushConsumer) markSilent(addr string, silent bool) {
	pc.mu.Lock()
	was := pc.silent[addr]
	pc.silent[addr] = silent
	pc.mu.Unlock()
	if was == silent {
		return
	}
	if silent {
		pc.c.logger.Info("broker silent: no answer within the request timeout", "broker", addr)
		pc.c.routes.hurry(suspectWindow)
	} else {
		pc.c.logger.Debug("broker answers its liveness check again", "broker", addr)
		pc.c.routes.triggerRefresh()
	}
	pc.triggerRebalance()
}

// silentBrokers returns the addresses of the brokers seen silent now.
func (pc *PushConsumer) silentBrokers() map[string]bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	out := make(map[string]bool, len(pc.silent))
	for addr, s := range pc.silent {
		if s {
			out[addr] = true
		}
	}
	return out
}

// idcAnswers is idc.EligibleConsumers' input for route r: IDC x has a live
// broker if the route lists one that this consumer does not see silent.
func idcAnswers(r *route, silent map[string]bool) func(x string) bool {
	return func(x string) bool { return r.idcHasLiveBrokerExcept(x, silent) }
}
