package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestCLIAdminTrace: rocketmq-client-go with WithTrace on a producer and a
// consumer; `admin trace` shows where each message was produced, stored
// (broker and IDC) and consumed (group and client) — first across an IDC
// hop during idc1's broker failure (checkTraceAcrossIDCs), then with every
// broker up.
func TestCLIAdminTrace(t *testing.T) {
	rlog.SetLogLevel("error")
	t.Setenv("HOME", t.TempDir()) // rocketmq-client-go writes under ~/logs
	c := cliCluster(t, 2)
	const topic = "TracedTopic"
	r := cli(t, cliArgs(c, 1, []string{"admin", "topic", "create", "--topic", topic, "--queues", "2"})...)
	testutil.Equal(t, r.code, 0, r.stderr)

	// rocketmq-client-go keeps one trace client per process and refuses
	// (nil dispatcher) a trace config with other name servers, so every
	// trace check of the package shares this cluster and this config, and
	// the IDC hop runs first, before that client learned a route through
	// the broker it stops.
	trace := &primitive.TraceConfig{NamesrvAddrs: c.NamesrvAddrs(), Access: primitive.Local}
	checkTraceAcrossIDCs(t, c, trace)
	p, err := producer.NewDefaultProducer(
		producer.WithGroupName("traced_pg"),
		producer.WithInstanceName(fmt.Sprintf("traced-p-%d", time.Now().UnixNano())),
		producer.WithNsResolver(primitive.NewPassthroughResolver(c.NamesrvAddrs())),
		producer.WithTrace(trace),
	)
	testutil.NoError(t, err, "NewDefaultProducer")
	testutil.NoError(t, p.Start(), "producer Start")
	t.Cleanup(func() { p.Shutdown() })

	startTracedConsumer(t, topic, "traced_cg", fmt.Sprintf("traced-c-%d", time.Now().UnixNano()), c.NamesrvAddrs(), trace)

	ids := map[string]string{} // msg id → key
	for i := range 3 {
		key := fmt.Sprintf("order-%d", i)
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(key)).WithKeys([]string{key}).WithTag("T"))
		testutil.NoError(t, err, "SendSync")
		ids[res.MsgID] = key
	}

	for id, key := range ids {
		var evs []traceEventJSON
		testutil.Eventually(t, 60*time.Second, func() error {
			r := cli(t, cliArgs(c, 1, []string{"admin", "trace", "--msg-id", id, "--output", "json"})...)
			if r.code != 0 {
				return fmt.Errorf("exit %d: %s", r.code, r.stderr)
			}
			evs = nil
			cliDecode(t, r.stdout, &evs)
			types := map[string]int{}
			for _, e := range evs {
				types[e.Type]++
			}
			if types["Pub"] == 0 || types["SubBefore"] == 0 || types["SubAfter"] == 0 {
				return fmt.Errorf("trace of %s so far: %v", id, types)
			}
			return nil
		})
		for _, e := range evs {
			testutil.Equal(t, e.MsgID, id, "event of another message")
			switch e.Type {
			case "Pub":
				testutil.Equal(t, e.Group, "traced_pg", "producer group")
				testutil.Equal(t, e.Topic, topic, "topic")
				testutil.Equal(t, e.Keys, key, "keys")
				testutil.True(t, e.Success, "send succeeded")
				testutil.True(t, strings.HasPrefix(e.Broker, "broker-idc") && strings.HasPrefix(e.IDC, "idc"),
					fmt.Sprintf("stored on broker %q in IDC %q", e.Broker, e.IDC))
			case "SubBefore", "SubAfter":
				testutil.Equal(t, e.Group, "traced_cg", "consumer group")
				testutil.True(t, e.ClientHost != "", "consumer client host")
				if e.Type == "SubAfter" {
					testutil.True(t, e.Success, "consumed successfully")
				}
			}
		}
	}

	// By key, as text.
	r = cli(t, cliArgs(c, 2, []string{"admin", "trace", "--key", "order-1"})...)
	testutil.Equal(t, r.code, 0, r.stderr)
	t.Logf("zonemq admin trace --key order-1:\n%s", r.stdout)
	for _, want := range []string{"produced to " + topic, "delivered", "consumed", "traced_pg", "traced_cg", "idc"} {
		testutil.True(t, strings.Contains(r.stdout, want), fmt.Sprintf("--key output lacks %q:\n%s", want, r.stdout))
	}
	r = cli(t, cliArgs(c, 1, []string{"admin", "trace", "--key", "no-such-key"})...)
	testutil.True(t, r.code != 0 && strings.Contains(r.stderr, "no trace"), r.stderr)
	r = cli(t, cliArgs(c, 1, []string{"admin", "trace"})...)
	testutil.True(t, r.code != 0 && strings.Contains(r.stderr, "--msg-id"), r.stderr)
}

// checkTraceAcrossIDCs (issue 15): with idc1's broker down, a
// rocketmq-client-go application of idc1 (WithTrace; its instance name ends
// in "@idc=idc1", so its client id says where it lives) produces a message,
// which is stored on idc2's broker, and consumes it from there. `admin
// trace` shows the hop: produced by the idc1 client, stored on broker-idc2
// in idc2, delivered to and consumed by the idc1 client of the group, read
// from broker-idc2. It leaves idc1's broker running again.
func checkTraceAcrossIDCs(t *testing.T, c *devcluster.Cluster, trace *primitive.TraceConfig) {
	const topic = "HopTopic"
	r := cli(t, cliArgs(c, 1, []string{"admin", "topic", "create", "--topic", topic, "--queues", "2"})...)
	testutil.Equal(t, r.code, 0, r.stderr)

	c.StopBroker(1)
	testutil.Eventually(t, 15*time.Second, func() error {
		r := cli(t, cliArgs(c, 1, []string{"admin", "topic", "route", "--topic", topic})...)
		if r.code != 0 || strings.Contains(r.stdout, "broker-idc1") || !strings.Contains(r.stdout, "broker-idc2") {
			return fmt.Errorf("route of %s: %s%s", topic, r.stdout, r.stderr)
		}
		return nil
	})

	// One application of idc1 (producer and consumer share its client id),
	// asking idc1's name server.
	ns := []string{c.NamesrvAddr(1)}
	instance := fmt.Sprintf("hop-%d@idc=idc1", time.Now().UnixNano())
	p, err := producer.NewDefaultProducer(producer.WithGroupName("hop_pg"), producer.WithInstanceName(instance),
		producer.WithNsResolver(primitive.NewPassthroughResolver(ns)), producer.WithTrace(trace), producer.WithRetry(2))
	testutil.NoError(t, err, "NewDefaultProducer")
	testutil.NoError(t, p.Start(), "producer Start")
	defer p.Shutdown()
	saw := startTracedConsumer(t, topic, "hop_cg", instance, ns, trace)

	res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("hop")).WithKeys([]string{"hop-1"}))
	testutil.NoError(t, err, "SendSync")
	testutil.Equal(t, res.MessageQueue.BrokerName, "broker-idc2", "stored on")
	id := res.MsgID

	var evs []traceEventJSON
	testutil.Eventually(t, 60*time.Second, func() error {
		r := cli(t, cliArgs(c, 2, []string{"admin", "trace", "--msg-id", id, "--output", "json"})...)
		if r.code != 0 {
			return fmt.Errorf("exit %d: %s", r.code, r.stderr)
		}
		evs = nil
		cliDecode(t, r.stdout, &evs)
		seen := map[string]bool{}
		for _, e := range evs {
			// Each step needs its client named (the broker learns a stock
			// producer from its heartbeat).
			if e.ClientIDC != "" {
				seen[e.Type] = true
			}
		}
		if !seen["Pub"] || !seen["SubBefore"] || !seen["SubAfter"] {
			return fmt.Errorf("trace of %s so far: %s", id, r.stdout)
		}
		return nil
	})
	for _, e := range evs {
		testutil.Equal(t, e.ClientIDC, "idc1", e.Type, "client IDC")
		testutil.True(t, strings.HasSuffix(e.ClientID, "@"+instance), e.Type, "client id", e.ClientID)
		switch e.Type {
		case "Pub":
			testutil.Equal(t, e.Group, "hop_pg")
			testutil.Equal(t, e.Broker, "broker-idc2", "stored on broker")
			testutil.Equal(t, e.IDC, "idc2", "stored in IDC")
			testutil.True(t, e.Success, "send succeeded")
		case "SubBefore", "SubAfter":
			testutil.Equal(t, e.Group, "hop_cg")
			testutil.Equal(t, e.Broker, "broker-idc2", "read from broker")
			testutil.Equal(t, e.IDC, "idc2", "read from IDC")
			if e.Type == "SubAfter" {
				testutil.True(t, e.Success, "consumed successfully")
			}
		}
	}
	testutil.True(t, saw(id), "the handler saw", id)
	r = cli(t, cliArgs(c, 1, []string{"admin", "trace", "--msg-id", id})...)
	testutil.Equal(t, r.code, 0, r.stderr)
	t.Logf("zonemq admin trace --msg-id %s (idc1's broker down):\n%s", id, r.stdout)
	testutil.NoError(t, c.StartBroker(1), "restart idc1's broker")
}

// startTracedConsumer starts a stock rocketmq-client-go push consumer of
// topic from its first offset, with message trace on, shut down when the
// test ends; saw reports whether its handler got a message id.
func startTracedConsumer(t *testing.T, topic, group, instance string, ns []string, trace *primitive.TraceConfig) (saw func(id string) bool) {
	var mu sync.Mutex
	consumed := map[string]bool{}
	pc, err := consumer.NewPushConsumer(consumer.WithGroupName(group), consumer.WithInstance(instance),
		consumer.WithNsResolver(primitive.NewPassthroughResolver(ns)), consumer.WithTrace(trace),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	testutil.NoError(t, err, "NewPushConsumer")
	testutil.NoError(t, pc.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				consumed[m.MsgId] = true
			}
			return consumer.ConsumeSuccess, nil
		}), "Subscribe")
	testutil.NoError(t, pc.Start(), "consumer Start")
	t.Cleanup(func() { pc.Shutdown() })
	return func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		return consumed[id]
	}
}
