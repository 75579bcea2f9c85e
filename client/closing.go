package client

import (
	"context"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// closingCommitTimeout bounds the hand-over a BROKER_CLOSING asks for; the
// broker waits a little longer (3 s) for the answer.
const closingCommitTimeout = 2500 * time.Millisecond

// closingHold is how long a broker that sent BROKER_CLOSING counts as
// failing while its connection stays open: a switchover's old master lives
// on as a replica, and its queues come back through the new master.
const closingHold = 10 * time.Second

// handleBrokerClosing serves a broker's BROKER_CLOSING: it is stopping
// cleanly and has left the routes. Its queues are released as in any
// hand-over — no more pulls, handlers finished, offsets committed on it
// while it still serves them — and only then is the notice answered, so a
// planned stop (or switchover) replays nothing. Until the connection
// closes, or closingHold passes, the broker counts as failing for the
// rebalance, which therefore does not take its queues again meanwhile.
func (pc *PushConsumer) handleBrokerClosing(ctx context.Context, cn *remoting.Conn, req *remoting.Command) *remoting.Command {
	pc.mu.Lock()
	pc.closingConns[cn] = time.Now()
	all := make([]*processQueue, 0, len(pc.queues))
	for _, pq := range pc.queues {
		all = append(all, pq)
	}
	pc.mu.Unlock()
	var held []*processQueue
	for _, pq := range all {
		if c, ok := pc.c.rc.ConnIfOpen(pq.broker.readAddr()); ok && c == cn {
			held = append(held, pq)
		}
	}
	pc.mu.Lock()
	for _, pq := range held {
		if pc.queues[pq.mq] == pq {
			delete(pc.queues, pq.mq)
		}
	}
	pc.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, closingCommitTimeout)
	defer cancel()
	pc.releaseQueues(rctx, held, false)
	pc.c.logger.Info("broker stopping cleanly: its queues released and their offsets committed", "broker", cn.RemoteAddr(), "queues", len(held))
	return remoting.NewResponse(req, int32(protocol.Success), "")
}
