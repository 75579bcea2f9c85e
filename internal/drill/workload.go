package drill

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonemq/zonemq/client"
)

// sendRecord is one application-level send.
type sendRecord struct {
	key         string
	producerIDC string
	start, end  time.Time
	brokerIDC   string
	broker      string
	// brokerAddr, queue, offset and epoch place the acknowledgement for
	// the ledger checker.
	brokerAddr string
	queue      int
	offset     int64
	epoch      int64
	err        error
}

// recvRecord is one delivery of a message to a consumer.
type recvRecord struct {
	consumerIDC string
	brokerIDC   string
	broker      string
	at          time.Time
	queue       int
	offset      int64
}

// book records every send and delivery of the drill. Safe for concurrent use.
type book struct {
	mu    sync.Mutex
	sends []sendRecord
	recvs map[string][]recvRecord

	acked atomic.Int64
	got   atomic.Int64
	errs  atomic.Int64
}

func newLedger() *book { return &book{recvs: make(map[string][]recvRecord)} }

func (l *book) addSend(r sendRecord) {
	l.mu.Lock()
	l.sends = append(l.sends, r)
	l.mu.Unlock()
	if r.err != nil {
		l.errs.Add(1)
	} else {
		l.acked.Add(1)
	}
}

func (l *book) addRecv(key string, r recvRecord) {
	l.mu.Lock()
	l.recvs[key] = append(l.recvs[key], r)
	l.mu.Unlock()
	l.got.Add(1)
}

// snapshot copies the records for analysis.
func (l *book) snapshot() ([]sendRecord, map[string][]recvRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sends := append([]sendRecord(nil), l.sends...)
	recvs := make(map[string][]recvRecord, len(l.recvs))
	for k, v := range l.recvs {
		recvs[k] = append([]recvRecord(nil), v...)
	}
	return sends, recvs
}

// ackedSince reports whether broker group acknowledged a send started
// after t.
func (l *book) ackedSince(group string, t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for n := len(l.sends) - 1; n >= 0 && l.sends[n].end.After(t); n-- {
		if s := l.sends[n]; s.err == nil && s.broker == group && s.start.After(t) {
			return true
		}
	}
	return false
}

// unconsumed counts acknowledged keys never delivered.
func (l *book) unconsumed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.sends {
		if s.err == nil && len(l.recvs[s.key]) == 0 {
			n++
		}
	}
	return n
}

const (
	drillTopic = "ZonemqDrill"
	drillGroup = "zonemq_drill_cg"
)

// workload is the drill's producers and consumers, one of each per IDC,
// talking to their own IDC's address server. Producers run in the drill
// through the SDK; each consumer is a `zonemq consume` process (see
// consumerProc), so it can be killed and hung.
type workload struct {
	ledger   *book
	interval time.Duration
	logger   *slog.Logger
	idcs     []*idcProcs

	producers []*client.Producer
	consumers map[string]*consumerProc // by IDC
	cmu       sync.Mutex

	stopSend context.CancelFunc
	sendWG   sync.WaitGroup
}

func clientConfig(i *idcProcs, logger *slog.Logger) client.ClientConfig {
	return client.ClientConfig{
		AddrsrvURLs: i.addrsrvs,
		IDC:         i.name,
		LocalIP:     i.ip,
		Dial:        i.dial,
		Logger:      logger.With("client-idc", i.name),
	}
}

func newWorkload(c *cluster, interval time.Duration, logger *slog.Logger) *workload {
	w := &workload{ledger: newLedger(), interval: interval, logger: logger, idcs: c.idcs,
		consumers: map[string]*consumerProc{}}
	for _, i := range c.idcs {
		w.consumers[i.name] = newConsumerProc(c.binary, c.workDir, i, w.ledger)
	}
	return w
}

// stopConsumer stops IDC name's consumer cleanly (SIGTERM: it commits its
// offsets and leaves the group).
func (w *workload) stopConsumer(_ context.Context, name string) error {
	return w.consumer(name).terminate(10 * time.Second)
}

// startConsumer starts IDC i's consumer again.
func (w *workload) startConsumer(ctx context.Context, i *idcProcs) error {
	return w.consumer(i.name).start(ctx)
}

// consumer is IDC name's consumer process (running or not).
func (w *workload) consumer(name string) *consumerProc {
	w.cmu.Lock()
	defer w.cmu.Unlock()
	return w.consumers[name]
}

// start starts every IDC's consumer and producer; producers send one
// message each interval until stop.
func (w *workload) start(ctx context.Context) error {
	for _, i := range w.idcs {
		if err := w.consumer(i.name).start(ctx); err != nil {
			return err
		}
	}
	sendCtx, cancel := context.WithCancel(context.Background())
	w.stopSend = cancel
	for _, i := range w.idcs {
		p, err := client.NewProducer(client.ProducerConfig{ClientConfig: clientConfig(i, w.logger), Group: "zonemq_drill_pg"})
		if err != nil {
			return err
		}
		if err := p.Start(ctx); err != nil {
			return fmt.Errorf("start %s producer: %w", i.name, err)
		}
		w.producers = append(w.producers, p)
		w.sendWG.Add(1)
		go w.sendLoop(sendCtx, p, i.name)
	}
	return nil
}

// sendLoop sends keyed messages at a fixed pace, bounded by ctx.
func (w *workload) sendLoop(ctx context.Context, p *client.Producer, idcName string) {
	defer w.sendWG.Done()
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for seq := 1; ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		key := fmt.Sprintf("%s-%d", idcName, seq)
		rec := sendRecord{key: key, producerIDC: idcName, start: time.Now()}
		res, err := p.SendSync(context.Background(), &client.Message{
			Topic: drillTopic, Keys: []string{key}, Body: []byte("drill " + key),
		})
		rec.end = time.Now()
		switch {
		case err != nil:
			rec.err = err
		case res.Status != client.SendOK:
			// Stored but not on the copies the mode promises (e.g.
			// FLUSH_SLAVE_TIMEOUT): not an acknowledgement.
			rec.err = fmt.Errorf("send status %s", res.Status)
		default:
			rec.brokerIDC, rec.broker, rec.brokerAddr = res.IDC, res.BrokerName, res.BrokerAddr
			rec.queue, rec.offset, rec.epoch = res.Queue.QueueID, res.QueueOffset, sendEpoch(res)
		}
		w.ledger.addSend(rec)
	}
}

// stopSending stops every producer loop and waits for in-flight sends.
func (w *workload) stopSending() {
	if w.stopSend != nil {
		w.stopSend()
	}
	w.sendWG.Wait()
}

// close shuts every client down.
func (w *workload) close(ctx context.Context) {
	w.stopSending()
	for _, p := range w.producers {
		p.Shutdown(ctx)
	}
	w.cmu.Lock()
	cs := w.consumers
	w.cmu.Unlock()
	for _, c := range cs {
		c.terminate(10 * time.Second)
	}
}
