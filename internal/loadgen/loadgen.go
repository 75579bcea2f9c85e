// Package loadgen is zonemq's load generator: the clients, counters and
// report behind `zonemq bench` (docs/benchmarks.md). It drives a cluster
// through the public SDK only, as any application would; the command line,
// --local's in-process cluster and the profiles stay in cmd/zonemq.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/protocol"
)

// Bounds and defaults.
const (
	// DefaultDuration is how long a run sends when neither a count nor a
	// duration is given.
	DefaultDuration = 10 * time.Second
	// MaxDuration caps a counted run, so every run ends even if the
	// cluster stops taking messages.
	MaxDuration = 10 * time.Minute
	// MaxMessageSize is the brokers' default body limit.
	MaxMessageSize = 4 << 20
	// queueWait bounds the wait for the consumers to hold the topic's
	// queues before sending starts.
	queueWait = 20 * time.Second
)

// Options is one run. The command line checks them (cmd/zonemq's bench).
type Options struct {
	Topic  string
	Group  string // "" for a fresh bench_<run id>
	Queues int    // per broker, when the topic has to be created
	Size   int    // body bytes
	Count  int    // messages to send (Mode consume: to receive); 0: Duration
	// Duration is how long to send (Mode consume: to receive), or a cap
	// with Count.
	Duration     time.Duration
	Producers    int // synchronous sender goroutines
	Inflight     int // >0: one asynchronous sender with this many calls in flight
	Consumers    int
	Batch        int    // messages per send call
	Mode         string // send, consume or both
	DrainTimeout time.Duration
	Idle         time.Duration // Mode consume: stop after this long without news
	SendTimeout  time.Duration
	Progress     time.Duration // a progress line on the writer this often; 0: never
	Rate         int           // messages per second in all; 0: unpaced
	// AccessPoint, when set, sends through this gRPC access point
	// (host:port, plaintext) with the RocketMQ 5 protocol instead of the SDK.
	AccessPoint string
	// Local and Flush only describe the cluster in the report.
	Local bool
	Flush string
}

// Sends reports whether the run sends.
func (o Options) Sends() bool { return o.Mode == "send" || o.Mode == "both" }

// Consumes reports whether the run consumes.
func (o Options) Consumes() bool { return o.Mode == "consume" || o.Mode == "both" }

// Run runs o against the cluster cfg reaches and returns the report.
// Progress lines go to progress.
func Run(ctx context.Context, o Options, cfg client.ClientConfig, progress io.Writer) (*Report, error) {
	return newRunner(o, cfg, progress).run(ctx)
}

// oneLine folds an error's text onto one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// runner is one benchmark: its clients, counters and histograms.
type runner struct {
	o      Options
	cfg    client.ClientConfig
	stderr io.Writer
	runID  string
	body   []byte

	seq       atomic.Int64 // last sequence number handed out
	acked     atomic.Int64 // messages acknowledged
	sendCalls atomic.Int64
	sendErrs  atomic.Int64 // messages whose send call failed
	lastErr   atomic.Value // string
	ackedSeqs seqSet

	sendStart, sendEnd time.Time
	sendHist           latencyHistogram // every producer goroutine's, merged after the send phase
	consumed           consumedSet
}

func newRunner(o Options, cfg client.ClientConfig, stderr io.Writer) *runner {
	r := &runner{o: o, cfg: cfg, stderr: stderr, runID: strconv.FormatInt(time.Now().UnixNano(), 36)}
	// Random bytes: a compressing client or disk cannot flatter the figures.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x7a6f6e656d71))
	r.body = make([]byte, o.Size)
	for i := range r.body {
		r.body[i] = byte(rng.Uint32())
	}
	if r.o.Group == "" {
		r.o.Group = "bench_" + r.runID
	}
	return r
}

// keyPrefix starts every key of this run, so a consumer can tell this
// run's messages from older ones on the same topic.
func (r *runner) keyPrefix() string { return "B" + r.runID + "-" }

// run sets the topic up, runs the clients and returns the report.
func (r *runner) run(ctx context.Context) (*Report, error) {
	readQueues, err := r.ensureTopic(ctx)
	if err != nil {
		return nil, err
	}
	var consumers []*client.PushConsumer
	defer func() {
		for _, c := range consumers {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = c.Shutdown(sctx)
			cancel()
		}
	}()
	if r.o.Consumes() {
		if consumers, err = r.startConsumers(ctx); err != nil {
			return nil, err
		}
		if r.o.Mode == "both" {
			r.waitQueuesHeld(ctx, consumers, readQueues)
		}
	}
	stopProgress := r.startProgress()
	defer stopProgress()
	if r.o.Sends() {
		if err := r.sendPhase(ctx); err != nil {
			return nil, err
		}
	}
	switch r.o.Mode {
	case "both":
		r.drain(ctx)
	case "consume":
		r.consumeOnly(ctx)
	}
	stopProgress()
	return r.report(), nil
}

// ensureTopic creates the topic on every broker if no name server routes
// it, and returns its readable queue count.
func (r *runner) ensureTopic(ctx context.Context) (int, error) {
	a, err := admin.New(admin.Config{ClientConfig: r.cfg})
	if err != nil {
		return 0, err
	}
	if err := a.Start(ctx); err != nil {
		return 0, fmt.Errorf("cannot reach the cluster: %s", oneLine(err.Error()))
	}
	defer a.Shutdown(context.Background())
	route, err := a.TopicRoute(ctx, r.o.Topic)
	if errors.Is(err, &client.ResponseError{Code: client.CodeTopicNotExist}) {
		if err := a.CreateTopic(ctx, admin.TopicSpec{Topic: r.o.Topic, Queues: r.o.Queues}); err != nil {
			return 0, fmt.Errorf("creating topic %s: %s", r.o.Topic, oneLine(err.Error()))
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for {
			if route, err = a.TopicRoute(wctx, r.o.Topic); err == nil && len(route.Brokers) > 0 {
				break
			}
			if !pause(wctx, 50*time.Millisecond) {
				return 0, fmt.Errorf("topic %s created, but no name server routes it after 10s", r.o.Topic)
			}
		}
	}
	if err != nil {
		return 0, fmt.Errorf("route of %s: %s", r.o.Topic, oneLine(err.Error()))
	}
	n := 0
	for _, b := range route.Brokers {
		if b.Perm&protocol.PermRead != 0 {
			n += b.ReadQueues
		}
	}
	return n, nil
}

// startConsumers starts the group's push consumers.
func (r *runner) startConsumers(ctx context.Context) ([]*client.PushConsumer, error) {
	from := client.ConsumeFromLastOffset
	if r.o.Mode == "consume" {
		from = client.ConsumeFromFirstOffset
	}
	r.consumed.init(r.keyPrefix(), r.o.Mode == "both")
	var out []*client.PushConsumer
	for i := 0; i < r.o.Consumers; i++ {
		cfg := client.ConsumerConfig{
			ClientConfig:     r.cfg,
			Group:            r.o.Group,
			ConsumeFromWhere: from,
			ConsumeBatchSize: 32,
		}
		if r.cfg.InstanceName != "" {
			cfg.InstanceName = r.cfg.InstanceName + "-c" + strconv.Itoa(i+1)
		}
		c, err := client.NewPushConsumer(cfg)
		if err != nil {
			return out, err
		}
		err = c.Subscribe(r.o.Topic, "*", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
			r.consumed.add(msgs)
			return client.ConsumeSuccess
		})
		if err != nil {
			return out, err
		}
		out = append(out, c) // shut down by the caller, started or not
		if err := c.Start(ctx); err != nil {
			return out, fmt.Errorf("cannot start consumer %d: %s", i+1, oneLine(err.Error()))
		}
	}
	return out, nil
}

// waitQueuesHeld waits (bounded) until the consumers together hold every
// readable queue of the topic, so that consuming from the last offset
// misses none of the messages about to be sent.
func (r *runner) waitQueuesHeld(ctx context.Context, consumers []*client.PushConsumer, want int) {
	wctx, cancel := context.WithTimeout(ctx, queueWait)
	defer cancel()
	held := 0
	for {
		held = 0
		for _, c := range consumers {
			for _, q := range c.Queues() {
				if q.Topic == r.o.Topic {
					held++
				}
			}
		}
		if held >= want || !pause(wctx, 20*time.Millisecond) {
			break
		}
	}
	if held < want && ctx.Err() == nil {
		fmt.Fprintf(r.stderr, "zonemq bench: the consumers hold %d of %d queues after %s; sending anyway\n", held, want, queueWait)
	}
}

// sendPhase runs the producer goroutines until --count messages were sent,
// --duration passed or ctx ended.
func (r *runner) sendPhase(ctx context.Context) error {
	if r.o.AccessPoint != "" {
		return r.sendThroughAccessPoint(ctx)
	}
	p, err := client.NewProducer(client.ProducerConfig{ClientConfig: r.cfg, Group: "bench_producer", SendTimeout: r.o.SendTimeout})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(sctx)
	}()
	if err := p.Start(ctx); err != nil {
		return fmt.Errorf("cannot start the producer: %s", oneLine(err.Error()))
	}
	if r.o.Inflight > 0 {
		r.sendStart = time.Now()
		r.sendAsyncLoop(ctx, p, r.sendStart.Add(r.o.Duration))
		r.sendEnd = time.Now()
		return nil
	}
	hists := make([]*latencyHistogram, r.o.Producers)
	var wg sync.WaitGroup
	r.sendStart = time.Now()
	deadline := r.sendStart.Add(r.o.Duration)
	for i := range hists {
		hists[i] = &latencyHistogram{}
		wg.Add(1)
		go func(h *latencyHistogram) {
			defer wg.Done()
			r.sendLoop(ctx, p, h, deadline)
		}(hists[i])
	}
	wg.Wait()
	r.sendEnd = time.Now()
	for _, h := range hists {
		r.sendHist.merge(h)
	}
	return nil
}

// sendLoop is one producer goroutine: one send call at a time, each of
// --batch messages, until the count, the deadline or ctx says stop.
func (r *runner) sendLoop(ctx context.Context, p *client.Producer, h *latencyHistogram, deadline time.Time) {
	batch := int64(r.o.Batch)
	count := int64(r.o.Count)
	prefix := r.keyPrefix()
	// A signal stops the loop, not the call in flight: it is counted.
	sendCtx := context.WithoutCancel(ctx)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		last := r.seq.Add(batch)
		first := last - batch + 1
		if count > 0 && last > count {
			last = count
		}
		if first > last {
			return
		}
		if !r.pace(ctx, first) {
			return
		}
		msgs := make([]*client.Message, 0, last-first+1)
		for s := first; s <= last; s++ {
			msgs = append(msgs, &client.Message{Topic: r.o.Topic, Keys: []string{prefix + strconv.FormatInt(s, 10)}, Body: r.body})
		}
		start := time.Now()
		_, err := p.SendSync(sendCtx, msgs...)
		took := time.Since(start)
		r.sendCalls.Add(1)
		if err != nil {
			r.sendErrs.Add(int64(len(msgs)))
			r.lastErr.Store(oneLine(err.Error()))
			if errors.Is(err, client.ErrInvalidMessage) || errors.Is(err, client.ErrShutdown) {
				return // every later send would fail the same way
			}
			continue
		}
		h.record(took)
		r.acked.Add(int64(len(msgs)))
		r.ackedSeqs.addRange(first, last)
	}
}

// pace holds the message numbered seq (from 1) until its time under --rate:
// sendStart + (seq-1)/rate. It reports false if ctx ended first.
func (r *runner) pace(ctx context.Context, seq int64) bool {
	if r.o.Rate <= 0 {
		return true
	}
	due := r.sendStart.Add(time.Duration(float64(seq-1) / float64(r.o.Rate) * float64(time.Second)))
	wait := time.Until(due)
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// sendAsyncLoop keeps --inflight asynchronous send calls in flight until
// the count, the deadline or ctx says stop, then waits for the callbacks.
func (r *runner) sendAsyncLoop(ctx context.Context, p *client.Producer, deadline time.Time) {
	batch := int64(r.o.Batch)
	count := int64(r.o.Count)
	prefix := r.keyPrefix()
	sendCtx := context.WithoutCancel(ctx)
	window := make(chan struct{}, r.o.Inflight)
	var wg sync.WaitGroup
	var histMu sync.Mutex
	defer wg.Wait()
	for ctx.Err() == nil && time.Now().Before(deadline) {
		select {
		case window <- struct{}{}:
		case <-ctx.Done():
			return
		}
		last := r.seq.Add(batch)
		first := last - batch + 1
		if count > 0 && last > count {
			last = count
		}
		if first > last || !r.pace(ctx, first) {
			<-window
			return
		}
		msgs := make([]*client.Message, 0, last-first+1)
		for s := first; s <= last; s++ {
			msgs = append(msgs, &client.Message{Topic: r.o.Topic, Keys: []string{prefix + strconv.FormatInt(s, 10)}, Body: r.body})
		}
		start := time.Now()
		wg.Add(1)
		err := p.SendAsync(sendCtx, func(_ *client.SendResult, err error) {
			defer func() { <-window; wg.Done() }()
			took := time.Since(start)
			r.sendCalls.Add(1)
			if err != nil {
				r.sendErrs.Add(int64(len(msgs)))
				r.lastErr.Store(oneLine(err.Error()))
				return
			}
			histMu.Lock()
			r.sendHist.record(took)
			histMu.Unlock()
			r.acked.Add(int64(len(msgs)))
			r.ackedSeqs.addRange(first, last)
		}, msgs...)
		if err != nil {
			// Not sent, no callback: invalid messages or a stopped producer.
			<-window
			wg.Done()
			r.sendCalls.Add(1)
			r.sendErrs.Add(int64(len(msgs)))
			r.lastErr.Store(oneLine(err.Error()))
			return
		}
	}
}

// drain waits until every acknowledged message was consumed, or
// --drain-timeout passed, or ctx ended.
func (r *runner) drain(ctx context.Context) {
	wctx, cancel := context.WithTimeout(ctx, r.o.DrainTimeout)
	defer cancel()
	for r.consumed.uniqueCount() < r.acked.Load() {
		if !pause(wctx, 10*time.Millisecond) {
			return
		}
	}
}

// consumeOnly waits for --count messages, --duration, or --idle without a
// new message (once one arrived), whichever comes first.
func (r *runner) consumeOnly(ctx context.Context) {
	start := time.Now()
	deadline := start.Add(r.o.Duration)
	for pause(ctx, 10*time.Millisecond) && time.Now().Before(deadline) {
		n, last := r.consumed.progress()
		if r.o.Count > 0 && n >= int64(r.o.Count) {
			return
		}
		if n > 0 && time.Since(last) >= r.o.Idle {
			return
		}
	}
}

// startProgress prints a progress line on stderr every --progress in text
// mode; the returned function stops it (idempotent).
func (r *runner) startProgress() func() {
	if r.o.Progress == 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.progressLoop(done)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}

func (r *runner) progressLoop(done <-chan struct{}) {
	t := time.NewTicker(r.o.Progress)
	defer t.Stop()
	start := time.Now()
	var lastSent, lastRecv int64
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			sent := r.acked.Load()
			recv, _ := r.consumed.progress()
			secs := r.o.Progress.Seconds()
			fmt.Fprintf(r.stderr, "%6.1fs  sent %d (%.0f/s)  received %d (%.0f/s)  errors %d\n",
				now.Sub(start).Seconds(), sent, float64(sent-lastSent)/secs, recv, float64(recv-lastRecv)/secs, r.sendErrs.Load())
			lastSent, lastRecv = sent, recv
		}
	}
}

// consumedSet counts what the consumers received. Safe for concurrent
// use: handlers run on many goroutines.
type consumedSet struct {
	prefix  string
	ownOnly bool // count only this run's keys

	mu         sync.Mutex
	seen       seqSet
	messages   int64 // counted messages (unique ones in --mode both)
	duplicates int64
	foreign    int64 // messages of other runs, ignored
	bytes      int64
	first      time.Time
	last       time.Time
	endToEnd   latencyHistogram
}

func (c *consumedSet) init(prefix string, ownOnly bool) {
	c.prefix, c.ownOnly = prefix, ownOnly
}

func (c *consumedSet) add(msgs []*client.MessageExt) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		if c.ownOnly {
			seq, ok := c.seqOf(m)
			if !ok {
				c.foreign++
				continue
			}
			if !c.seen.addRange(seq, seq) {
				c.duplicates++
				continue
			}
		}
		c.messages++
		c.bytes += int64(len(m.Body))
		if c.first.IsZero() {
			c.first = now
		}
		c.last = now
		if !m.StoreTimestamp.IsZero() {
			c.endToEnd.record(now.Sub(m.StoreTimestamp))
		}
	}
}

// seqOf reads the sequence number out of a message key of this run.
func (c *consumedSet) seqOf(m *client.MessageExt) (int64, bool) {
	for _, k := range m.Keys {
		if rest, ok := strings.CutPrefix(k, c.prefix); ok {
			seq, err := strconv.ParseInt(rest, 10, 64)
			return seq, err == nil && seq > 0
		}
	}
	return 0, false
}

func (c *consumedSet) uniqueCount() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.messages
}

func (c *consumedSet) progress() (int64, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.messages, c.last
}

// seqSet is a set of positive sequence numbers, a bit each. Safe for
// concurrent use.
type seqSet struct {
	mu   sync.Mutex
	bits []uint64
}

// addRange adds first..last and reports whether any of them was new.
func (s *seqSet) addRange(first, last int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	added := false
	for n := first; n <= last; n++ {
		i, bit := n/64, uint64(1)<<(n%64)
		for int64(len(s.bits)) <= i {
			s.bits = append(s.bits, 0)
		}
		if s.bits[i]&bit == 0 {
			s.bits[i] |= bit
			added = true
		}
	}
	return added
}

// missingFrom counts the members of s that other lacks.
func (s *seqSet) missingFrom(other *seqSet) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	other.mu.Lock()
	defer other.mu.Unlock()
	var n int
	for i, w := range s.bits {
		var o uint64
		if i < len(other.bits) {
			o = other.bits[i]
		}
		n += bits.OnesCount64(w &^ o)
	}
	return int64(n)
}

// latencyHistogram counts durations in log-linear buckets: exact below
// 128 ns, then 64 buckets per power of two, so a percentile is off by less
// than 1/64 (1.6 %) and the memory is fixed whatever the run's length. Not
// safe for concurrent use: each producer goroutine has its own, merged at
// the end; the consumers' one is under consumed.mu.
type latencyHistogram struct {
	counts [histBuckets]uint64
	n      uint64
	max    time.Duration
}

const (
	histSubBuckets = 64
	histMaxShift   = 40 // 2^47 ns ≈ 39 h: longer durations share the last bucket
	histBuckets    = 2*histSubBuckets + histMaxShift*histSubBuckets
)

func histBucket(d time.Duration) int {
	v := uint64(max(d, 0))
	if v < 2*histSubBuckets {
		return int(v)
	}
	shift := bits.Len64(v) - 7 // keep the top 7 bits: v>>shift in [64, 128)
	if shift > histMaxShift {
		return histBuckets - 1
	}
	return 2*histSubBuckets + (shift-1)*histSubBuckets + int(v>>shift) - histSubBuckets
}

// histUpper is the largest duration bucket b holds.
func histUpper(b int) time.Duration {
	if b < 2*histSubBuckets {
		return time.Duration(b)
	}
	shift := (b-2*histSubBuckets)/histSubBuckets + 1
	m := uint64((b-2*histSubBuckets)%histSubBuckets + histSubBuckets)
	return time.Duration((m+1)<<shift - 1)
}

func (h *latencyHistogram) record(d time.Duration) {
	h.counts[histBucket(d)]++
	h.n++
	h.max = max(h.max, d)
}

func (h *latencyHistogram) merge(o *latencyHistogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// percentile is the duration at or below which q (0..1) of the records
// lie, as the upper bound of its bucket (never above the maximum).
func (h *latencyHistogram) percentile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var cum uint64
	for b, c := range h.counts {
		cum += c
		if cum >= rank {
			if b == histBuckets-1 {
				return h.max // the overflow bucket has no upper bound
			}
			return min(histUpper(b), h.max)
		}
	}
	return h.max
}

// latencyReport is a histogram's summary, in milliseconds.
type latencyReport struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

func (h *latencyHistogram) report() latencyReport {
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
	return latencyReport{P50: ms(h.percentile(0.50)), P90: ms(h.percentile(0.90)), P99: ms(h.percentile(0.99)),
		P999: ms(h.percentile(0.999)), Max: ms(h.max)}
}

// Report is the result of a run; --output json prints it as is.
type Report struct {
	Mode      string `json:"mode"`
	Topic     string `json:"topic"`
	Size      int    `json:"size"`
	Batch     int    `json:"batch"`
	Producers int    `json:"producers"`
	// Inflight is --inflight: asynchronous send calls in flight (0: the
	// producers sent synchronously).
	Inflight  int  `json:"inflight,omitempty"`
	Consumers int  `json:"consumers"`
	Local     bool `json:"local"`
	// Flush is the --local broker's flush mode ("" for another cluster).
	Flush   string         `json:"flush,omitempty"`
	Send    *SendReport    `json:"send,omitempty"`
	Consume *ConsumeReport `json:"consume,omitempty"`
	// Errors counts failed sends plus acknowledged messages never consumed.
	Errors int64 `json:"errors"`
}

// SendReport is the producer side.
type SendReport struct {
	Messages   int64         `json:"messages"` // acknowledged
	Calls      int64         `json:"calls"`    // send calls (batches count once)
	Errors     int64         `json:"errors"`   // messages whose send call failed
	Bytes      int64         `json:"bytes"`
	Seconds    float64       `json:"seconds"`
	MsgsPerSec float64       `json:"msgsPerSec"`
	MBPerSec   float64       `json:"mbPerSec"`
	Latency    latencyReport `json:"latencyMs"` // per send call
	LastError  string        `json:"lastError,omitempty"`
}

// ConsumeReport is the consumer side.
type ConsumeReport struct {
	Messages   int64   `json:"messages"` // --mode both: distinct messages of this run
	Duplicates int64   `json:"duplicates"`
	Missing    int64   `json:"missing"` // acknowledged, not consumed (--mode both)
	Bytes      int64   `json:"bytes"`
	Seconds    float64 `json:"seconds"`
	MsgsPerSec float64 `json:"msgsPerSec"`
	MBPerSec   float64 `json:"mbPerSec"`
	// EndToEnd is from the broker's store timestamp to the handler.
	EndToEnd latencyReport `json:"e2eLatencyMs"`
}

func (r *runner) report() *Report {
	rep := &Report{
		Mode: r.o.Mode, Topic: r.o.Topic, Size: r.o.Size, Batch: r.o.Batch,
		Local: r.o.Local,
	}
	if r.o.Local {
		rep.Flush = r.o.Flush
	}
	if r.o.Sends() {
		rep.Producers = r.o.Producers
		if r.o.Inflight > 0 {
			rep.Producers, rep.Inflight = 0, r.o.Inflight
		}
		secs := r.sendEnd.Sub(r.sendStart).Seconds()
		acked := r.acked.Load()
		s := &SendReport{
			Messages: acked, Calls: r.sendCalls.Load(), Errors: r.sendErrs.Load(),
			Bytes: acked * int64(r.o.Size), Seconds: round3(secs),
		}
		s.MsgsPerSec, s.MBPerSec = rates(s.Messages, s.Bytes, secs)
		s.Latency = r.sendHist.report()
		if e, ok := r.lastErr.Load().(string); ok {
			s.LastError = e
		}
		rep.Send = s
		rep.Errors += s.Errors
	}
	if r.o.Consumes() {
		rep.Consumers = r.o.Consumers
		c := &r.consumed
		c.mu.Lock()
		cr := &ConsumeReport{Messages: c.messages, Duplicates: c.duplicates, Bytes: c.bytes, EndToEnd: c.endToEnd.report()}
		// The pipeline's rate: from the first send (or, reading a backlog,
		// the first message) to the last message received.
		start := c.first
		if r.o.Mode == "both" {
			start = r.sendStart
		}
		secs := 0.0
		if c.messages > 0 {
			secs = c.last.Sub(start).Seconds()
		}
		c.mu.Unlock()
		cr.Seconds = round3(secs)
		cr.MsgsPerSec, cr.MBPerSec = rates(cr.Messages, cr.Bytes, secs)
		if r.o.Mode == "both" {
			cr.Missing = r.ackedSeqs.missingFrom(&c.seen)
			rep.Errors += cr.Missing
		}
		rep.Consume = cr
	}
	return rep
}

func rates(messages, bytes int64, secs float64) (msgsPerSec, mbPerSec float64) {
	if secs <= 0 {
		return 0, 0
	}
	return math.Round(float64(messages) / secs), round3(float64(bytes) / secs / 1e6)
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// Text renders the report for people.
func (rep *Report) Text() string {
	var b strings.Builder
	where := "the given cluster"
	if rep.Local {
		where = "a local in-process cluster (flush " + rep.Flush + ")"
	}
	fmt.Fprintf(&b, "zonemq bench: mode %s on %s, topic %s, %d-byte bodies", rep.Mode, where, rep.Topic, rep.Size)
	if rep.Batch > 1 {
		fmt.Fprintf(&b, ", batches of %d", rep.Batch)
	}
	b.WriteString("\n")
	if s := rep.Send; s != nil {
		by := fmt.Sprintf("%d producers", rep.Producers)
		if rep.Inflight > 0 {
			by = fmt.Sprintf("%d asynchronous sends in flight", rep.Inflight)
		}
		fmt.Fprintf(&b, "sent      %d messages in %.2fs by %s: %.0f msg/s, %.2f MB/s; %d errors\n",
			s.Messages, s.Seconds, by, s.MsgsPerSec, s.MBPerSec, s.Errors)
		fmt.Fprintf(&b, "send latency (per call)  p50 %.3fms  p90 %.3fms  p99 %.3fms  p99.9 %.3fms  max %.3fms\n",
			s.Latency.P50, s.Latency.P90, s.Latency.P99, s.Latency.P999, s.Latency.Max)
		if s.LastError != "" {
			fmt.Fprintf(&b, "last send error: %s\n", s.LastError)
		}
	}
	if c := rep.Consume; c != nil {
		fmt.Fprintf(&b, "consumed  %d messages in %.2fs by %d consumers: %.0f msg/s, %.2f MB/s; %d duplicates",
			c.Messages, c.Seconds, rep.Consumers, c.MsgsPerSec, c.MBPerSec, c.Duplicates)
		if rep.Mode == "both" {
			fmt.Fprintf(&b, ", %d acknowledged but not consumed", c.Missing)
		}
		b.WriteString("\n")
		fmt.Fprintf(&b, "end-to-end latency (store → handler)  p50 %.0fms  p90 %.0fms  p99 %.0fms  max %.0fms\n",
			c.EndToEnd.P50, c.EndToEnd.P90, c.EndToEnd.P99, c.EndToEnd.Max)
	}
	return b.String()
}

// ErrorSummary is the one-line reason of a run with errors.
func (rep *Report) ErrorSummary() string {
	var parts []string
	if rep.Send != nil && rep.Send.Errors > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d messages failed to send (last error: %s)",
			rep.Send.Errors, rep.Send.Errors+rep.Send.Messages, rep.Send.LastError))
	}
	if rep.Consume != nil && rep.Consume.Missing > 0 {
		parts = append(parts, fmt.Sprintf("%d acknowledged messages were not consumed", rep.Consume.Missing))
	}
	return strings.Join(parts, "; ")
}

// pause waits d, or less if ctx ends; false if it did.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
