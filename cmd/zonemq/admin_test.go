package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/testutil"
)

func cliDecode(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("output %q is not the expected JSON: %v", out, err)
	}
}

func TestCLIAdminTopics(t *testing.T) {
	c := cliCluster(t, 2)
	admin := func(args ...string) cliResult {
		t.Helper()
		return cli(t, cliArgs(c, 1, append([]string{"admin"}, args...))...)
	}

	// create: by default on every broker of every IDC.
	r := admin("topic", "create", "--topic", "AdmT", "--queues", "2", "--output", "json")
	testutil.Equal(t, r.code, 0, r.stderr)
	var created struct {
		Topic   string `json:"topic"`
		Queues  int    `json:"queues"`
		Brokers []struct {
			IDC  string `json:"idc"`
			Addr string `json:"addr"`
		} `json:"brokers"`
	}
	cliDecode(t, r.stdout, &created)
	testutil.Equal(t, created.Topic, "AdmT")
	testutil.Equal(t, len(created.Brokers), 2)

	// create on one broker only (text output).
	r = admin("topic", "create", "--topic", "OneT", "--broker", c.BrokerAddr(2))
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.True(t, strings.Contains(r.stdout, "broker-idc2"), r.stdout)

	// route: both IDCs' brokers, with their IDC and queue counts.
	r = admin("topic", "route", "--topic", "AdmT", "--output", "json")
	testutil.Equal(t, r.code, 0, r.stderr)
	var route struct {
		Brokers []struct {
			Name       string            `json:"name"`
			IDC        string            `json:"idc"`
			Addrs      map[string]string `json:"addrs"`
			ReadQueues int               `json:"readQueues"`
		} `json:"brokers"`
	}
	cliDecode(t, r.stdout, &route)
	testutil.Equal(t, len(route.Brokers), 2, r.stdout)
	for i, b := range route.Brokers {
		testutil.Equal(t, b.Name, "broker-idc"+string(rune('1'+i)))
		testutil.Equal(t, b.IDC, "idc"+string(rune('1'+i)))
		testutil.Equal(t, b.ReadQueues, 2)
		testutil.Equal(t, b.Addrs["0"], c.BrokerAddr(i+1))
	}
	r = admin("topic", "route", "--topic", "OneT")
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.True(t, strings.HasPrefix(r.stdout, "IDC "), r.stdout)
	testutil.Equal(t, strings.Count(r.stdout, "\n"), 2, r.stdout) // header + one broker

	// list: application topics only, unless --all.
	r = admin("topic", "list", "--output", "json")
	testutil.Equal(t, r.code, 0, r.stderr)
	var topics []string
	cliDecode(t, r.stdout, &topics)
	testutil.True(t, containsString(topics, "AdmT") && containsString(topics, "OneT"), topics)
	testutil.True(t, !containsString(topics, "TBW102"), topics)
	r = admin("topic", "list", "--all")
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.True(t, strings.Contains(r.stdout, "TBW102"), r.stdout)

	// delete, then the route is gone.
	r = admin("topic", "delete", "--topic", "AdmT")
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.Eventually(t, 10*time.Second, func() error {
		r := admin("topic", "route", "--topic", "AdmT")
		if r.code == 0 {
			return fmt.Errorf("route still there: %s", r.stdout)
		}
		return nil
	})
	r = admin("topic", "route", "--topic", "AdmT")
	testutil.Equal(t, r.code, 1)
	cliOneLine(t, r, "topic AdmT does not exist")
	r = admin("topic", "delete", "--topic", "AdmT")
	testutil.Equal(t, r.code, 1)
	cliOneLine(t, r, "does not exist")
}

func TestCLIAdminClusterClientsGroup(t *testing.T) {
	c := cliCluster(t, 2)
	admin := func(args ...string) cliResult {
		t.Helper()
		return cli(t, cliArgs(c, 2, append([]string{"admin"}, args...))...)
	}
	r := admin("cluster", "--output", "json")
	testutil.Equal(t, r.code, 0, r.stderr)
	var brokers []struct {
		IDC           string `json:"idc"`
		Name          string `json:"name"`
		Addr          string `json:"addr"`
		Alive         bool   `json:"alive"`
		LastHeartbeat string `json:"lastHeartbeat"`
	}
	cliDecode(t, r.stdout, &brokers)
	testutil.Equal(t, len(brokers), 2, r.stdout)
	for i, b := range brokers {
		n := i + 1
		testutil.Equal(t, b.IDC, "idc"+string(rune('0'+n)))
		testutil.Equal(t, b.Addr, c.BrokerAddr(n))
		testutil.True(t, b.Alive, b)
	}
	r = admin("cluster")
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.True(t, strings.Contains(r.stdout, "LAST HEARTBEAT") && strings.Contains(r.stdout, "broker-idc2"), r.stdout)

	// A consumer of idc1, running: the clients and the group show it.
	r = cli(t, cliArgs(c, 1, []string{"send"}, "--topic", "GrpT", "--count", "6")...)
	testutil.Equal(t, r.code, 0, r.stderr)
	started := make(chan *client.PushConsumer, 1)
	consumeStartedHook = func(pc *client.PushConsumer) { started <- pc }
	t.Cleanup(func() { consumeStartedHook = nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errb := &cliBuffer{}, &cliBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- cliRunCtx(ctx, cliArgs(c, 1, []string{"consume"},
			"--topic", "GrpT", "--group", "GrpG", "--from", "first", "--output", "json"), out, errb)
	}()
	var pc *client.PushConsumer
	select {
	case pc = <-started:
	case <-time.After(20 * time.Second):
		t.Fatalf("consumer did not start: %s", errb.String())
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		if n := strings.Count(out.String(), "\n"); n < 6 {
			return fmt.Errorf("consumed %d of 6", n)
		}
		return nil
	})

	testutil.Eventually(t, 10*time.Second, func() error {
		r := admin("clients", "--output", "json")
		if r.code != 0 {
			return fmt.Errorf("exit %d: %s", r.code, r.stderr)
		}
		var clients []struct {
			IDC      string   `json:"idc"`
			ClientID string   `json:"clientId"`
			Role     string   `json:"role"`
			Groups   []string `json:"groups"`
		}
		cliDecode(t, r.stdout, &clients)
		for _, cl := range clients {
			if cl.ClientID == pc.ClientID() && cl.IDC == "idc1" && containsString(cl.Groups, "GrpG") {
				return nil
			}
		}
		return fmt.Errorf("consumer %s not listed: %s", pc.ClientID(), r.stdout)
	})
	r = admin("clients", "--client-idc", "idc2")
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.True(t, !strings.Contains(r.stdout, pc.ClientID()), "idc2 filter", r.stdout)

	// The group: offsets committed every second reach the max; the owner
	// of broker-idc1's queues is our idc1 consumer.
	testutil.Eventually(t, 15*time.Second, func() error {
		r := admin("group", "--group", "GrpG", "--output", "json")
		if r.code != 0 { // unknown until its first commit
			return fmt.Errorf("exit %d: %s", r.code, r.stderr)
		}
		var g struct {
			TotalLag int64 `json:"totalLag"`
			Queues   []struct {
				Topic  string `json:"topic"`
				Broker string `json:"broker"`
				IDC    string `json:"idc"`
				Owner  string `json:"owner"`
				Max    int64  `json:"max"`
			} `json:"queues"`
		}
		cliDecode(t, r.stdout, &g)
		if len(g.Queues) == 0 || g.TotalLag != 0 {
			return fmt.Errorf("lag not 0 yet: %s", r.stdout)
		}
		for _, q := range g.Queues {
			if q.Broker == "broker-idc1" && q.Owner != pc.ClientID() {
				return fmt.Errorf("queue %+v not owned by %s", q, pc.ClientID())
			}
		}
		return nil
	})
	r = admin("group", "--group", "GrpG", "--topic", "GrpT")
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.True(t, strings.Contains(r.stdout, "total lag 0"), r.stdout)

	cancel()
	select {
	case code := <-done:
		testutil.Equal(t, code, 0, errb.String())
	case <-time.After(15 * time.Second):
		t.Fatal("consume did not stop")
	}
}

func TestCLIAdminKV(t *testing.T) {
	c := cliCluster(t, 2)
	admin := func(n int, args ...string) cliResult {
		t.Helper()
		return cli(t, cliArgs(c, n, append([]string{"admin", "kv"}, args...))...)
	}
	r := admin(1, "put", "--namespace", "ORDER_TOPIC_CONFIG", "--key", "Orders", "--value", "broker-idc1:4;broker-idc2:4")
	testutil.Equal(t, r.code, 0, r.stderr)
	// Written to every name server: IDC 2's client reads it from its own.
	r = admin(2, "get", "--namespace", "ORDER_TOPIC_CONFIG", "--key", "Orders")
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.Equal(t, r.stdout, "broker-idc1:4;broker-idc2:4\n")
	r = admin(1, "put", "--namespace", "ORDER_TOPIC_CONFIG", "--key", "Other", "--value", "")
	testutil.Equal(t, r.code, 0, r.stderr)
	r = admin(2, "list", "--namespace", "ORDER_TOPIC_CONFIG", "--output", "json")
	testutil.Equal(t, r.code, 0, r.stderr)
	var kvs []kvJSON
	cliDecode(t, r.stdout, &kvs)
	testutil.Equal(t, len(kvs), 2, r.stdout)
	testutil.Equal(t, kvs[0].Key, "Orders")
	r = admin(1, "delete", "--namespace", "ORDER_TOPIC_CONFIG", "--key", "Orders")
	testutil.Equal(t, r.code, 0, r.stderr)
	r = admin(2, "get", "--namespace", "ORDER_TOPIC_CONFIG", "--key", "Orders")
	testutil.Equal(t, r.code, 1)
	cliOneLine(t, r, `no key "Orders"`)
}
