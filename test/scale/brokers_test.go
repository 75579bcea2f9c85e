package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// BenchmarkBrokersPerNameServer is the curve "brokers per name server" of
// issue 25: one name server process and N simulated brokers, each with the
// same 1 000 topics of 8 queues (a cluster whose topics live on every
// broker, so a route names all N), registering in full as a broker does
// and then sending BROKER_HEARTBEAT every second, each on its own
// connection. For each N
//
//	register-s     registering all N (16 at a time)
//	route-KiB      one topic's route answer
//	route-p50-us, route-p99-us   GET_ROUTEINFO_BY_TOPIC of random topics, one at a time
//	ns-MiB         the name server's resident memory
//	ns-%           its CPU over 10 s of the N brokers' heartbeats
//
// ZONEMQ_SCALE_BROKERS overrides the counts (comma-separated).
func BenchmarkBrokersPerNameServer(b *testing.B) {
	curve(b, "BROKERS", []int{1, 10, 50, 100, 200}, "brokers", "brokers-per-namesrv", "brokers per name server", func(b *testing.B, n int) {
		brokersPoint(b, n)
	})
}

const simTopics = 1000

func brokersPoint(b *testing.B, n int) {
	ns := &proc{name: "namesrv", addr: freeAddr(b, "127.0.1.1")}
	ns.args = []string{"namesrv", "--listen", ns.addr, "--idc", "idc1", "--kv-config="}
	ns.start(b)

	table := make(map[string]protocol.TopicConfig, simTopics)
	topics := make([]string, simTopics)
	for i := range topics {
		topics[i] = fmt.Sprintf("ScaleTopic-%06d", i)
		table[topics[i]] = protocol.TopicConfig{TopicName: topics[i], ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6,
			TopicFilterType: "SINGLE_TAG"}
	}
	body, err := json.Marshal(protocol.RegisterBrokerBody{
		TopicConfigSerializeWrapper: protocol.TopicConfigSerializeWrapper{TopicConfigTable: table,
			DataVersion: protocol.DataVersion{Timestamp: time.Now().UnixMilli(), Counter: 1}},
		FilterServerList: []string{}})
	if err != nil {
		b.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() { cancel(); wg.Wait() })
	sims := make([]*simBroker, n)
	for i := range sims {
		sims[i] = &simBroker{name: fmt.Sprintf("sim-%03d", i), addr: fmt.Sprintf("127.0.9.%d:%d", 1+i/200, 10000+i),
			c: remoting.NewClient(remoting.ClientOptions{})}
	}
	began := time.Now()
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	for _, sb := range sims {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := sb.register(ctx, ns.addr, body); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	report(b, "brokers-per-namesrv", n, time.Since(began).Seconds(), "register-s")
	for _, sb := range sims {
		wg.Go(func() { sb.heartbeats(ctx, ns.addr) })
	}

	c := remoting.NewClient(remoting.ClientOptions{MaxFrameSize: 256 << 20})
	b.Cleanup(func() { c.Close() })
	h := protocol.GetRouteInfoRequestHeader{Topic: topics[0]}
	resp, err := invoke(c, ns.addr, protocol.GetRouteInfoByTopic, h.Ext(), nil)
	if err != nil || resp.Code != int32(protocol.Success) {
		b.Fatalf("route: %v %v", err, resp)
	}
	rd, err := protocol.DecodeTopicRouteData(resp.Body)
	if err != nil || len(rd.BrokerDatas) != n {
		b.Fatalf("the route names %d brokers, want %d (%v)", len(rd.BrokerDatas), n, err)
	}
	report(b, "brokers-per-namesrv", n, float64(len(resp.Body))/1024, "route-KiB")
	lat := make([]time.Duration, 0, 2000)
	for range cap(lat) {
		t0 := time.Now()
		if err := routed(c, ns.addr, topics[rand.IntN(simTopics)]); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	report(b, "brokers-per-namesrv", n, float64(lat[len(lat)/2].Microseconds()), "route-p50-us")
	report(b, "brokers-per-namesrv", n, float64(lat[len(lat)*99/100].Microseconds()), "route-p99-us")
	report(b, "brokers-per-namesrv", n, ns.rssMiB(), "ns-MiB")

	const window = 10 * time.Second
	cpu := ns.cpu()
	time.Sleep(window) // the measurement is the window itself
	report(b, "brokers-per-namesrv", n, 100*float64(ns.cpu()-cpu)/float64(window), "ns-%")
	for _, sb := range sims {
		if err := sb.failed(); err != nil {
			b.Fatal(err)
		}
	}
}

// simBroker registers with a name server as a broker would, without being
// one: the name server sees a registration and heartbeats, nothing else.
type simBroker struct {
	name, addr string
	c          *remoting.Client
	mu         sync.Mutex
	err        error
}

func (sb *simBroker) register(ctx context.Context, ns string, body []byte) error {
	h := protocol.RegisterBrokerRequestHeader{BrokerName: sb.name, BrokerAddr: sb.addr, ClusterName: "DefaultCluster",
		HAServerAddr: sb.addr, BrokerID: 0, ZoneName: "idc1", BodyCRC32: int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF),
		Instance: "scale-" + sb.name}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := sb.c.Invoke(ictx, ns, remoting.NewRequest(int32(protocol.RegisterBroker), h.Ext(), body))
	if err == nil && resp.Code != int32(protocol.Success) {
		err = fmt.Errorf("%s: REGISTER_BROKER answered %d %s", sb.name, resp.Code, resp.Remark)
	}
	return err
}

// heartbeats sends BROKER_HEARTBEAT every second until ctx ends.
func (sb *simBroker) heartbeats(ctx context.Context, ns string) {
	defer sb.c.Close()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	h := protocol.BrokerHeartbeatRequestHeader{ClusterName: "DefaultCluster", BrokerAddr: sb.addr, BrokerName: sb.name}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := sb.c.Invoke(ictx, ns, remoting.NewRequest(int32(protocol.BrokerHeartbeat), h.Ext(), nil))
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil && resp.Code != int32(protocol.Success) {
			err = fmt.Errorf("%s: BROKER_HEARTBEAT answered %d %s", sb.name, resp.Code, resp.Remark)
		}
		if err != nil {
			sb.mu.Lock()
			sb.err = err
			sb.mu.Unlock()
			return
		}
	}
}

func (sb *simBroker) failed() error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.err
}
