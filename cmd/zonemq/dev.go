package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/devcluster"
)

func init() {
	register(command{
		name:    "dev",
		summary: "run a whole multi-IDC cluster in this one process, for trying zonemq out",
		run:     runDev,
	})
	register(command{
		name:    "dev-ctl",
		summary: "stop and start one IDC's servers inside a running 'zonemq dev'",
		run:     runDevCtl,
	})
}

const devSynopsis = "[--idcs 2] [--data DIR] [--base-port 10000] [--control ADDR] [--console ADDR] [--topic Demo]"

// devAbout is printed by --help between the synopsis and the flags.
const devAbout = `Runs, in this one process, per IDC n: an address server, a name server and a
broker ("broker-idc<n>"), all on 127.0.n.1. With the default --base-port 10000:

  address server  http://127.0.n.1:18080
  name server     127.0.n.1:19876
  broker          127.0.n.1:10911
  control         http://127.0.0.1:18000   (zonemq dev-ctl talks to it)
  web console     http://127.0.0.1:18088

It prints every address and ready-to-paste send / consume commands, then runs
until Ctrl-C. While it runs, 'zonemq dev-ctl stop broker idc1' (and start,
status) stops and restarts one IDC's servers, to watch traffic move.
`

// devReadyHook, if set (by tests), is called once the cluster is up and the
// banner printed, with the cluster and the control endpoint's URL.
var devReadyHook func(c *devcluster.Cluster, controlURL string)

// devDefaultControlPort is the control endpoint's port offset from
// --base-port (10000 + 8000 = 18000).
const devDefaultControlPort = 8000

// devCtlDefaultControl is the control endpoint dev-ctl talks to when not
// told: the one of a dev cluster on the default base port (10000).
func devCtlDefaultControl() string {
	return "127.0.0.1:" + strconv.Itoa(10000+devDefaultControlPort)
}

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dev", devSynopsis, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: zonemq dev %s\n\n%s\nFlags:\n", devSynopsis, devAbout)
		fs.PrintDefaults()
	}
	idcs := fs.Int("idcs", 2, "how many IDCs to run (1..254); IDC n lives on 127.0.n.1")
	dataDir := fs.String("data", "", "keep the data in `DIR` (created if missing) so a restart finds it (default: a temporary folder, removed on exit)")
	basePort := fs.Int("base-port", 10000, "port scheme base: address servers on BASE+8080, name servers BASE+9876, brokers BASE+911;\n"+
		"0 picks free ports (for tests; printed commands then differ per run)")
	control := fs.String("control", "", "control endpoint `host:port` for dev-ctl (default 127.0.0.1:BASE+8000, or a free port\n"+
		"with --base-port 0); 'off' disables it")
	consoleAddr := fs.String("console", "", "web console `host:port` (default 127.0.0.1:BASE+8088, or a free port with\n"+
		"--base-port 0); 'off' disables it")
	topic := fs.String("topic", "Demo", "topic created on every broker at start, ready for the printed commands ('' for none)")
	logLevel := fs.String("log-level", "warn", "server log `level` on stderr: debug, info (every registration and failover), warn or error")
	replicas := fs.Int("replicas", 1, "`copies` of each IDC's broker group, the master counted: 2 adds a replica of every\n"+
		"IDC's broker in the next IDC (on port BASE+912), so an IDC's messages survive its loss")
	replication := fs.String("replication", "sync", "how masters acknowledge with --replicas > 1: sync (every in-sync replica holds\n"+
		"the message) or async")
	metrics := fs.Bool("metrics", true, "serve Prometheus /metrics on every server, on its IDC's address: brokers BASE+9100+id,\n"+
		"name servers BASE+9200, address servers BASE+9300 (free ports with --base-port 0)")
	withController := fs.Bool("controller", false, "run a failover-controller voter beside every IDC's name server (on BASE+9880,\n"+
		"Raft BASE+9881) and let it elect each group's master (docs/controller.md); useful with --replicas 2+")
	if err := parseQuiet(fs, args, stderr); err != nil {
		return err
	}
	switch {
	case *idcs < 1 || *idcs > 254:
		return usagef("--idcs must be within 1..254, got %d", *idcs)
	case *basePort < 0 || *basePort+9876 > 65535:
		return usagef("--base-port must be 0 or leave room for BASE+9876 <= 65535, got %d", *basePort)
	case *replicas < 1 || *replicas > *idcs:
		return usagef("--replicas must be within 1..--idcs (%d), got %d", *idcs, *replicas)
	case *replication != "sync" && *replication != "async":
		return usagef("--replication must be sync or async, got %q", *replication)
	}
	if *control == "" {
		port := 0
		if *basePort > 0 {
			port = *basePort + devDefaultControlPort
		}
		*control = "127.0.0.1:" + strconv.Itoa(port)
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	if *dataDir != "" {
		if err := os.MkdirAll(*dataDir, 0o755); err != nil {
			return fmt.Errorf("--data: %w", err)
		}
	}

	// Bind the control endpoint first: if a dev cluster already runs, its
	// port is taken and we say so before starting anything.
	var ln net.Listener
	if *control != "off" {
		if ln, err = net.Listen("tcp", *control); err != nil {
			return fmt.Errorf("control endpoint: %v (is another 'zonemq dev' running? try --base-port 20000)", err)
		}
		defer ln.Close()
	}
	start := time.Now()
	dopts := devcluster.Options{IDCs: *idcs, DataDir: *dataDir, BasePort: *basePort, Logger: logger,
		Replicas: *replicas, Replication: *replication, Controller: *withController, Secure: true, AccessPoints: true}
	if *metrics {
		enableDevMetrics(&dopts, *basePort)
	}
	c, err := devcluster.Start(ctx, dopts)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return fmt.Errorf("cannot start the dev cluster: %s", oneLine(err.Error()))
	}
	defer c.Close() // after the control server below has stopped
	if *topic != "" {
		if err := createDevTopic(ctx, c, *topic); err != nil {
			return fmt.Errorf("creating topic %s: %s", *topic, oneLine(err.Error()))
		}
	}

	ctl := newDevControl(c)
	controlURL := ""
	if ln != nil {
		controlURL = "http://" + ln.Addr().String()
		srv := &http.Server{Handler: ctl.handler(), ReadHeaderTimeout: 5 * time.Second}
		served := make(chan struct{})
		go func() {
			defer close(served)
			_ = srv.Serve(ln)
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			<-served
		}()
	}
	consoleURL := ""
	if *consoleAddr != "off" {
		url, stop, err := startDevConsole(c, devConsoleListen(*consoleAddr, *basePort), logger)
		if err != nil {
			return fmt.Errorf("web console: %v", err)
		}
		defer stop()
		consoleURL = url
	}
	printDevBanner(stdout, c, devBannerOptions{
		elapsed: time.Since(start), dataDir: *dataDir, topic: *topic, controlURL: controlURL,
		// dev-ctl finds only the default base port's endpoint by itself.
		defaultControl: *control == devCtlDefaultControl(),
	})
	printDevMetrics(stdout, c)
	if consoleURL != "" {
		fmt.Fprintf(stdout, "\nWeb console (IDCs, live traffic, failover timeline): %s\n", consoleURL)
	}
	if devReadyHook != nil {
		devReadyHook(c, controlURL)
	}
	<-ctx.Done()
	fmt.Fprintln(stderr, "zonemq dev: stopping")
	return nil
}

// createDevTopic creates topic on every broker, as IDC 1's client.
func createDevTopic(ctx context.Context, c *devcluster.Cluster, topic string) error {
	a, err := admin.New(admin.Config{ClientConfig: c.ClientConfig(1)})
	if err != nil {
		return err
	}
	if err := a.Start(ctx); err != nil {
		return err
	}
	defer a.Shutdown(context.Background())
	addrs := make([]string, 0, c.IDCs())
	for n := 1; n <= c.IDCs(); n++ {
		addrs = append(addrs, c.BrokerAddr(n))
	}
	if err := a.CreateTopic(ctx, admin.TopicSpec{Topic: topic, Brokers: addrs}); err != nil {
		return err
	}
	// Wait until the name servers route it, so the printed consume
	// commands find it at once.
	if !waitTopicListed(ctx, a, topic, addrs) {
		return errors.New("the name servers do not route it yet")
	}
	return nil
}

type devBannerOptions struct {
	elapsed        time.Duration
	dataDir        string
	topic          string
	controlURL     string
	defaultControl bool
}

// printDevBanner prints the addresses and the commands to try.
func printDevBanner(w io.Writer, c *devcluster.Cluster, o devBannerOptions) {
	prog := programName()
	fmt.Fprintf(w, "zonemq dev: %d IDCs up in %.1fs.", c.IDCs(), o.elapsed.Seconds())
	if o.dataDir != "" {
		fmt.Fprintf(w, " Data in %s (kept).\n\n", c.DataDir())
	} else {
		fmt.Fprintf(w, " Data in %s (removed on exit).\n\n", c.DataDir())
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "IDC\tADDRESS SERVER\tNAME SERVER\tBROKER")
	for n := 1; n <= c.IDCs(); n++ {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\n", devcluster.IDCName(n), c.AddrsrvURL(n), c.NamesrvAddr(n),
			devcluster.BrokerName(n), c.BrokerAddr(n))
	}
	tw.Flush()
	if addrs := c.ControllerAddrs(); len(addrs) > 0 {
		fmt.Fprintf(w, "\nFailover controller (one voter per IDC): %s\n", strings.Join(addrs, ", "))
		fmt.Fprintf(w, "  %s admin controller status --controller %s\n", prog, strings.Join(addrs, ","))
	}
	if c.Replicas() > 1 {
		fmt.Fprintf(w, "\nReplicas (each group's id 1..%d, copying its master's log):\n", c.Replicas()-1)
		for n := 1; n <= c.IDCs(); n++ {
			for id := int64(1); id < int64(c.Replicas()); id++ {
				fmt.Fprintf(w, "  %s id %d  %s\n", devcluster.BrokerName(n), id, c.ReplicaAddr(n, id))
			}
		}
	}
	if c.AccessPointAddr(1) != "" {
		var aps []string
		for n := 1; n <= c.IDCs(); n++ {
			aps = append(aps, c.AccessPointAddr(n))
		}
		fmt.Fprintf(w, "\nRocketMQ 5 clients (gRPC, TLS or plaintext; producers and consumers): one access point per IDC,\n"+
			"endpoint %q (docs/grpc.md).\n", strings.Join(aps, ";"))
	}
	if c.Secure() {
		fmt.Fprintf(w, "\nThe servers authenticate each other with the cluster secret in %s. Admin commands that\n"+
			"change the cluster (broker switch, kv put/delete, topic delete, controller elect) need --cluster-secret-file %s.\n",
			c.SecretFile(), c.SecretFile())
	}
	topic := o.topic
	if topic == "" {
		topic = "Demo"
	}
	if underGoRun() {
		fmt.Fprintf(w, "\nBuild the binary once for the commands below (go run would compile again for each and hide its exit status):\n\n")
		fmt.Fprintf(w, "  go build -o zonemq ./cmd/zonemq\n")
	}
	fmt.Fprintf(w, "\nTry it, each command in its own terminal. A consumer in every IDC, one group:\n\n")
	for n := 1; n <= c.IDCs(); n++ {
		fmt.Fprintf(w, "  %s consume %s --topic %s --group DemoGroup\n", prog, devClientFlags(c, n), topic)
	}
	fmt.Fprintf(w, "\nA producer in every IDC, two messages a second:\n\n")
	for n := 1; n <= c.IDCs(); n++ {
		fmt.Fprintf(w, "  %s send %s --topic %s --count 0 --interval 500ms --key-prefix %s\n",
			prog, devClientFlags(c, n), topic, strings.ToUpper(devcluster.IDCName(n)))
	}
	if o.controlURL != "" {
		ctl := ""
		if !o.defaultControl {
			ctl = " --control " + o.controlURL
		}
		fmt.Fprintf(w, "\nFail idc1's broker and watch idc1's traffic move to another IDC; then bring it back:\n\n")
		fmt.Fprintf(w, "  %s dev-ctl%s stop broker idc1\n", prog, ctl)
		fmt.Fprintf(w, "  %s dev-ctl%s start broker idc1\n", prog, ctl)
		fmt.Fprintf(w, "  %s dev-ctl%s status\n", prog, ctl)
		fmt.Fprintf(w, "\n(roles: broker, namesrv, addrsrv, all; control endpoint %s)\n", o.controlURL)
	}
	fmt.Fprintf(w, "\nLook inside: the brokers by IDC, the group's queues (owner, lag), the live clients:\n\n")
	fmt.Fprintf(w, "  %s admin cluster %s\n", prog, devClientFlags(c, 1))
	fmt.Fprintf(w, "  %s admin group %s --group DemoGroup --topic %s\n", prog, devClientFlags(c, 1), topic)
	fmt.Fprintf(w, "  %s admin clients %s\n", prog, devClientFlags(c, 1))
	fmt.Fprintf(w, "\nCtrl-C stops the cluster.\n")
}

// devClientFlags are the client flags of a client living in IDC n: every
// address server, its own first, so the client still finds the name
// servers when its own IDC's address server is stopped.
func devClientFlags(c *devcluster.Cluster, n int) string {
	return "--addrsrv " + strings.Join(c.AddrsrvURLs(n), ",") + " --idc " + devcluster.IDCName(n)
}

// underGoRun reports whether this process was started by `go run` (the
// binary sits in a go-build temp folder).
func underGoRun() bool {
	exe, err := os.Executable()
	return err == nil && strings.Contains(exe, "go-build")
}

// programName is how the printed commands start: "./zonemq" under go run
// (the banner then says how to build it: go run would compile again for
// every command and hide exit statuses), else the binary as invoked.
func programName() string {
	if underGoRun() {
		return "./zonemq"
	}
	if arg0 := os.Args[0]; strings.Contains(arg0, "/") {
		return arg0 // ./zonemq, bin/zonemq: what the user typed, so it pastes
	}
	return "zonemq" // found on $PATH
}

// devRoles are the roles the control endpoint knows, in start order.
var devRoles = []string{"namesrv", "addrsrv", "broker"}

// devControl stops and starts a dev cluster's servers on request and
// remembers which ones it stopped. Actions are serialised.
type devControl struct {
	c *devcluster.Cluster

	mu      sync.Mutex
	stopped map[string]bool // "idc1/broker"
}

func newDevControl(c *devcluster.Cluster) *devControl {
	return &devControl{c: c, stopped: map[string]bool{}}
}

// handler serves:
//
//	GET  /status                      a table of every server and its state
//	POST /idc/{idc}/{role}/{action}   role broker|namesrv|addrsrv|all, action stop|start
func (d *devControl) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		d.writeStatus(w)
	})
	mux.HandleFunc("POST /idc/{idc}/{role}/{action}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		msg, code := d.act(r.Context(), r.PathValue("idc"), r.PathValue("role"), r.PathValue("action"))
		w.WriteHeader(code)
		fmt.Fprintln(w, msg)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "zonemq dev control: GET /status; POST /idc/{idc}/{broker|namesrv|addrsrv|all}/{stop|start}")
	})
	return mux
}

// act performs one action and returns the answer and its HTTP status.
func (d *devControl) act(ctx context.Context, idcName, role, action string) (string, int) {
	n, err := d.idcNumber(idcName)
	if err != nil {
		return err.Error(), http.StatusBadRequest
	}
	roles := []string{role}
	if role == "all" {
		roles = devRoles
	} else if !containsString(devRoles, role) {
		return fmt.Sprintf("unknown role %q: broker, namesrv, addrsrv or all", role), http.StatusBadRequest
	}
	name := devcluster.IDCName(n)
	d.mu.Lock()
	defer d.mu.Unlock()
	switch action {
	case "stop":
		// The broker first, as a whole IDC going dark would be seen.
		for i := len(roles) - 1; i >= 0; i-- {
			d.stop(n, roles[i])
			d.stopped[name+"/"+roles[i]] = true
		}
		return fmt.Sprintf("%s: stopped %s", name, strings.Join(roles, ", ")), http.StatusOK
	case "start":
		for _, r := range roles {
			if err := d.start(n, r); err != nil {
				return fmt.Sprintf("%s: starting %s: %s", name, r, oneLine(err.Error())), http.StatusInternalServerError
			}
			delete(d.stopped, name+"/"+r)
		}
		// Answer once the cluster is whole again, so a script's next step
		// sees the restarted servers.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := d.c.WaitRegistered(wctx); err != nil {
			return fmt.Sprintf("%s: started %s, but: %s", name, strings.Join(roles, ", "), oneLine(err.Error())), http.StatusOK
		}
		return fmt.Sprintf("%s: started %s", name, strings.Join(roles, ", ")), http.StatusOK
	}
	return fmt.Sprintf("unknown action %q: stop or start", action), http.StatusBadRequest
}

func (d *devControl) stop(n int, role string) {
	switch role {
	case "broker":
		d.c.StopBroker(n)
	case "namesrv":
		d.c.StopNamesrv(n)
	case "addrsrv":
		d.c.StopAddrsrv(n)
	}
}

func (d *devControl) start(n int, role string) error {
	switch role {
	case "broker":
		return d.c.StartBroker(n)
	case "namesrv":
		return d.c.StartNamesrv(n)
	case "addrsrv":
		return d.c.StartAddrsrv(n)
	}
	return nil
}

// idcNumber accepts "idc2" or "2".
func (d *devControl) idcNumber(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(s, "idc"))
	if err != nil || n < 1 || n > d.c.IDCs() {
		return 0, fmt.Errorf("unknown IDC %q: idc1..idc%d", s, d.c.IDCs())
	}
	return n, nil
}

func (d *devControl) writeStatus(w io.Writer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "IDC\tROLE\tADDRESS\tSTATE")
	for n := 1; n <= d.c.IDCs(); n++ {
		name := devcluster.IDCName(n)
		addrs := map[string]string{"addrsrv": d.c.AddrsrvURL(n), "namesrv": d.c.NamesrvAddr(n), "broker": d.c.BrokerAddr(n)}
		for _, role := range []string{"addrsrv", "namesrv", "broker"} {
			state := "running"
			if d.stopped[name+"/"+role] {
				state = "stopped"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, role, addrs[role], state)
			if role == "broker" {
				// The replicas this IDC hosts stop and start with its broker.
				for _, r := range hostedReplicas(d.c, n) {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, r.role, r.addr, state)
				}
			}
		}
	}
	tw.Flush()
}

// hostedReplica is a replica an IDC runs for another IDC's broker group.
type hostedReplica struct{ role, addr string }

// hostedReplicas lists the replicas IDC n hosts: replica k of IDC g's
// group runs in IDC g+k, wrapping around (devcluster's layout).
func hostedReplicas(c *devcluster.Cluster, n int) []hostedReplica {
	var out []hostedReplica
	for g := 1; g <= c.IDCs(); g++ {
		for k := 1; k < c.Replicas(); k++ {
			if (g-1+k)%c.IDCs()+1 == n {
				out = append(out, hostedReplica{fmt.Sprintf("replica %d of %s", k, devcluster.BrokerName(g)), c.ReplicaAddr(g, int64(k))})
			}
		}
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// envDevControl overrides dev-ctl's default control URL.
const envDevControl = "ZONEMQ_DEV_CONTROL"

const devCtlSynopsis = "[--control URL] (status | stop|start [broker|namesrv|addrsrv|all] IDC)"

func runDevCtl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dev-ctl", devCtlSynopsis, stderr)
	def := os.Getenv(envDevControl)
	if def == "" {
		def = "http://" + devCtlDefaultControl()
	}
	controlURL := fs.String("control", def, "the control endpoint `URL` 'zonemq dev' printed (the default comes from $"+envDevControl+" if set)")
	err := quietly(fs, stderr, func() error {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return usagef("%v", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	rest := fs.Args()
	var method, path string
	switch {
	case len(rest) == 1 && rest[0] == "status":
		method, path = http.MethodGet, "/status"
	case len(rest) == 2 && (rest[0] == "stop" || rest[0] == "start") && slices.Contains(devRoles, rest[1]):
		// `stop broker`: the role is there, the IDC is not.
		return usagef("which IDC? zonemq dev-ctl %s %s idc1 (or idc2, …)", rest[0], rest[1])
	case len(rest) == 2 && (rest[0] == "stop" || rest[0] == "start"):
		method, path = http.MethodPost, "/idc/"+rest[1]+"/all/"+rest[0]
	case len(rest) == 3 && (rest[0] == "stop" || rest[0] == "start"):
		method, path = http.MethodPost, "/idc/"+rest[2]+"/"+rest[1]+"/"+rest[0]
	default:
		return usagef("usage: zonemq dev-ctl %s", devCtlSynopsis)
	}
	base := strings.TrimRight(*controlURL, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		return usagef("--control: %v", err)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the dev cluster at %s (is 'zonemq dev' running?): %v", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("reading the answer of %s: %w", base, err)
	}
	text := strings.TrimRight(string(body), "\n")
	switch {
	case resp.StatusCode == http.StatusBadRequest:
		return usagef("%s", text)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%s", oneLine(text))
	}
	_, err = fmt.Fprintln(stdout, text)
	return err
}
