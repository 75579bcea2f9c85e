package broker

import (
	"context"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// closingNoticeTimeout bounds how long a clean stop waits for its consumers
// to commit (protocol.BrokerClosing); a consumer that has not answered by
// then replays what it did not commit, as after a crash.
const closingNoticeTimeout = 3 * time.Second

// tellConsumersClosing sends BROKER_CLOSING to every connected consumer that
// announced a heartbeat interval (a zonemq SDK; stock clients would not
// answer and wait out the timeout) and waits for their answers: each one
// stops pulling here, lets its handlers finish and commits its offsets
// before answering. Called by Shutdown once the broker has left the routes
// and before requests are refused, so those commits are still served: a
// planned stop replays nothing (docs/architecture.md §2, flow 5).
func (s *Server) tellConsumersClosing() {
	conns := map[*remoting.Conn]bool{}
	for _, g := range s.registry.consumerGroupNames() {
		for _, ch := range s.registry.consumerChannels(g) {
			if ch.expiry > 0 {
				conns[ch.conn] = true
			}
		}
	}
	if len(conns) == 0 {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), closingNoticeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := 0
	for conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := conn.Invoke(ctx, remoting.NewRequest(int32(protocol.BrokerClosing), map[string]string{}, nil))
			if err != nil || resp.Code != int32(protocol.Success) {
				s.logger.Debug("a consumer did not confirm its commits before the stop", "peer", conn.RemoteAddr(), "err", err)
				return
			}
			mu.Lock()
			answered++
			mu.Unlock()
		}()
	}
	wg.Wait()
	s.logger.Info("consumers committed before the stop", "answered", answered, "of", len(conns), "took", time.Since(start).Round(time.Millisecond))
}

// commitBeforeSwitch lets the consumers reading here commit what they
// consumed (tellConsumersClosing) once a switchover has paused the writes,
// then moves the pause's mark to now: waitMetaSynced waits for a metadata
// snapshot taken after it, so the new master gets those commits and a
// planned switchover replays nothing.
func (s *Server) commitBeforeSwitch() {
	s.tellConsumersClosing()
	r := s.repl
	r.mu.Lock()
	r.pausedAt = time.Now()
	r.mu.Unlock()
}
