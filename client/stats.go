package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonemq/zonemq/internal/idc"
)

// ProducerStats is a snapshot of a producer's send counters since it was
// created. client/clientmetrics exports them to Prometheus.
type ProducerStats struct {
	// SentByIDC counts the sends stored (a batch counts once), by the IDC
	// of the broker that stored them ("" for brokers that announce no IDC).
	SentByIDC map[string]int64
	// CrossIDC counts the sends stored by a broker of another IDC than the
	// producer's own (0 while the own IDC is healthy).
	CrossIDC int64
	// Retries counts failed attempts after which the send tried another
	// broker.
	Retries int64
	// Failures counts sends that returned an error.
	Failures int64
	// Failovers counts the times sends moved from the own IDC to another
	// IDC (a send stored abroad after one stored at home, or the first
	// send); LastFailover is when the last one happened.
	Failovers    int64
	LastFailover time.Time
	// IsolatedBrokers is how many brokers the producer avoids now after a
	// failed attempt.
	IsolatedBrokers int
}

// sendStats are the sender's counters. The hot path touches atomics and a
// sync.Map keyed by the broker's IDC string the route already holds.
type sendStats struct {
	byIDC        sync.Map // broker IDC → *atomic.Int64
	crossIDC     atomic.Int64
	retries      atomic.Int64
	failures     atomic.Int64
	failovers    atomic.Int64
	lastFailover atomic.Int64 // unix nanoseconds
	abroad       atomic.Bool  // the last stored message went to another IDC
}

// send is deliver, counted in the producer's stats.
func (s *sender) send(ctx context.Context, out *outgoing, pick picker) (*SendResult, error) {
	res, err := s.deliver(ctx, out, pick)
	if err != nil {
		s.stats.failures.Add(1)
		return nil, err
	}
	s.stats.stored(s.c.cfg.IDC, res.IDC, 1)
	return res, nil
}

// stored counts one send stored by a broker of brokerIDC.
func (st *sendStats) stored(ownIDC, brokerIDC string, n int) {
	v, ok := st.byIDC.Load(brokerIDC)
	if !ok {
		v, _ = st.byIDC.LoadOrStore(brokerIDC, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(int64(n))
	foreign := ownIDC != "" && brokerIDC != "" && !idc.Same(ownIDC, brokerIDC)
	if foreign {
		st.crossIDC.Add(int64(n))
	}
	if st.abroad.Swap(foreign) != foreign && foreign {
		st.failovers.Add(1)
		st.lastFailover.Store(time.Now().UnixNano())
	}
}

// Stats returns a snapshot of the producer's send counters. Safe for
// concurrent use.
func (p *Producer) Stats() ProducerStats {
	st := &p.s.stats
	out := ProducerStats{
		SentByIDC: map[string]int64{},
		CrossIDC:  st.crossIDC.Load(),
		Retries:   st.retries.Load(),
		Failures:  st.failures.Load(),
		Failovers: st.failovers.Load(),
	}
	st.byIDC.Range(func(k, v any) bool {
		out.SentByIDC[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	if ns := st.lastFailover.Load(); ns != 0 {
		out.LastFailover = time.Unix(0, ns)
	}
	p.s.mu.Lock()
	now := time.Now()
	for _, iso := range p.s.isolated {
		if now.Before(iso.until) {
			out.IsolatedBrokers++
		}
	}
	p.s.mu.Unlock()
	return out
}
