package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/broker"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestConsumerTakeoverBrokerHang: idc1's broker hangs — every connection to
// it, from clients and to the name servers, stays open but nothing is
// forwarded (proxies in Blackhole mode), as under SIGSTOP. idc1's consumer
// joins idc2's broker's queues once it finds the broker silent (or the name
// servers expire it, whichever comes first), and every message sent during
// the hang is consumed.
func TestConsumerTakeoverBrokerHang(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rig := newHangRig(t, ctx, 0)
	c, config := rig.c, rig.config

	const topic, group = "HangTakeover", "hangTakeoverGroup"
	createTopic(t, c, topic, 4)
	rec := newRecorder()
	c1 := newConsumer(t, config(1), group, topic, rec.handler("c1"))
	c2 := newConsumer(t, config(2), group, topic, rec.handler("c2"))
	b1, b2 := devcluster.BrokerName(1), devcluster.BrokerName(2)
	testutil.Eventually(t, 15*time.Second, func() error {
		if n := len(queuesOf(c1, topic, b1)); n != 4 {
			return fmt.Errorf("c1 holds %d of %s's queues", n, b1)
		}
		if n := len(queuesOf(c2, topic, b2)); n != 4 {
			return fmt.Errorf("c2 holds %d of %s's queues", n, b2)
		}
		return nil
	})
	p := newProducer(t, config(1))
	pre, _ := sendN(t, p, topic, "pre", 8)
	rec.waitAll(t, pre, 15*time.Second)

	// Hang.
	rig.hang(true)
	t0 := time.Now()
	moved := make(chan time.Duration, 1)
	go func() {
		for time.Since(t0) < 30*time.Second {
			if len(queuesOf(c1, topic, b2)) > 0 {
				moved <- time.Since(t0)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	var during []string
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("during-%d", i)
		res, err := p.SendSync(context.Background(), &client.Message{Topic: topic, Keys: []string{key}, Body: []byte(key)})
		testutil.NoError(t, err, "send during the hang")
		testutil.Equal(t, res.IDC, "idc2", "IDC storing "+key)
		during = append(during, key)
	}
	sendsTook := time.Since(t0)
	testutil.Eventually(t, 20*time.Second, func() error {
		if len(queuesOf(c1, topic, b2)) == 0 {
			return fmt.Errorf("idc1's consumer holds none of %s's queues (it holds %v)", b2, sortedQueues(c1.Queues()))
		}
		return nil
	})
	t.Logf("broker hang: %d sends took %v; idc1's consumer holds %s's queues %v after the hang began", len(during), sendsTook, b2, <-moved)
	rec.waitAll(t, during, 20*time.Second)
	t.Logf("broker hang: all %d messages sent during the hang consumed %v after it began", len(during), time.Since(t0))
}

// hangRig is a two-IDC cluster whose idc1 broker can be hung: every
// connection to it, from clients and to the name servers, goes through a
// proxy that can stop forwarding while keeping the connection open, as
// under SIGSTOP.
type hangRig struct {
	c       *devcluster.Cluster
	proxies []*testutil.Proxy
	config  func(n int) client.ClientConfig
}

// hang stops (true) or resumes (false) every connection to idc1's broker.
func (r *hangRig) hang(on bool) {
	for _, px := range r.proxies {
		px.Blackhole(on)
	}
}

// newHangRig starts the cluster; brokerExpiry, if not zero, replaces the
// name servers' broker expiry.
func newHangRig(t *testing.T, ctx context.Context, brokerExpiry time.Duration) *hangRig {
	t.Helper()
	// idc1's broker is restarted once the cluster runs, registering through
	// proxies to the name servers (their addresses are known only then).
	var mu sync.Mutex
	var nsVia []string
	c, err := devcluster.Start(ctx, devcluster.Options{
		IDCs: 2, DataDir: t.TempDir(), Logger: testLogger(),
		Namesrv: func(_ int, o *namesrv.Options) {
			if brokerExpiry > 0 {
				o.BrokerExpiry = brokerExpiry
			}
		},
		Broker: func(n int, o *broker.Options) {
			mu.Lock()
			defer mu.Unlock()
			if n == 1 && nsVia != nil {
				o.NamesrvAddrs = nsVia
				o.AddrsrvURLs = nil
				// A frozen process closes nothing: keep the broker from
				// closing its name-server connections on a timeout (the
				// name server would drop it at once), so it is expired by
				// silence, as after SIGSTOP.
				o.NamesrvTimeout = time.Minute
			}
		},
	})
	testutil.NoError(t, err, "devcluster.Start")
	t.Cleanup(func() { c.Close() })

	var proxies []*testutil.Proxy
	newProxy := func(target string) *testutil.Proxy {
		p, err := testutil.NewProxy(c.Host(1)+":0", target)
		testutil.NoError(t, err)
		t.Cleanup(func() { p.Close() }) // before c.Close: cleanups run last-in first-out
		proxies = append(proxies, p)
		return p
	}
	var via []string
	for _, ns := range c.NamesrvAddrs() {
		via = append(via, newProxy(ns).Addr())
	}
	mu.Lock()
	nsVia = via
	mu.Unlock()
	c.StopBroker(1)
	testutil.NoError(t, c.StartBroker(1), "restart idc1's broker behind proxies")
	testutil.NoError(t, c.WaitRegistered(ctx), "WaitRegistered")
	clientProxy := newProxy(c.BrokerAddr(1))

	// Every client reaches idc1's broker through clientProxy.
	config := func(n int) client.ClientConfig {
		dc := newDialCounter(c.Host(n))
		dc.redirect(c.BrokerAddr(1), clientProxy.Addr())
		cc := clientConfig(c, n)
		cc.Dial = dc.dial
		return cc
	}

	return &hangRig{c: c, proxies: proxies, config: config}
}

// TestConsumerMovesOnSilenceBeforeExpiry: the name servers keep listing
// idc1's hung broker for a minute, so only what the clients see can move
// idc1's consumer: every consumer finds the broker silent (its liveness
// checks go unanswered), counts idc1 as having no live broker, and
// allocates idc2's broker's queues over both IDCs' consumers. When the
// broker answers again, the queues go back.
func TestConsumerMovesOnSilenceBeforeExpiry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rig := newHangRig(t, ctx, time.Minute)
	const topic, group = "SilenceTakeover", "silenceTakeoverGroup"
	createTopic(t, rig.c, topic, 4)
	rec := newRecorder()
	c1 := newConsumer(t, rig.config(1), group, topic, rec.handler("c1"))
	c2 := newConsumer(t, rig.config(2), group, topic, rec.handler("c2"))
	b1, b2 := devcluster.BrokerName(1), devcluster.BrokerName(2)
	holds := func(c *client.PushConsumer, broker string, want int) func() error {
		return func() error {
			if n := len(queuesOf(c, topic, broker)); n != want {
				// Everything that decides a hand-over, for a failure's
				// message: both consumers' queues and idc2's lock table.
				return fmt.Errorf("holds %d of %s's queues, want %d (all: %v; c1 %s: %v; c2 %s: %v; idc2 broker's locks: %v)",
					n, broker, want, sortedQueues(c.Queues()), c1.ClientID(), sortedQueues(c1.Queues()),
					c2.ClientID(), sortedQueues(c2.Queues()), rig.c.QueueLockOwners(2, group))
			}
			return nil
		}
	}
	testutil.Eventually(t, 15*time.Second, holds(c1, b1, 4))
	testutil.Eventually(t, 15*time.Second, holds(c2, b2, 4))

	rig.hang(true)
	// Well before the name servers' one-minute expiry.
	testutil.Eventually(t, 20*time.Second, holds(c1, b2, 2))
	testutil.Eventually(t, 20*time.Second, holds(c2, b2, 2))
	p := newProducer(t, rig.config(2))
	keys, _ := sendN(t, p, topic, "hung", 8)
	rec.waitAll(t, keys, 15*time.Second)

	rig.hang(false)
	testutil.Eventually(t, 20*time.Second, holds(c1, b1, 4))
	testutil.Eventually(t, 20*time.Second, holds(c2, b2, 4))
}
