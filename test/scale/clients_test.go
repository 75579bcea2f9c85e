package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// BenchmarkClientConnections is the curve "client connections" of issue
// 25: one name server and one broker process, and N simulated clients on
// N connections, each heartbeating the broker every second as the SDK does
// (one producer group and one consumer group of ten members, subscribed to
// one topic). For each N
//
//	connect-s      until every client's first heartbeat is answered (64 at a time)
//	broker-%       the broker's CPU over 10 s of the heartbeats (100 = one core)
//	broker-MiB     its resident memory
//	dropped        clients whose connection the broker closed meanwhile
//
// ZONEMQ_SCALE_CONNS overrides the counts (comma-separated).
func BenchmarkClientConnections(b *testing.B) {
	curve(b, "CONNS", []int{10, 100, 1000, 10000}, "conns", "client-connections", "client connections", func(b *testing.B, n int) {
		connectionsPoint(b, n)
	})
}

func connectionsPoint(b *testing.B, n int) {
	// The broker closes connections past --max-connections (10 000 by
	// default, docs/hardening.md): raise it above the simulated clients.
	_, br := startBroker(b, "--max-connections", fmt.Sprint(n+100))
	c := remoting.NewClient(remoting.ClientOptions{})
	b.Cleanup(func() { c.Close() })
	createTopics(b, c, br.addr, []string{"ScaleTopic"})
	clients := make([]*simClient, n)
	for i := range clients {
		clients[i] = newSimClient(fmt.Sprintf("sim-%05d", i), fmt.Sprintf("scale_cg_%d", i/10))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() { cancel(); wg.Wait() })
	began := time.Now()
	joinAll(b, ctx, &wg, br.addr, clients)
	report(b, "client-connections", n, time.Since(began).Seconds(), "connect-s")

	const window = 10 * time.Second
	cpu := br.cpu()
	time.Sleep(window) // the measurement is the window itself
	report(b, "client-connections", n, 100*float64(br.cpu()-cpu)/float64(window), "broker-%")
	report(b, "client-connections", n, br.rssMiB(), "broker-MiB")
	// A client whose heartbeat the broker could not take in time had its
	// connection closed (its registrations expire after 3 s of silence):
	// counted, as what this many connections cost.
	dropped := 0
	for _, sc := range clients {
		if sc.failed() != nil {
			dropped++
		}
	}
	report(b, "client-connections", n, float64(dropped), "dropped")
}

// BenchmarkConsumerGroupSize is the curve "one consumer group of M
// consumers" of issue 25: one broker process and M simulated consumers of
// one group (one topic of 8 queues), heartbeating every second. For each M
//
//	broker-%       the broker's CPU over 10 s of the group's heartbeats
//	join-settle-ms from a new member's first heartbeat until every member
//	               has been told the group changed (NOTIFY_CONSUMER_IDS_CHANGED)
//	               and the broker lists M+1 members
//	leave-settle-ms the same after that member unregisters
//
// ZONEMQ_SCALE_GROUP overrides the sizes (comma-separated).
func BenchmarkConsumerGroupSize(b *testing.B) {
	curve(b, "GROUP", []int{1, 10, 100, 1000}, "consumers", "consumer-group-size", "consumers in one group", func(b *testing.B, m int) {
		groupPoint(b, m)
	})
}

func groupPoint(b *testing.B, m int) {
	_, br := startBroker(b)
	c := remoting.NewClient(remoting.ClientOptions{})
	b.Cleanup(func() { c.Close() })
	createTopics(b, c, br.addr, []string{"ScaleTopic"})
	const group = "scale_cg"
	members := make([]*simClient, m)
	for i := range members {
		members[i] = newSimClient(fmt.Sprintf("sim-%05d", i), group)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() { cancel(); wg.Wait() })
	joinAll(b, ctx, &wg, br.addr, members)
	waitFor(b, "every member listed", time.Minute, func() error { return groupSize(c, br.addr, group, m) })

	const window = 10 * time.Second
	cpu := br.cpu()
	time.Sleep(window) // the measurement is the window itself
	report(b, "consumer-group-size", m, 100*float64(br.cpu()-cpu)/float64(window), "broker-%")

	settled := func(since time.Time, size int) func() error {
		return func() error {
			for _, sc := range members {
				if sc.notified.Load() < since.UnixNano() {
					return fmt.Errorf("%s not told of the change yet", sc.id)
				}
			}
			return groupSize(c, br.addr, group, size)
		}
	}
	newcomer := newSimClient("sim-new", group)
	joined := time.Now()
	if err := newcomer.heartbeat(ctx, br.addr); err != nil {
		b.Fatal(err)
	}
	waitFor(b, "the group settled after a join", time.Minute, settled(joined, m+1))
	report(b, "consumer-group-size", m, float64(time.Since(joined).Microseconds())/1000, "join-settle-ms")
	left := time.Now()
	if err := newcomer.unregister(ctx, br.addr); err != nil {
		b.Fatal(err)
	}
	waitFor(b, "the group settled after a leave", time.Minute, settled(left, m))
	report(b, "consumer-group-size", m, float64(time.Since(left).Microseconds())/1000, "leave-settle-ms")
	newcomer.c.Close()
}

// startBroker starts a name server and a broker process (extra: more
// broker flags).
func startBroker(b *testing.B, extra ...string) (ns, br *proc) {
	ns = &proc{name: "namesrv", addr: freeAddr(b, "127.0.1.1")}
	ns.args = []string{"namesrv", "--listen", ns.addr, "--idc", "idc1", "--kv-config="}
	ns.start(b)
	br = &proc{name: "broker", addr: freeAddr(b, "127.0.1.1")}
	br.args = []string{"broker", "--listen", br.addr, "--idc", "idc1", "--name", "broker-scale",
		"--data", filepath.Join(b.TempDir(), "broker"), "--namesrv", ns.addr}
	br.args = append(br.args, extra...)
	br.start(b)
	return ns, br
}

// groupSize checks that the broker lists size members of group.
func groupSize(c *remoting.Client, addr, group string, size int) error {
	h := map[string]string{"consumerGroup": group}
	resp, err := invoke(c, addr, protocol.GetConsumerListByGroup, h, nil)
	if err != nil {
		return err
	}
	if resp.Code != int32(protocol.Success) {
		return fmt.Errorf("GET_CONSUMER_LIST_BY_GROUP: %d %s", resp.Code, resp.Remark)
	}
	var body struct {
		ConsumerIDList []string `json:"consumerIdList"`
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		return err
	}
	if len(body.ConsumerIDList) != size {
		return fmt.Errorf("%d members listed, want %d", len(body.ConsumerIDList), size)
	}
	return nil
}

// joinAll sends every client's first heartbeat (64 at a time), then keeps
// each heartbeating every second until ctx ends.
func joinAll(b *testing.B, ctx context.Context, wg *sync.WaitGroup, addr string, clients []*simClient) {
	sem := make(chan struct{}, 64)
	errs := make(chan error, len(clients))
	var first sync.WaitGroup
	for _, sc := range clients {
		sem <- struct{}{}
		first.Go(func() {
			defer func() { <-sem }()
			if err := sc.heartbeat(ctx, addr); err != nil {
				errs <- err
			}
		})
	}
	first.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	for _, sc := range clients {
		wg.Go(func() { sc.heartbeats(ctx, addr) })
	}
}

// simClient heartbeats a broker as an SDK client of one producer group and
// one consumer group would, and notes when the broker tells it its group
// changed.
type simClient struct {
	id       string
	c        *remoting.Client
	body     []byte
	notified atomic.Int64 // Unix ns of the last NOTIFY_CONSUMER_IDS_CHANGED
	mu       sync.Mutex
	err      error
}

func newSimClient(id, group string) *simClient {
	sc := &simClient{id: id, c: remoting.NewClient(remoting.ClientOptions{})}
	sc.c.Handle(int32(protocol.NotifyConsumerIDsChanged), func(context.Context, *remoting.Conn, *remoting.Command) *remoting.Command {
		sc.notified.Store(time.Now().UnixNano())
		return nil
	})
	sc.body, _ = json.Marshal(protocol.HeartbeatData{
		ClientID:        id,
		ProducerDataSet: []protocol.ProducerData{{GroupName: "scale_pg"}},
		ConsumerDataSet: []protocol.ConsumerData{{GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: "CLUSTERING",
			ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET", SubscriptionDataSet: []protocol.SubscriptionData{{
				Topic: "ScaleTopic", SubString: "*", ExpressionType: "TAG"}}}},
		HeartbeatIntervalMillis: 1000,
	})
	return sc
}

func (sc *simClient) heartbeat(ctx context.Context, addr string) error {
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := sc.c.Invoke(ictx, addr, remoting.NewRequest(int32(protocol.HeartBeat), map[string]string{}, sc.body))
	if err == nil && resp.Code != int32(protocol.Success) {
		err = fmt.Errorf("%s: HEART_BEAT answered %d %s", sc.id, resp.Code, resp.Remark)
	}
	return err
}

func (sc *simClient) unregister(ctx context.Context, addr string) error {
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	h := protocol.UnregisterClientRequestHeader{ClientID: sc.id, ProducerGroup: "scale_pg", ConsumerGroup: "scale_cg"}
	resp, err := sc.c.Invoke(ictx, addr, remoting.NewRequest(int32(protocol.UnregisterClient), h.Ext(), nil))
	if err == nil && resp.Code != int32(protocol.Success) {
		err = fmt.Errorf("%s: UNREGISTER_CLIENT answered %d %s", sc.id, resp.Code, resp.Remark)
	}
	return err
}

// heartbeats heartbeats every second until ctx ends.
func (sc *simClient) heartbeats(ctx context.Context, addr string) {
	defer sc.c.Close()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := sc.heartbeat(ctx, addr); err != nil {
			if ctx.Err() == nil {
				sc.mu.Lock()
				sc.err = err
				sc.mu.Unlock()
			}
			return
		}
	}
}

func (sc *simClient) failed() error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.err
}
