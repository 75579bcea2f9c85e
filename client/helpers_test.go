package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/testutil"
)

// testLogger logs to stderr when ZONEMQ_TEST_LOG is set (debug with
// ZONEMQ_TEST_LOG=debug), else discards.
func testLogger() *slog.Logger {
	switch os.Getenv("ZONEMQ_TEST_LOG") {
	case "":
		return slog.New(slog.DiscardHandler)
	case "debug":
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}

// startCluster runs an n-IDC dev cluster for the test.
func startCluster(t *testing.T, idcs int) *devcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Options{IDCs: idcs, DataDir: t.TempDir(), Logger: testLogger()})
	testutil.NoError(t, err, "devcluster.Start")
	t.Cleanup(func() { c.Close() })
	return c
}

// createTopic creates topic with queues queues on every broker of every IDC
// and waits until every name server routes it to all of them.
func createTopic(t *testing.T, c *devcluster.Cluster, topic string, queues int) {
	t.Helper()
	ctx := context.Background()
	for i, ns := range c.NamesrvAddrs() {
		adm, err := admin.New(admin.Config{ClientConfig: client.ClientConfig{NamesrvAddrs: []string{ns}, Logger: testLogger()}})
		testutil.NoError(t, err)
		testutil.NoError(t, adm.Start(ctx))
		if i == 0 {
			testutil.NoError(t, adm.CreateTopic(ctx, admin.TopicSpec{Topic: topic, Queues: queues}), "CreateTopic")
		}
		testutil.Eventually(t, 10*time.Second, func() error {
			r, err := adm.TopicRoute(ctx, topic)
			if err != nil {
				return err
			}
			if len(r.Brokers) != c.IDCs() {
				return fmt.Errorf("name server %s routes %s to %d brokers", ns, topic, len(r.Brokers))
			}
			return nil
		})
		adm.Shutdown(ctx)
	}
}

// clientConfig is IDC n's client config with the test logger.
func clientConfig(c *devcluster.Cluster, n int) client.ClientConfig {
	cc := c.ClientConfig(n)
	cc.Logger = testLogger()
	return cc
}

func newProducer(t *testing.T, cc client.ClientConfig) *client.Producer {
	t.Helper()
	p, err := client.NewProducer(client.ProducerConfig{ClientConfig: cc})
	testutil.NoError(t, err)
	testutil.NoError(t, p.Start(context.Background()))
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return p
}

// delivery is one message a consumer got.
type delivery struct {
	consumer string
	key      string
	msg      *client.MessageExt
	at       time.Time
}

// recorder collects what consumers receive.
type recorder struct {
	mu    sync.Mutex
	got   []delivery
	byKey map[string]int
}

func newRecorder() *recorder { return &recorder{byKey: map[string]int{}} }

func (r *recorder) handler(name string) client.Handler {
	return func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, m := range msgs {
			key := ""
			if len(m.Keys) > 0 {
				key = m.Keys[0]
			}
			r.got = append(r.got, delivery{consumer: name, key: key, msg: m, at: time.Now()})
			r.byKey[key]++
		}
		return client.ConsumeSuccess
	}
}

func (r *recorder) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// missing returns the keys not received yet.
func (r *recorder) missing(keys []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, k := range keys {
		if r.byKey[k] == 0 {
			out = append(out, k)
		}
	}
	return out
}

// waitAll waits until every key was received.
func (r *recorder) waitAll(t *testing.T, keys []string, d time.Duration) {
	t.Helper()
	testutil.Eventually(t, d, func() error {
		if m := r.missing(keys); len(m) > 0 {
			return fmt.Errorf("%d of %d messages not consumed, e.g. %s", len(m), len(keys), m[0])
		}
		return nil
	})
}

func (r *recorder) duplicates() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.byKey {
		if c > 1 {
			n += c - 1
		}
	}
	return n
}

type consumerOpt func(*client.ConsumerConfig)

func newConsumer(t *testing.T, cc client.ClientConfig, group, topic string, h client.Handler, opts ...consumerOpt) *client.PushConsumer {
	t.Helper()
	cfg := client.ConsumerConfig{ClientConfig: cc, Group: group, ConsumeFromWhere: client.ConsumeFromFirstOffset}
	for _, o := range opts {
		o(&cfg)
	}
	pc, err := client.NewPushConsumer(cfg)
	testutil.NoError(t, err)
	testutil.NoError(t, pc.Subscribe(topic, "*", h))
	testutil.NoError(t, pc.Start(context.Background()))
	t.Cleanup(func() { pc.Shutdown(context.Background()) })
	return pc
}

// sendN sends n messages keyed prefix-1..prefix-n and returns the keys and
// results. Any send error fails the test.
func sendN(t *testing.T, p *client.Producer, topic, prefix string, n int) ([]string, []*client.SendResult) {
	t.Helper()
	var keys []string
	var results []*client.SendResult
	for i := 1; i <= n; i++ {
		key := fmt.Sprintf("%s-%d", prefix, i)
		res, err := p.SendSync(context.Background(), &client.Message{Topic: topic, Keys: []string{key}, Body: []byte("body of " + key)})
		testutil.NoError(t, err, "send "+key)
		keys = append(keys, key)
		results = append(results, res)
	}
	return keys, results
}

// queuesOf returns the queues of broker held by pc.
func queuesOf(pc *client.PushConsumer, topic, broker string) []client.MessageQueue {
	var out []client.MessageQueue
	for _, q := range pc.Queues() {
		if q.Topic == topic && q.BrokerName == broker {
			out = append(out, q)
		}
	}
	return out
}

// namesrvStatus reads an address server's /v1/namesrvs.
type namesrvStatus struct {
	Addr  string `json:"addr"`
	IDC   string `json:"idc"`
	Alive bool   `json:"alive"`
}

func addrsrvList(url string) ([]namesrvStatus, error) {
	resp, err := http.Get(url + "/v1/namesrvs")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []namesrvStatus
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// dialCounter is a Dial hook that binds to a local IP, counts dials per
// address and can redirect an address (to a proxy).
type dialCounter struct {
	localIP string
	mu      sync.Mutex
	counts  map[string]int
	redir   map[string]string
}

func newDialCounter(localIP string) *dialCounter {
	return &dialCounter{localIP: localIP, counts: map[string]int{}, redir: map[string]string{}}
}

func (d *dialCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.counts[addr]++
	target := addr
	if r, ok := d.redir[addr]; ok {
		target = r
	}
	d.mu.Unlock()
	nd := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(d.localIP)}}
	return nd.DialContext(ctx, network, target)
}

func (d *dialCounter) count(addr string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.counts[addr]
}

func (d *dialCounter) redirect(from, to string) {
	d.mu.Lock()
	d.redir[from] = to
	d.mu.Unlock()
}

// loadGen sends continuously from one producer and records every outcome.
type loadGen struct {
	mu      sync.Mutex
	keys    []string
	results []sendOutcome
	errs    int
	stop    chan struct{}
	done    chan struct{}
	seq     atomic.Int64
}

type sendOutcome struct {
	at  time.Time
	key string
	res *client.SendResult
	err error
}

func startLoad(p *client.Producer, topic, prefix string, every time.Duration) *loadGen {
	g := &loadGen{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(g.done)
		for {
			select {
			case <-g.stop:
				return
			default:
			}
			key := fmt.Sprintf("%s-%d", prefix, g.seq.Add(1))
			res, err := p.SendSync(context.Background(), &client.Message{Topic: topic, Keys: []string{key}, Body: []byte(key)})
			g.mu.Lock()
			g.results = append(g.results, sendOutcome{at: time.Now(), key: key, res: res, err: err})
			if err == nil {
				g.keys = append(g.keys, key)
			} else {
				g.errs++
			}
			g.mu.Unlock()
			select {
			case <-g.stop:
				return
			case <-time.After(every):
			}
		}
	}()
	return g
}

func (g *loadGen) halt() {
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	<-g.done
}

func (g *loadGen) snapshot() ([]string, []sendOutcome, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.keys...), append([]sendOutcome(nil), g.results...), g.errs
}

// firstAfter is the first successful send at or after t0 whose broker is in
// idcName.
func (g *loadGen) firstAfter(t0 time.Time, idcName string) (sendOutcome, bool) {
	_, outs, _ := g.snapshot()
	for _, o := range outs {
		if o.err == nil && !o.at.Before(t0) && o.res.IDC == idcName {
			return o, true
		}
	}
	return sendOutcome{}, false
}

func sortedQueues(qs []client.MessageQueue) []string {
	out := make([]string, len(qs))
	for i, q := range qs {
		out[i] = q.String()
	}
	sort.Strings(out)
	return out
}
