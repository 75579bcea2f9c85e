package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
)

// Issue 6: the client registry seen from every name server, the
// ORDER_TOPIC_CONFIG KV namespace honoured by ordered producers (stock and
// zonemq), and the KV config surviving a name-server restart — all on the
// real binary.

// listedClient is one client in `zonemq admin clients --output json`.
type listedClient struct {
	IDC      string   `json:"idc"`
	ClientID string   `json:"clientId"`
	Role     string   `json:"role"`
	Groups   []string `json:"groups"`
	Addr     string   `json:"addr"`
	LastSeen string   `json:"lastSeen"`
}

// cliClients lists the clients one name server knows, with the CLI.
func cliClients(t *testing.T, namesrv string) ([]listedClient, error) {
	t.Helper()
	r := runCLI(t, 10*time.Second, "admin", "clients", "--namesrv", namesrv, "--output", "json", "--log-level", "error")
	if r.code != 0 {
		return nil, fmt.Errorf("admin clients --namesrv %s: exit %d: %s", namesrv, r.code, strings.TrimSpace(r.stderr))
	}
	var clients []listedClient
	if err := json.Unmarshal([]byte(r.stdout), &clients); err != nil {
		return nil, fmt.Errorf("admin clients output %q: %v", r.stdout, err)
	}
	return clients, nil
}

// clientWant describes a client process that must be listed.
type clientWant struct {
	what  string
	pid   int
	idc   string
	ip    string
	role  string
	group string // "" = any
}

// matches reports whether c is the client w describes: its id is
// "<ip>@<pid>#<n>@idc=<idc>" (docs/client.md, "Client id").
func (w clientWant) matches(c listedClient) bool {
	prefix := fmt.Sprintf("%s@%d#", w.ip, w.pid)
	return strings.HasPrefix(c.ClientID, prefix) && strings.HasSuffix(c.ClientID, "@idc="+w.idc)
}

// check returns why c, which matches w, is not what w wants.
func (w clientWant) check(c listedClient) error {
	var bad []string
	if c.IDC != w.idc {
		bad = append(bad, fmt.Sprintf("idc %q, want %q", c.IDC, w.idc))
	}
	if c.Role != w.role {
		bad = append(bad, fmt.Sprintf("role %q, want %q", c.Role, w.role))
	}
	if w.group != "" && !slices.Contains(c.Groups, w.group) {
		bad = append(bad, fmt.Sprintf("groups %v lack %q", c.Groups, w.group))
	}
	if host, _, err := net.SplitHostPort(c.Addr); err != nil || host != w.ip {
		bad = append(bad, fmt.Sprintf("addr %q, want one on %s (the client binds --local-ip)", c.Addr, w.ip))
	}
	if _, err := time.Parse(time.RFC3339, c.LastSeen); err != nil {
		bad = append(bad, fmt.Sprintf("lastSeen %q is not RFC 3339", c.LastSeen))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s %s: %s", w.what, c.ClientID, strings.Join(bad, "; "))
	}
	return nil
}

// findClient returns the client of list that w describes.
func findClient(list []listedClient, w clientWant) (listedClient, bool) {
	for _, c := range list {
		if w.matches(c) {
			return c, true
		}
	}
	return listedClient{}, false
}

// sdkClients lists the clients one name server knows, with the SDK's
// admin client (cheaper than a process per poll, so removal is timed closely).
func sdkClients(ctx context.Context, a *admin.Client) ([]listedClient, error) {
	cs, err := a.Clients(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]listedClient, len(cs))
	for i, c := range cs {
		out[i] = listedClient{IDC: c.IDC, ClientID: c.ClientID, Role: c.Role, Groups: c.Groups, Addr: c.Addr,
			LastSeen: c.LastSeen.UTC().Format(time.RFC3339)}
	}
	return out, nil
}

// startNamesrvAdmin starts an SDK admin client that talks to the one name server addr.
func startNamesrvAdmin(t *testing.T, addr string) *admin.Client {
	t.Helper()
	a, err := admin.New(admin.Config{ClientConfig: client.ClientConfig{NamesrvAddrs: []string{addr}}})
	if err != nil {
		t.Fatalf("admin.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatalf("admin Start against %s: %v", addr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a.Shutdown(ctx)
	})
	return a
}

func TestE2EClientHeartbeatsEveryNamesrv(t *testing.T) {
	ns := map[int]string{}
	nsrv := map[int]*server{}
	for n := 1; n <= 2; n++ {
		nsrv[n] = startNamesrv(t, n)
		ns[n] = nsrv[n].addr
	}
	as := map[int]*server{}
	for n := 1; n <= 2; n++ {
		as[n] = startAddrsrv(t, n, ns)
	}
	for n := 1; n <= 2; n++ {
		startBroker(t, n, "broker-"+idcName(n), t.TempDir(), []string{"--addrsrv", as[n].url()})
	}
	const topic = "E2EIssue6Clients"
	group := "e2e_issue6_cg_" + runToken
	createTopic(t, topic, 2, "--addrsrv", as[1].url(), "--idc", "idc1")

	cons := startProc(t, "idc1/consume", "consume", "--addrsrv", as[1].url(), "--idc", "idc1", "--local-ip", idcHost(1),
		"--topic", topic, "--group", group, "--duration", "60s", "--output", "json", "--log-level", "error")
	prod := startProc(t, "idc2/send", "send", "--addrsrv", as[2].url(), "--idc", "idc2", "--local-ip", idcHost(2),
		"--topic", topic, "--count", "0", "--interval", "50ms", "--output", "json", "--log-level", "error")
	wantCons := clientWant{what: "consumer", pid: cons.cmd.Process.Pid, idc: "idc1", ip: idcHost(1), role: "consumer", group: group}
	wantProd := clientWant{what: "producer", pid: prod.cmd.Process.Pid, idc: "idc2", ip: idcHost(2), role: "producer"}

	// Every name server of every IDC lists both clients: each client
	// heartbeats to all of them, not only to its own IDC's.
	start := time.Now()
	for n := 1; n <= 2; n++ {
		eventually(t, 15*time.Second, func() error {
			for _, p := range []*proc{cons, prod} {
				if p.exited() {
					code, _ := p.exitCode(0)
					t.Fatalf("%s exited (status %d) early; stderr:\n%s", p.name, code, tail(p.stderr.String(), 20))
				}
			}
			list, err := cliClients(t, ns[n])
			if err != nil {
				return err
			}
			for _, w := range []clientWant{wantCons, wantProd} {
				c, ok := findClient(list, w)
				if !ok {
					return fmt.Errorf("%s's name server does not list the %s (pid %d) yet: %+v", idcName(n), w.what, w.pid, list)
				}
				if err := w.check(c); err != nil {
					return fmt.Errorf("%s's name server: %v", idcName(n), err)
				}
			}
			if len(list) != 2 {
				return fmt.Errorf("%s's name server lists %d clients, want 2: %+v", idcName(n), len(list), list)
			}
			return nil
		})
	}
	t.Logf("both clients listed on both name servers %v after they started", time.Since(start).Round(time.Millisecond))

	// The sender really sends (it is a working producer, not just a
	// heartbeat).
	eventually(t, 15*time.Second, func() error {
		if !strings.Contains(prod.stdout.String(), `"queueId"`) {
			return fmt.Errorf("the sender has stored nothing yet; stdout %q", tail(prod.stdout.String(), 3))
		}
		return nil
	})

	admins := map[int]*admin.Client{1: startNamesrvAdmin(t, ns[1]), 2: startNamesrvAdmin(t, ns[2])}

	// SIGKILL the consumer: no goodbye. It must leave every name server's
	// list (connection close or client expiry, 3 s by default).
	killed := time.Now()
	cons.kill()
	gone := map[int]time.Duration{}
	deadline := killed.Add(10 * time.Second)
	for len(gone) < 2 {
		for n := 1; n <= 2; n++ {
			if _, done := gone[n]; done {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			list, err := sdkClients(ctx, admins[n])
			cancel()
			if err != nil {
				t.Fatalf("clients of %s's name server: %v", idcName(n), err)
			}
			if _, ok := findClient(list, wantCons); !ok {
				gone[n] = time.Since(killed)
			}
		}
		if len(gone) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the SIGKILLed consumer is still listed %v later (gone from: %v)", time.Since(killed).Round(time.Millisecond), gone)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for n := 1; n <= 2; n++ {
		t.Logf("SIGKILLed consumer gone from %s's name server %v after the kill", idcName(n), gone[n].Round(time.Millisecond))
	}

	// The CLI agrees, and the producer, still running, is still listed.
	for n := 1; n <= 2; n++ {
		list, err := cliClients(t, ns[n])
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := findClient(list, wantCons); ok {
			t.Errorf("%s's name server lists the killed consumer again: %+v", idcName(n), c)
		}
		c, ok := findClient(list, wantProd)
		if !ok {
			t.Errorf("%s's name server lost the running producer: %+v", idcName(n), list)
		} else if err := wantProd.check(c); err != nil {
			t.Errorf("%s's name server: %v", idcName(n), err)
		}
	}
	if prod.exited() {
		t.Fatalf("the sender exited: %s", tail(prod.stderr.String(), 10))
	}

	// SIGSTOP the producer: its connections stay open but it falls silent,
	// so only the client expiry can remove it. SIGCONT brings it back.
	stopped := time.Now()
	prod.signal(syscall.SIGSTOP)
	waitListed := func(what string, since time.Time, listed bool) {
		t.Helper()
		for n := 1; n <= 2; n++ {
			eventually(t, 10*time.Second, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				list, err := sdkClients(ctx, admins[n])
				if err != nil {
					return err
				}
				if _, ok := findClient(list, wantProd); ok != listed {
					return fmt.Errorf("%s's name server: producer listed=%v, want %v: %+v", idcName(n), ok, listed, list)
				}
				return nil
			})
			t.Logf("%s: %s's name server %v after", what, idcName(n), time.Since(since).Round(time.Millisecond))
		}
	}
	waitListed("SIGSTOPped (silent) producer expired", stopped, false)
	resumed := time.Now()
	prod.signal(syscall.SIGCONT)
	waitListed("SIGCONTed producer listed again", resumed, true)
}

// orderRouteOf reads a topic's route with `zonemq admin topic route`.
func orderRouteOf(t *testing.T, topic string, clientArgs ...string) (orderTopicConf string, queues map[string]int, err error) {
	t.Helper()
	r := runCLI(t, 10*time.Second, append([]string{"admin", "topic", "route", "--topic", topic, "--output", "json", "--log-level", "error"}, clientArgs...)...)
	if r.code != 0 {
		return "", nil, fmt.Errorf("admin topic route: exit %d: %s", r.code, strings.TrimSpace(r.stderr))
	}
	var route struct {
		OrderTopicConf string `json:"orderTopicConf"`
		Brokers        []struct {
			Name        string `json:"name"`
			WriteQueues int    `json:"writeQueues"`
		} `json:"brokers"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &route); err != nil {
		return "", nil, fmt.Errorf("admin topic route output %q: %v", r.stdout, err)
	}
	queues = map[string]int{}
	for _, b := range route.Brokers {
		queues[b.Name] = b.WriteQueues
	}
	return route.OrderTopicConf, queues, nil
}

func TestE2ERocketMQOrderedProducerHonoursOrderTopicConf(t *testing.T) {
	testHome(t)
	ns := startNamesrv(t, 1)
	const brokerName = "broker-order"
	startBroker(t, 1, brokerName, t.TempDir(), []string{"--namesrv", ns.addr})
	nsFlags := []string{"--namesrv", ns.addr, "--idc", "idc1"}
	waitBrokersAlive(t, 1, nsFlags...)

	const topic = "OrderT"
	const orderQueues = 3
	conf := fmt.Sprintf("%s:%d", brokerName, orderQueues)
	r := runCLI(t, 30*time.Second, append([]string{"admin", "topic", "create", "--topic", topic, "--queues", "8", "--log-level", "error"}, nsFlags...)...)
	if r.code != 0 {
		t.Fatalf("admin topic create: exit %d: %s", r.code, r.stderr)
	}
	r = runCLI(t, 30*time.Second, append([]string{"admin", "kv", "put", "--namespace", "ORDER_TOPIC_CONFIG", "--key", topic,
		"--value", conf, "--log-level", "error"}, nsFlags...)...)
	if r.code != 0 {
		t.Fatalf("admin kv put: exit %d: %s", r.code, r.stderr)
	}
	// The route carries both: 8 writable queues and the order conf.
	eventually(t, readyTimeout, func() error {
		got, queues, err := orderRouteOf(t, topic, nsFlags...)
		if err != nil {
			return err
		}
		if queues[brokerName] != 8 || got != conf {
			return fmt.Errorf("route of %s: queues %v, orderTopicConf %q; want %s with 8 and %q", topic, queues, got, brokerName, conf)
		}
		return nil
	})

	const n = 60
	check := func(who string, used map[int]int, broker string, queueID int, key string) {
		t.Helper()
		if broker != brokerName || queueID < 0 || queueID >= orderQueues {
			t.Errorf("%s: key %s stored on %s queue %d; want %s queue in [0,%d) (orderTopicConf %q)",
				who, key, broker, queueID, brokerName, orderQueues, conf)
		}
		used[queueID]++
	}
	checkSpread := func(who string, used map[int]int) {
		t.Helper()
		for q := 0; q < orderQueues; q++ {
			if used[q] == 0 {
				t.Errorf("%s: %d sharding keys never used queue %d: %v", who, n, q, used)
			}
		}
		t.Logf("%s: %d keys over queues %v", who, n, used)
	}

	t.Run("rocketmq-client-go", func(t *testing.T) {
		p, err := producer.NewDefaultProducer(
			producer.WithGroupName("e2e_order_pg_"+runToken),
			producer.WithInstanceName("e2e-producer-"+runToken+"-order"),
			producer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.addr})),
			producer.WithQueueSelector(producer.NewHashQueueSelector()),
			producer.WithRetry(2),
		)
		if err != nil {
			t.Fatalf("NewDefaultProducer: %v", err)
		}
		if err := p.Start(); err != nil {
			t.Fatalf("producer Start: %v", err)
		}
		defer p.Shutdown()
		used := map[int]int{}
		for i := 0; i < n; i++ {
			key := fmt.Sprintf("k%d", i)
			msg := primitive.NewMessage(topic, []byte("ordered "+key)).WithShardingKey(key).WithKeys([]string{key})
			res, err := p.SendSync(context.Background(), msg)
			if err != nil {
				t.Fatalf("SendSync %s: %v", key, err)
			}
			if res.Status != primitive.SendOK {
				t.Fatalf("SendSync %s: status %d", key, res.Status)
			}
			check("rocketmq-client-go", used, res.MessageQueue.BrokerName, res.MessageQueue.QueueId, key)
		}
		checkSpread("rocketmq-client-go", used)
	})

	t.Run("zonemq-sdk", func(t *testing.T) {
		p, err := client.NewProducer(client.ProducerConfig{
			ClientConfig: client.ClientConfig{NamesrvAddrs: []string{ns.addr}, IDC: "idc1", LocalIP: idcHost(1)},
			Group:        "e2e_order_zpg_" + runToken,
		})
		if err != nil {
			t.Fatalf("NewProducer: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Start(ctx); err != nil {
			t.Fatalf("producer Start: %v", err)
		}
		defer p.Shutdown(context.Background())
		used := map[int]int{}
		for i := 0; i < n; i++ {
			key := fmt.Sprintf("k%d", i)
			msg := &client.Message{Topic: topic, Keys: []string{key}, Body: []byte("ordered " + key)}
			res, err := p.SendOrderly(ctx, msg, client.HashSelector{}, key)
			if err != nil {
				t.Fatalf("SendOrderly %s: %v", key, err)
			}
			if res.Queue.Topic != topic || res.Queue.BrokerName != res.BrokerName {
				t.Errorf("SendOrderly %s: result queue %v, broker %s", key, res.Queue, res.BrokerName)
			}
			check("zonemq SDK", used, res.BrokerName, res.Queue.QueueID, key)
		}
		checkSpread("zonemq SDK", used)
	})
}

// checkOneLineFailure fails unless r failed with exactly one line on stderr
// that contains every one of want.
func checkOneLineFailure(t *testing.T, what string, r cliResult, want ...string) {
	t.Helper()
	if r.code == 0 {
		t.Errorf("%s: exit 0, want non-zero (stdout %q)", what, r.stdout)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) != 1 || lines[0] == "" || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("%s: want one line on stderr, got %q", what, r.stderr)
		return
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Errorf("%s: stderr %q does not mention %q", what, lines[0], w)
		}
	}
	t.Logf("%s: exit %d: %s", what, r.code, lines[0])
}

func TestE2EKVSurvivesNamesrvRestart(t *testing.T) {
	kvPath := filepath.Join(t.TempDir(), "namesrv", "kvConfig.json")
	// startNamesrv passes --kv-config= (memory only); the later flag wins.
	ns := startNamesrv(t, 1, "--kv-config", kvPath)
	nsFlags := []string{"--namesrv", ns.addr, "--idc", "idc1", "--log-level", "error"}
	kv := func(args ...string) cliResult {
		t.Helper()
		return runCLI(t, 20*time.Second, append(append([]string{"admin", "kv"}, args...), nsFlags...)...)
	}

	const namespace, key = "E2E_NS", "greeting"
	value := "hello; from=issue6 ü"
	if r := kv("put", "--namespace", namespace, "--key", key, "--value", value); r.code != 0 {
		t.Fatalf("kv put: exit %d: %s", r.code, r.stderr)
	}
	// The boundary: a value of exactly the limit is accepted.
	maxValue := strings.Repeat("v", 64<<10)
	if r := kv("put", "--namespace", namespace, "--key", "max", "--value", maxValue); r.code != 0 {
		t.Fatalf("kv put of a %d-byte value: exit %d: %s", len(maxValue), r.code, r.stderr)
	}
	if r := kv("get", "--namespace", namespace, "--key", key); r.code != 0 || r.stdout != value+"\n" {
		t.Fatalf("kv get before the restart: exit %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, value)
	}
	if b, err := os.ReadFile(kvPath); err != nil || !strings.Contains(string(b), `"configTable"`) || !strings.Contains(string(b), namespace) {
		t.Errorf("KV file %s after the put: %v, %q", kvPath, err, tail(string(b), 3))
	}

	took := ns.stopWith(syscall.SIGTERM)
	t.Logf("name server stopped %v after SIGTERM", took.Round(time.Millisecond))
	ns.restart(t)

	if r := kv("get", "--namespace", namespace, "--key", key, "--output", "json"); r.code != 0 {
		t.Fatalf("kv get after the restart: exit %d: %s", r.code, r.stderr)
	} else {
		var got struct{ Namespace, Key, Value string }
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Namespace != namespace || got.Key != key || got.Value != value {
			t.Errorf("kv get after the restart printed %q (%v); want %s/%s=%q", r.stdout, err, namespace, key, value)
		}
	}
	if r := kv("get", "--namespace", namespace, "--key", "max"); r.code != 0 || r.stdout != maxValue+"\n" {
		t.Errorf("kv get of the %d-byte value after the restart: exit %d, %d bytes on stdout, stderr %q",
			len(maxValue), r.code, len(r.stdout), r.stderr)
	}

	// Bad input: a non-zero exit and one clear line; nothing stored.
	empty := kv("put", "--namespace", "", "--key", "k", "--value", "v")
	checkUsageError(t, []string{"admin", "kv", "put", "--namespace", "", "--key", "k", "--value", "v"}, empty)
	checkOneLineFailure(t, "kv put with an empty namespace", empty, "namespace")
	big := strings.Repeat("x", 64<<10+1)
	checkOneLineFailure(t, "kv put of a 65537-byte value", kv("put", "--namespace", namespace, "--key", "big", "--value", big),
		"value", "65537", "65536")
	longKey := strings.Repeat("k", 256)
	checkOneLineFailure(t, "kv put of a 256-byte key", kv("put", "--namespace", namespace, "--key", longKey, "--value", "v"),
		"key", "256", "255")
	r := kv("get", "--namespace", namespace, "--key", "big")
	checkOneLineFailure(t, "kv get of the refused key", r, "big")
	if r := kv("list", "--namespace", namespace, "--output", "json"); r.code != 0 {
		t.Errorf("kv list: exit %d: %s", r.code, r.stderr)
	} else {
		var entries []struct{ Key string }
		if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil {
			t.Errorf("kv list output %q: %v", tail(r.stdout, 3), err)
		}
		var keys []string
		for _, e := range entries {
			keys = append(keys, e.Key)
		}
		if strings.Join(keys, ",") != "greeting,max" {
			t.Errorf("namespace %s holds keys %v after the refused puts; want [greeting max]", namespace, keys)
		}
	}
}
