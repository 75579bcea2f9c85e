package client

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// A send attempt on a broker that went silent (hung, or cut off by a
// network that drops packets) would wait the whole SendAttemptTimeout (1 s)
// before the send moves on: a crash closes the connection, a hang does not.
// So an attempt that has had no answer after SendSuspectAfter asks two
// brokers at once whether they answer: the suspect, on the same connection,
// and a reference, another broker of the topic's route. The attempt is
// given up as silent only when the reference answers and the suspect does
// not, within silenceWindow and a margin over the reference's own time:
//
//   - a broker that is slow to store (a slow disk, a synchronous replica far
//     away) still answers the check, which its handlers serve apart from
//     sends, so its send is waited for as before;
//   - a machine or network that is slow for everyone, the client's own
//     process starved of CPU included, delays the reference's answer too,
//     and then nothing is decided: the attempt timeout applies as before;
//   - with no other broker to compare with there is nowhere better to go.
//
// A send given up this way may still be stored by the broker when it wakes,
// besides the copy another broker stores: a duplicate, which RocketMQ's
// at-least-once delivery allows (consumers of such topics are idempotent),
// never a loss. That is also true of the attempt timeout it shortens.

// DefaultSendSuspectAfter is ProducerConfig.SendSuspectAfter's default.
const DefaultSendSuspectAfter = 100 * time.Millisecond

// silenceWindow is how long the suspect has at least to answer its check
// (more when the reference or the link to the suspect take longer: see
// confirmSilent).
const silenceWindow = 100 * time.Millisecond

// errBrokerSilent ends an attempt on a broker that answered nothing while
// another broker answered.
var errBrokerSilent = errors.New("broker silent: no answer to a liveness check that another broker answered")

// invokeWatched is core.invoke for a send attempt on q: after
// s.suspectAfter without an answer it checks whether q's broker is silent,
// and gives the attempt up if so (ErrTimeout, retryable, connection closed).
// A broker is suspected after s.suspectAfter or twice its usual answer
// time, whichever is longer.
func (s *sender) invokeWatched(ctx context.Context, topic string, q writeQueue, req *remoting.Command, timeout time.Duration) (*remoting.Command, error) {
	addr := q.broker.master()
	if s.suspectAfter <= 0 {
		return s.c.invoke(ctx, addr, req, timeout)
	}
	start := time.Now()
	lat := s.latencyOf(addr)
	// A broker that is always slow (far away, a synchronous replica) is
	// suspected only after several of its usual answer times; one that has
	// not answered a send yet, whose usual time is unknown, not at all.
	after := max(s.suspectAfter, 2*lat.load())
	if lat.load() == 0 || after >= timeout {
		resp, err := s.c.invoke(ctx, addr, req, timeout)
		if err == nil {
			lat.observe(max(time.Since(start), time.Microsecond))
		}
		return resp, err
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watch := time.AfterFunc(after, func() {
		if s.confirmSilent(actx, topic, q.broker.name, addr, 3*lat.fastest()) {
			cancel(errBrokerSilent)
		}
	})
	resp, err := s.c.invoke(actx, addr, req, timeout)
	watch.Stop()
	if err == nil {
		lat.observe(max(time.Since(start), time.Microsecond))
		return resp, nil
	}
	if errors.Is(context.Cause(actx), errBrokerSilent) && ctx.Err() == nil {
		s.c.rc.CloseConn(addr)
		return nil, fmt.Errorf("%w: %s to %s, nothing for %v: %w", ErrTimeout, protocol.RequestCode(req.Code), addr,
			time.Since(start).Round(time.Millisecond), errBrokerSilent)
	}
	return nil, err
}

// brokerLatency is a broker's answer times as its sends see them, two ways:
//
//   - usual: a moving average that moves a quarter of the way towards a
//     slower answer and an eighth towards a faster one, so it leans to the
//     slow end without one stall switching suspicion off. It says when to
//     suspect: a broker whose sends are slow (a synchronous flush on a busy
//     disk, a far replica) is checked later.
//   - floor: the fastest recent answer, creeping up by a thirty-second of
//     the gap per slower one. It is the round trip to the broker without
//     the work of a send, so it says how long the liveness check, which
//     does no such work, may take: a far or slow link raises it, a slow
//     disk does not.
type brokerLatency struct {
	usual atomic.Int64 // nanoseconds; 0 until the first answer
	floor atomic.Int64
}

func (l *brokerLatency) load() time.Duration    { return time.Duration(l.usual.Load()) }
func (l *brokerLatency) fastest() time.Duration { return time.Duration(l.floor.Load()) }

// observe records one answer time (sends may race here; an update lost now
// and then does not matter to an estimate).
func (l *brokerLatency) observe(d time.Duration) {
	old := l.usual.Load()
	if old == 0 {
		l.usual.Store(int64(d))
		l.floor.Store(int64(d))
		return
	}
	step := int64(8)
	if int64(d) > old {
		step = 4
	}
	l.usual.Store(old + (int64(d)-old)/step)
	if f := l.floor.Load(); int64(d) < f {
		l.floor.Store(int64(d))
	} else {
		l.floor.Store(f + (int64(d)-f)/32)
	}
}

// latencyOf returns addr's latency record, making it on first use.
func (s *sender) latencyOf(addr string) *brokerLatency {
	if l, ok := s.latency.Load(addr); ok {
		return l.(*brokerLatency)
	}
	l, _ := s.latency.LoadOrStore(addr, new(brokerLatency))
	return l.(*brokerLatency)
}

// confirmSilent checks the suspect broker and a reference broker at once and
// reports whether the reference answered while the suspect did not, and
// went on not answering for silenceWindow, twice the reference's time plus
// a margin, and checkTime (the suspect's own round trip), whichever is
// longest. It gives
// up (false) as soon as the attempt ends.
func (s *sender) confirmSilent(ctx context.Context, topic, suspectName, suspectAddr string, checkTime time.Duration) bool {
	refAddr := s.referenceBroker(topic, suspectName)
	if refAddr == "" {
		return false
	}
	start := time.Now()
	suspect := s.livenessCheck(ctx, suspectAddr)
	ref := s.livenessCheck(ctx, refAddr)
	// No deadline on the reference: on a machine so loaded that it takes
	// long to answer, the suspect is judged against that longer time.
	var refTook time.Duration
	select {
	case <-ctx.Done():
		return false
	case <-suspect:
		// It answers (slow, not silent), or its connection failed, which
		// fails the send by itself.
		return false
	case ok := <-ref:
		if !ok {
			return false // the reference fails too: nothing to learn
		}
		refTook = time.Since(start)
	}
	// The reference answered. The suspect gets what is left of the window,
	// at least twice the reference's time plus a margin for the goroutines
	// that carry its answer, and at least what a check of it may take.
	wait := max(silenceWindow, 2*refTook+20*time.Millisecond, checkTime) - time.Since(start)
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-suspect:
			return false
		case <-t.C:
		}
	}
	return ctx.Err() == nil
}

// livenessCheck asks addr for the producer group's consumer list (a read of
// the broker's client registry that every RocketMQ broker answers, an
// unknown group with an error code) and reports on the returned channel
// whether any answer came, within silenceWindow plus a second at most. The
// check does not close the connection on a timeout: the caller decides.
func (s *sender) livenessCheck(ctx context.Context, addr string) <-chan bool {
	done := make(chan bool, 1)
	h := protocol.ConsumerGroupRequestHeader{ConsumerGroup: s.group}
	req := s.c.sign(request(protocol.GetConsumerListByGroup, h.Ext(), nil))
	s.c.rc.InvokeAsync(ctx, addr, req, silenceWindow+time.Second, func(_ *remoting.Command, err error) {
		done <- err == nil
	})
	return done
}

// referenceBroker returns the master address of a broker of topic's route
// other than exclude, preferring one that is not isolated; "" if none.
func (s *sender) referenceBroker(topic, exclude string) string {
	r := s.c.routes.cached(topic)
	if r == nil {
		return ""
	}
	var fallback string
	for name, b := range r.brokers {
		addr := b.master()
		if name == exclude || addr == "" {
			continue
		}
		if !s.isIsolated(name) {
			return addr
		}
		if fallback == "" {
			fallback = addr
		}
	}
	return fallback
}
