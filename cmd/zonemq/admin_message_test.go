package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/testutil"
)

func TestCLIAdminMessageOffsetsStatsConnections(t *testing.T) {
	c := cliCluster(t, 2)
	admin := func(args ...string) cliResult {
		t.Helper()
		return cli(t, cliArgs(c, 1, append([]string{"admin"}, args...))...)
	}
	const topic, group = "MsgT", "MsgGroup"
	r := admin("topic", "create", "--topic", topic, "--queues", "2")
	testutil.Equal(t, r.code, 0, r.stderr)
	r = cli(t, cliArgs(c, 1, []string{"send"}, "--topic", topic, "--key-prefix", "order", "--count", "3", "--body", "hello", "--output", "json")...)
	testutil.Equal(t, r.code, 0, r.stderr)
	sent := cliJSONLines(t, r.stdout)
	testutil.Equal(t, len(sent), 3, r.stdout)
	clientID := sent[1]["msgId"].(string)

	// By key: the message with its body and properties.
	var byKey []messageJSON
	r = admin("message", "--topic", topic, "--key", "order-2", "--output", "json")
	testutil.Equal(t, r.code, 0, r.stderr)
	cliDecode(t, r.stdout, &byKey)
	testutil.Equal(t, len(byKey), 1, r.stdout)
	m := byKey[0]
	testutil.Equal(t, m.MsgID, clientID)
	testutil.Equal(t, m.Body, "hello")
	testutil.Equal(t, m.Properties["KEYS"], "order-2")
	testutil.Equal(t, m.IDC, "idc1")

	// By broker (offset) id, and by client id with the topic.
	for _, args := range [][]string{{"--id", m.OffsetMsgID}, {"--id", clientID, "--topic", topic}} {
		var got []messageJSON
		r = admin(append([]string{"message", "--output", "json"}, args...)...)
		testutil.Equal(t, r.code, 0, r.stderr)
		cliDecode(t, r.stdout, &got)
		testutil.Equal(t, got[0].OffsetMsgID, m.OffsetMsgID, args)
		testutil.Equal(t, got[0].Broker, "broker-idc1", args)
	}
	// By queue and offset (queryMsgByOffset).
	var byOffset []messageJSON
	r = admin("message", "--topic", topic, "--broker", m.Broker, "--queue", fmt.Sprint(m.QueueID),
		"--offset", fmt.Sprint(m.QueueOffset), "--output", "json")
	testutil.Equal(t, r.code, 0, r.stderr)
	cliDecode(t, r.stdout, &byOffset)
	testutil.Equal(t, byOffset[0].OffsetMsgID, m.OffsetMsgID, r.stdout)
	testutil.Equal(t, byOffset[0].Body, "hello")
	testutil.Equal(t, admin("message", "--topic", topic, "--queue", "0", "--offset", "0").code, 1) // two brokers: name one
	testutil.Equal(t, admin("message", "--topic", topic, "--broker", m.Broker, "--queue", "0", "--offset", "999").code, 1)
	testutil.Equal(t, admin("message", "--topic", topic, "--queue", "0").code, 2)
	r = admin("message", "--id", m.OffsetMsgID)
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.True(t, len(r.stdout) > 0 && containsLine(r.stdout, "Body (text, 5 bytes):  hello"), r.stdout)
	// Bad input: a usage error (2) or a clear failure (1).
	testutil.Equal(t, admin("message", "--topic", topic).code, 2)
	testutil.Equal(t, admin("message", "--key", "k").code, 2)
	testutil.Equal(t, admin("message", "--id", "nope").code, 1)
	testutil.Equal(t, admin("message", "--topic", topic, "--key", "absent").code, 1)
	testutil.Equal(t, admin("offset", "reset", "--group", group, "--topic", topic, "--to", "yesterday").code, 2)

	// Reset to latest: no lag; to earliest: everything again.
	var reset []offsetResetJSON
	r = admin("offset", "reset", "--group", group, "--topic", topic, "--to", "latest", "--output", "json")
	testutil.Equal(t, r.code, 0, r.stderr)
	cliDecode(t, r.stdout, &reset)
	testutil.Equal(t, len(reset), 4, r.stdout) // 2 queues on each of 2 brokers
	var g groupJSON
	r = admin("group", "--group", group, "--topic", topic, "--output", "json")
	testutil.Equal(t, r.code, 0, r.stderr)
	cliDecode(t, r.stdout, &g)
	testutil.Equal(t, g.TotalLag, int64(0), r.stdout)
	r = admin("offset", "reset", "--group", group, "--topic", topic, "--to", "earliest")
	testutil.Equal(t, r.code, 0, r.stderr)
	r = admin("group", "--group", group, "--topic", topic, "--output", "json")
	cliDecode(t, r.stdout, &g)
	testutil.Equal(t, g.TotalLag, int64(3), r.stdout)

	// Broker stats: every broker, with its TPS.
	var stats []brokerStatsJSON
	r = admin("broker", "stats", "--interval", "200ms", "--output", "json")
	testutil.Equal(t, r.code, 0, r.stderr)
	cliDecode(t, r.stdout, &stats)
	testutil.Equal(t, len(stats), 2, r.stdout)
	for _, s := range stats {
		testutil.Equal(t, s.Error, "", s.Broker)
	}

	// Consumer connections: a live consumer of idc2 with its subscription.
	cc := c.ClientConfig(2)
	pc, err := client.NewPushConsumer(client.ConsumerConfig{ClientConfig: cc, Group: group})
	testutil.NoError(t, err)
	testutil.NoError(t, pc.Subscribe(topic, "TagA || TagB", func(context.Context, []*client.MessageExt) client.ConsumeResult {
		return client.ConsumeSuccess
	}))
	testutil.NoError(t, pc.Start(context.Background()))
	t.Cleanup(func() { pc.Shutdown(context.Background()) })
	var conns []consumerConnJSON
	testutil.Eventually(t, 10*time.Second, func() error {
		r = admin("consumer", "connections", "--group", group, "--output", "json")
		if r.code != 0 {
			return cliErr(r)
		}
		cliDecode(t, r.stdout, &conns)
		return nil
	})
	testutil.True(t, len(conns) >= 1, r.stdout)
	testutil.Equal(t, conns[0].IDC, "idc2", r.stdout)
	testutil.Equal(t, conns[0].Subscription[topic], "TagA || TagB", r.stdout)
	testutil.Equal(t, admin("consumer", "connections", "--group", "NobodyHere").code, 1)

	// Producer connections: a live producer of idc2, listed once it has
	// sent (its heartbeat follows within a second).
	p, err := client.NewProducer(client.ProducerConfig{ClientConfig: cc, Group: "MsgProducers"})
	testutil.NoError(t, err)
	testutil.NoError(t, p.Start(context.Background()))
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	_, err = p.SendSync(context.Background(), &client.Message{Topic: topic, Body: []byte("x")})
	testutil.NoError(t, err, "send")
	var prods []producerConnJSON
	testutil.Eventually(t, 10*time.Second, func() error {
		r = admin("producer", "connections", "--group", "MsgProducers", "--output", "json")
		if r.code != 0 {
			return cliErr(r)
		}
		cliDecode(t, r.stdout, &prods)
		return nil
	})
	testutil.Equal(t, prods[0].IDC, "idc2", r.stdout)

	// Topic stats: idc1's three sends on broker-idc1, and a TPS > 0 for
	// sends made during the interval.
	stop := make(chan struct{})
	sending := make(chan struct{})
	go func() {
		defer close(sending)
		for i := 0; i < 500; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			p.SendSync(context.Background(), &client.Message{Topic: topic, Body: []byte("tps")})
		}
	}()
	var ts []topicStatsJSON
	r = admin("topic", "stats", "--topic", topic, "--interval", "1s", "--output", "json")
	close(stop)
	<-sending
	testutil.Equal(t, r.code, 0, r.stderr)
	cliDecode(t, r.stdout, &ts)
	var inIDC1 int64
	var tps float64
	for _, row := range ts {
		testutil.Equal(t, row.Topic, topic, r.stdout)
		if row.Broker == "broker-idc1" {
			inIDC1 = max(inIDC1, row.InTotal)
		}
		tps += row.InTPS
	}
	testutil.True(t, inIDC1 >= 3, "broker-idc1 stored", inIDC1, r.stdout)
	testutil.True(t, tps > 0, "in TPS while sending", r.stdout)
	r = admin("topic", "stats", "--interval", "200ms")
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.True(t, strings.Contains(r.stdout, "IN TPS") && strings.Contains(r.stdout, topic), r.stdout)
	testutil.Equal(t, admin("topic", "stats", "--interval", "1ms").code, 2)
	testutil.Equal(t, admin("producer", "connections", "--group", "NobodyHere").code, 1)
}

func TestCLIAdminResetTargetParsing(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	for in, want := range map[string]admin.ResetTarget{
		"earliest":                  {Earliest: true},
		"latest":                    {Latest: true},
		"10m":                       {Time: now.Add(-10 * time.Minute)},
		"1790000000000":             {Time: time.UnixMilli(1_790_000_000_000)},
		"2027-01-02T03:04:05Z":      {Time: time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)},
		"2027-01-02T03:04:05+08:00": {Time: time.Date(2027, 1, 1, 19, 4, 5, 0, time.UTC)},
	} {
		got, err := parseResetTarget(in, now)
		testutil.NoError(t, err, in)
		testutil.True(t, got.Earliest == want.Earliest && got.Latest == want.Latest && got.Time.Equal(want.Time), in, got)
	}
	for _, bad := range []string{"", "soon", "-5m", "0"} {
		if _, err := parseResetTarget(bad, now); err == nil {
			t.Errorf("parseResetTarget(%q) accepted", bad)
		}
	}
}

// containsLine reports whether out has a line equal to line (trailing
// spaces ignored).
func containsLine(out, line string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimRight(l, " ") == line {
			return true
		}
	}
	return false
}

// cliErr turns a failed run into an error for Eventually.
func cliErr(r cliResult) error { return fmt.Errorf("exit %d: %s", r.code, r.stderr) }
