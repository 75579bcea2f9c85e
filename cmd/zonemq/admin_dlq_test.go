package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/testutil"
)

func TestCLIAdminDLQBrowseAndResend(t *testing.T) {
	c := cliCluster(t, 1)
	admin := func(args ...string) cliResult {
		t.Helper()
		return cli(t, cliArgs(c, 1, append([]string{"admin"}, args...))...)
	}
	const topic, group = "DeadT", "DeadGroup"
	testutil.Equal(t, admin("topic", "create", "--topic", topic, "--queues", "1").code, 0)

	// A consumer that fails the message until it comes back from the DLQ.
	resent := make(chan *client.MessageExt, 1)
	pc, err := client.NewPushConsumer(client.ConsumerConfig{ClientConfig: c.ClientConfig(1), Group: group,
		ConsumeFromWhere: client.ConsumeFromFirstOffset, MaxReconsumeTimes: 1, RetryDelayLevel: 1})
	testutil.NoError(t, err)
	testutil.NoError(t, pc.Subscribe(topic, "*", func(_ context.Context, ms []*client.MessageExt) client.ConsumeResult {
		for _, m := range ms {
			if m.Properties["RESEND_FROM_DLQ"] == "" {
				return client.ConsumeRetryLater
			}
			select {
			case resent <- m:
			default:
			}
		}
		return client.ConsumeSuccess
	}))
	testutil.NoError(t, pc.Start(context.Background()))
	t.Cleanup(func() { pc.Shutdown(context.Background()) })
	r := cli(t, cliArgs(c, 1, []string{"send"}, "--topic", topic, "--key-prefix", "dead", "--count", "1", "--body", "poison")...)
	testutil.Equal(t, r.code, 0, r.stderr)

	var dead []messageJSON
	testutil.Eventually(t, 30*time.Second, func() error {
		r = admin("dlq", "browse", "--group", group, "--output", "json")
		if r.code != 0 {
			return cliErr(r)
		}
		cliDecode(t, r.stdout, &dead)
		if len(dead) == 0 {
			return cliErr(cliResult{code: 0, stderr: "the DLQ is still empty"})
		}
		return nil
	})
	testutil.Equal(t, dead[0].Body, "poison")
	testutil.Equal(t, strings.Join(dead[0].Keys, " "), "dead-1")
	testutil.Equal(t, dead[0].Topic, "%DLQ%"+group)
	r = admin("dlq", "browse", "--group", group)
	testutil.True(t, strings.Contains(r.stdout, dead[0].OffsetMsgID) && strings.Contains(r.stdout, "poison"), r.stdout)

	r = admin("dlq", "resend", "--group", group, "--id", dead[0].OffsetMsgID)
	testutil.Equal(t, r.code, 0, r.stderr)
	select {
	case m := <-resent:
		testutil.Equal(t, string(m.Body), "poison")
		testutil.Equal(t, m.Topic, topic) // delivered as the original topic's message
	case <-time.After(30 * time.Second):
		t.Fatal("the resent message was not consumed within 30 s")
	}

	// Bad input and empty queues.
	r = admin("dlq", "browse", "--group", "NoDeadHere")
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.True(t, strings.Contains(r.stdout, "empty"), r.stdout)
	testutil.Equal(t, admin("dlq", "resend", "--group", "OtherGroup", "--id", dead[0].OffsetMsgID).code, 1)
	testutil.Equal(t, admin("dlq", "resend", "--group", group).code, 2)
}

func TestCLIAdminBrokerConfig(t *testing.T) {
	c := cliCluster(t, 1)
	admin := func(args ...string) cliResult {
		t.Helper()
		return cli(t, cliArgs(c, 1, append([]string{"admin"}, args...))...)
	}
	var cfg map[string]string
	r := admin("broker", "config", "--broker", c.BrokerAddr(1), "--output", "json")
	testutil.Equal(t, r.code, 0, r.stderr)
	cliDecode(t, r.stdout, &cfg)
	testutil.Equal(t, cfg["brokerName"], "broker-idc1", r.stdout)
	testutil.Equal(t, cfg["zoneName"], "idc1", r.stdout)

	r = admin("broker", "config", "--broker", c.BrokerAddr(1), "--set", "diskMaxUsedSpaceRatio=97", "--output", "json")
	testutil.Equal(t, r.code, 0, r.stderr)
	cliDecode(t, r.stdout, &cfg)
	testutil.Equal(t, cfg["diskMaxUsedSpaceRatio"], "97", r.stdout)

	// Not changeable live, or out of range: refused, nothing changed.
	r = admin("broker", "config", "--broker", c.BrokerAddr(1), "--set", "brokerName=x,diskMaxUsedSpaceRatio=50")
	testutil.Equal(t, r.code, 1, r.stdout)
	testutil.True(t, strings.Contains(r.stderr, "cannot change at run time"), r.stderr)
	testutil.Equal(t, admin("broker", "config", "--broker", c.BrokerAddr(1), "--set", "diskMaxUsedSpaceRatio=150").code, 1)
	r = admin("broker", "config", "--broker", c.BrokerAddr(1), "--output", "json")
	cliDecode(t, r.stdout, &cfg)
	testutil.Equal(t, cfg["diskMaxUsedSpaceRatio"], "97", r.stdout)
	testutil.Equal(t, admin("broker", "config").code, 2)

	// A broker's name (what admin cluster shows first) stands for its
	// master's address; a name nobody registered is a usage error naming
	// both forms.
	r = admin("broker", "config", "--broker", "broker-idc1", "--output", "json")
	testutil.Equal(t, r.code, 0, r.stderr)
	cliDecode(t, r.stdout, &cfg)
	testutil.Equal(t, cfg["brokerName"], "broker-idc1", r.stdout)
	r = admin("broker", "config", "--broker", "broker-idc9")
	testutil.Equal(t, r.code, 2, r.stderr)
	cliOneLine(t, r, "--broker broker-idc9 is neither host:port nor the name of a live broker")
}
