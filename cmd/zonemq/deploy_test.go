package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/testutil"
)

// exampleIDCs is how many IDCs the deployment example in contrib/ has.
const exampleIDCs = 3

// TestCLIDeploymentExamples checks the 3-IDC example of docs/operations.md
// (contrib/idcN.example) so it cannot rot: every config parses with the real
// flag parsers and lists every IDC; every systemd unit starts a real
// subcommand with its config; and the configs, moved onto loopback (IDC n
// on 127.0.n.1, free ports, temporary data), start as real processes whose
// traffic stays in each IDC.
func TestCLIDeploymentExamples(t *testing.T) {
	secret := exampleSecret(t)
	for n := 1; n <= exampleIDCs; n++ {
		dir := exampleConfDir(t, n, secret)
		idcName := fmt.Sprintf("idc%d", n)

		ns, _, err := parseNamesrvArgs([]string{"--config", dir + "namesrv.conf"}, io.Discard)
		testutil.NoError(t, err, dir+"namesrv.conf")
		testutil.True(t, ns.ClusterSecret != nil, "the example name server runs with the cluster secret")
		testutil.Equal(t, ns.IDC, idcName)
		testutil.Equal(t, ns.Listen, fmt.Sprintf("10.%d.0.11:9876", n))

		as, _, err := parseAddrsrvArgs([]string{"--config", dir + "addrsrv.conf"}, io.Discard)
		testutil.NoError(t, err, dir+"addrsrv.conf")
		testutil.Equal(t, as.IDC, idcName)
		testutil.Equal(t, len(as.Namesrvs), 2*exampleIDCs, "every IDC's name servers")

		ba, err := parseBrokerArgs([]string{"--config", dir + "broker.conf"}, io.Discard)
		testutil.NoError(t, err, dir+"broker.conf")
		testutil.Equal(t, ba.opts.IDC, idcName)
		testutil.Equal(t, ba.opts.BrokerName, "broker-"+idcName+"-a")
		testutil.Equal(t, len(ba.opts.AddrsrvURLs), 2*exampleIDCs, "every IDC's address servers")
		testutil.True(t, strings.HasPrefix(ba.opts.AddrsrvURLs[0], fmt.Sprintf("http://10.%d.0.", n)), "own IDC's address server first")
		testutil.True(t, ba.opts.ClusterSecret != nil, "the example broker runs with the cluster secret")
	}
	for _, role := range []string{"namesrv", "addrsrv", "broker"} {
		unit, err := os.ReadFile("../../contrib/systemd/zonemq-" + role + ".service")
		testutil.NoError(t, err)
		want := "ExecStart=/usr/local/bin/zonemq " + role + " --config /etc/zonemq/" + role + ".conf"
		testutil.True(t, strings.Contains(string(unit), "\n"+want+"\n"), role, "unit lacks", want)
		_, ok := commands[role]
		testutil.True(t, ok, "zonemq has a", role, "command")
	}

	if testing.Short() {
		t.Skip("starting the example as processes")
	}
	addrsrvURLs := startExampleDeployment(t, secret)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// As the operator's check in docs/operations.md: create a topic on every
	// broker, then send from each IDC; every message stays in its IDC.
	quiet := slog.New(slog.DiscardHandler)
	for n := 1; n <= exampleIDCs; n++ {
		url := addrsrvURLs[n][0] + "/v1/namesrvs"
		testutil.Eventually(t, 20*time.Second, func() error {
			resp, err := http.Get(url)
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		})
	}
	a, err := admin.New(admin.Config{ClientConfig: client.ClientConfig{
		AddrsrvURLs: addrsrvURLs[1], IDC: "idc1", LocalIP: "127.0.1.1", Logger: quiet}})
	testutil.NoError(t, err)
	testutil.NoError(t, a.Start(ctx), "admin start")
	testutil.Eventually(t, 30*time.Second, func() error {
		brokers, err := a.Cluster(ctx)
		if err != nil {
			return err
		}
		if len(brokers) != exampleIDCs {
			return fmt.Errorf("%d brokers registered, want %d", len(brokers), exampleIDCs)
		}
		return nil
	})
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	const topic = "DeployCheck"
	testutil.NoError(t, a.CreateTopic(ctx, admin.TopicSpec{Topic: topic, Queues: 2}))
	// Brokers register a new topic with the name servers on their own
	// schedule (topic registrations are paced): wait until every IDC's
	// broker routes it, as `admin topic create` does.
	testutil.Eventually(t, 20*time.Second, func() error {
		r, err := a.TopicRoute(ctx, topic)
		if err != nil {
			return err
		}
		if len(r.Brokers) != exampleIDCs {
			return fmt.Errorf("the route of %s lists %d of %d brokers", topic, len(r.Brokers), exampleIDCs)
		}
		return nil
	})
	for n := 1; n <= exampleIDCs; n++ {
		idcName := fmt.Sprintf("idc%d", n)
		p, err := client.NewProducer(client.ProducerConfig{ClientConfig: client.ClientConfig{
			AddrsrvURLs: addrsrvURLs[n], IDC: idcName, LocalIP: fmt.Sprintf("127.0.%d.1", n), Logger: quiet}})
		testutil.NoError(t, err)
		testutil.NoError(t, p.Start(ctx), idcName, "producer start")
		t.Cleanup(func() { p.Shutdown(context.Background()) })
		for i := 0; i < 5; i++ {
			res, err := p.SendSync(ctx, &client.Message{Topic: topic, Body: []byte(idcName)})
			testutil.NoError(t, err, idcName, "send")
			testutil.Equal(t, res.IDC, idcName, "IDC that stored a message sent from "+idcName)
		}
	}
}

func exampleDir(n int) string { return fmt.Sprintf("../../contrib/idc%d.example/", n) }

// exampleSecretPath is where the examples expect the cluster secret.
const exampleSecretPath = "/etc/zonemq/cluster.secret"

// exampleSecret writes a cluster secret for the examples to a temporary
// file and returns its path.
func exampleSecret(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cluster.secret")
	testutil.Equal(t, cli(t, "cluster-secret", "--out", path).code, 0)
	return path
}

// exampleConfDir copies IDC n's example configs to a temporary folder with
// the cluster secret's path pointing at secret, and returns the folder.
func exampleConfDir(t *testing.T, n int, secret string) string {
	t.Helper()
	dir := t.TempDir() + "/"
	for _, role := range []string{"namesrv", "addrsrv", "broker"} {
		raw, err := os.ReadFile(exampleDir(n) + role + ".conf")
		testutil.NoError(t, err)
		testutil.NoError(t, os.WriteFile(dir+role+".conf", []byte(strings.ReplaceAll(string(raw), exampleSecretPath, secret)), 0o644))
	}
	return dir
}

// exampleAddr matches the host addresses the examples use: 10.<idc>.0.<host>:<port>.
var exampleAddr = regexp.MustCompile(`10\.([0-9])\.0\.([0-9]+):([0-9]+)`)

// startExampleDeployment starts the first name server, address server and
// broker of every example IDC from its config file, with every example
// address moved to a free port on 127.0.<idc>.1 and data in a temporary
// folder, and stops them when t ends. It returns, per IDC, the address
// server URLs its clients use (own IDC's first, as in the examples).
func startExampleDeployment(t *testing.T, secret string) map[int][]string {
	t.Helper()
	moved := map[string]string{}
	move := func(addr string) string {
		if m, ok := moved[addr]; ok {
			return m
		}
		idcNum := exampleAddr.FindStringSubmatch(addr)[1]
		m := freeLoopbackAddr(t, "127.0."+idcNum+".1")
		moved[addr] = m
		return m
	}
	work := t.TempDir()
	type proc struct{ role, conf string }
	var procs []proc
	urls := map[int][]string{}
	for _, role := range []string{"namesrv", "addrsrv", "broker"} {
		for n := 1; n <= exampleIDCs; n++ {
			raw, err := os.ReadFile(exampleDir(n) + role + ".conf")
			testutil.NoError(t, err)
			conf := exampleAddr.ReplaceAllStringFunc(string(raw), move)
			dir := filepath.Join(work, fmt.Sprintf("idc%d", n))
			conf = strings.ReplaceAll(conf, "/var/lib/zonemq", dir)
			conf = strings.ReplaceAll(conf, exampleSecretPath, secret)
			path := filepath.Join(dir, role+".conf")
			testutil.NoError(t, os.MkdirAll(dir, 0o755))
			testutil.NoError(t, os.WriteFile(path, []byte(conf), 0o644))
			procs = append(procs, proc{role, path})
			if role == "broker" {
				ba, err := parseBrokerArgs([]string{"--config", path}, io.Discard)
				testutil.NoError(t, err)
				urls[n] = ba.opts.AddrsrvURLs
			}
		}
	}
	for _, p := range procs {
		startExampleProc(t, p.role, p.conf)
	}
	return urls
}

// startExampleProc runs `zonemq <role> --config <conf>` as a process of its
// own (this test binary, see TestMain), its output in a log beside conf
// (printed if the test fails), and stops it with SIGTERM when t ends.
func startExampleProc(t *testing.T, role, conf string) {
	t.Helper()
	logPath := strings.TrimSuffix(conf, ".conf") + ".log"
	log, err := os.Create(logPath)
	testutil.NoError(t, err)
	cmd := exec.Command(os.Args[0], role, "--config", conf)
	cmd.Env = append(os.Environ(), asZonemqEnv+"=1")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	testutil.NoError(t, cmd.Start(), "start", role)
	exited := make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(shutdownLimit + 5*time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("%s (%s) did not stop on SIGTERM", role, conf)
		}
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", conf, out)
		}
	})
}

// freeLoopbackAddr returns host:port with a port free right now.
func freeLoopbackAddr(t *testing.T, host string) string {
	t.Helper()
	ln, err := net.Listen("tcp", host+":0")
	testutil.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}
