package proxy

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/protocol"
)

// Auto-renewal of invisible times: a push consumer receives with
// auto_renew and no invisible time, and acks or nacks with the handle it
// got, however long its handler runs. The access point hands such messages
// out for renewInvisible and, while the client that received them is
// connected, renews that every renewEvery on the broker, keeping the handle
// (ZONEMQ_CHANGE_POP_INVISIBLE_TIME with keepHandle). A client that goes
// away stops the renewals: its messages come again after renewInvisible.
var (
	renewInvisible = 30 * time.Second
	renewEvery     = 10 * time.Second
)

const (
	// renewMax bounds how long one message is renewed (Apache RocketMQ's
	// proxy: 3 h); after it the message comes again.
	renewMax = 3 * time.Hour
	// maxRenewed bounds the messages being renewed; past it, new ones are
	// handed out for renewInvisible only.
	maxRenewed = 100_000
)

type renewal struct {
	clientID, group, topic, broker, brokerHandle string
	since                                        time.Time
}

// renewals are the messages the access point keeps invisible, by the
// receipt handle the client holds.
type renewals struct {
	mu   sync.Mutex
	byID map[string]renewal
}

func (r *renewals) add(handle string, rn renewal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID == nil {
		r.byID = map[string]renewal{}
	}
	if len(r.byID) < maxRenewed {
		r.byID[handle] = rn
	}
}

func (r *renewals) remove(handle string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byID, handle)
}

// dropClient stops renewing what clientID received.
func (r *renewals) dropClient(clientID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for h, rn := range r.byID {
		if rn.clientID == clientID {
			delete(r.byID, h)
		}
	}
}

func (r *renewals) snapshot() map[string]renewal {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]renewal, len(r.byID))
	for h, rn := range r.byID {
		out[h] = rn
	}
	return out
}

// renewLoop renews every renewEvery until ctx ends.
func (s *Server) renewLoop(ctx context.Context) {
	t := time.NewTicker(renewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for handle, rn := range s.renewals.snapshot() {
			if time.Since(rn.since) > renewMax || !s.sessions.connected(rn.clientID) {
				s.renewals.remove(handle)
				continue
			}
			addr, err := s.masterOf(ctx, rn.topic, rn.broker)
			if err == nil {
				_, err = s.conn.Call(ctx, addr, client.Request{Code: int32(protocol.ChangePopInvisibleTime), Ext: map[string]string{
					"consumerGroup": rn.group, "topic": rn.topic, "handle": rn.brokerHandle,
					"invisibleTime": strconv.FormatInt(renewInvisible.Milliseconds(), 10), "keepHandle": "true"}})
			}
			if err != nil {
				// Acked meanwhile, or its broker is gone: it comes again.
				s.renewals.remove(handle)
			}
		}
	}
}
