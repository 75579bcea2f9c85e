package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestCLIDevWalkthrough runs `zonemq dev` on free ports and walks the
// docs/cli.md tour: send from idc1, stop idc1's broker and watch idc1's
// sends land in idc2, bring it back, stop on ctx cancel.
func TestCLIDevWalkthrough(t *testing.T) {
	cliClearEnv(t)
	type ready struct {
		c   *devcluster.Cluster
		url string
	}
	readyCh := make(chan ready, 1)
	devReadyHook = func(c *devcluster.Cluster, url string) { readyCh <- ready{c, url} }
	t.Cleanup(func() { devReadyHook = nil })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errb := &cliBuffer{}, &cliBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- cliRunCtx(ctx, []string{"dev", "--idcs", "2", "--base-port", "0", "--log-level", "error"}, out, errb)
	}()
	var rd ready
	select {
	case rd = <-readyCh:
	case code := <-done:
		t.Fatalf("dev exited with %d: %s", code, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not come up")
	}
	c := rd.c
	dataDir := c.DataDir()

	// The banner lists every address and commands to paste.
	banner := out.String()
	for n := 1; n <= 2; n++ {
		for _, want := range []string{c.AddrsrvURL(n), c.NamesrvAddr(n), c.BrokerAddr(n),
			"send --addrsrv " + strings.Join(c.AddrsrvURLs(n), ","), "consume --addrsrv " + strings.Join(c.AddrsrvURLs(n), ",")} {
			testutil.True(t, strings.Contains(banner, want), "banner lacks", want, banner)
		}
	}
	testutil.True(t, strings.Contains(banner, "dev-ctl --control "+rd.url+" stop broker idc1"), banner)
	// dev runs authenticated: its banner names the secret, and a stranger's
	// registration is refused.
	testutil.True(t, c.Secure() && strings.Contains(banner, "--cluster-secret-file "+c.SecretFile()), banner)
	rc := remoting.NewClient(remoting.ClientOptions{})
	defer rc.Close()
	evil := protocol.RegisterBrokerRequestHeader{BrokerName: "broker-evil", BrokerAddr: "127.0.9.9:10911", ClusterName: "DefaultCluster", ZoneName: "idc1"}
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err := rc.Invoke(rctx, c.NamesrvAddr(1), remoting.NewRequest(int32(protocol.RegisterBroker), evil.Ext(), nil))
	rcancel()
	testutil.NoError(t, err)
	testutil.Equal(t, protocol.ResponseCode(resp.Code), protocol.NoPermission, resp.Remark)

	// Every server serves /metrics, and the banner lists each URL.
	eps := c.MetricsEndpoints()
	testutil.Equal(t, len(eps), 6, eps) // 2 IDCs x address server, name server, broker
	for _, ep := range eps {
		testutil.True(t, strings.Contains(banner, ep.URL), "banner lacks", ep.URL, banner)
		resp, err := http.Get(ep.URL)
		testutil.NoError(t, err, ep.URL)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		testutil.True(t, strings.Contains(string(body), "zonemq_"+ep.Role+"_"), ep.URL, string(body[:min(len(body), 200)]))
	}

	// The Demo topic exists on both brokers already.
	r := cli(t, cliArgs(c, 1, []string{"admin", "topic", "route"}, "--topic", "Demo")...)
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.True(t, strings.Contains(r.stdout, "broker-idc1") && strings.Contains(r.stdout, "broker-idc2"), r.stdout)

	r = cli(t, cliArgs(c, 1, []string{"send"}, "--topic", "Demo", "--count", "3", "--output", "json")...)
	testutil.Equal(t, r.code, 0, r.stderr)
	cliCheckSendLines(t, r.stdout, "Demo", "P", 3, "idc1")

	ctl := func(args ...string) cliResult {
		t.Helper()
		return cli(t, append([]string{"dev-ctl", "--control", rd.url}, args...)...)
	}
	r = ctl("stop", "broker", "idc1")
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.Equal(t, strings.TrimSpace(r.stdout), "idc1: stopped broker")
	r = ctl("status")
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.True(t, cliHasRow(r.stdout, "idc1", "broker", c.BrokerAddr(1), "stopped"), r.stdout)

	// S2: idc1's producer now sends to idc2's broker, without an error.
	r = cli(t, cliArgs(c, 1, []string{"send"}, "--topic", "Demo", "--count", "3", "--output", "json")...)
	testutil.Equal(t, r.code, 0, r.stderr)
	cliCheckSendLines(t, r.stdout, "Demo", "P", 3, "idc2")

	r = ctl("start", "broker", "idc1")
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.Equal(t, strings.TrimSpace(r.stdout), "idc1: started broker")
	r = ctl("status")
	testutil.True(t, !strings.Contains(r.stdout, "stopped"), r.stdout)
	// Back home: idc1's sends return to idc1's broker.
	testutil.Eventually(t, 15*time.Second, func() error {
		r := cli(t, cliArgs(c, 1, []string{"send"}, "--topic", "Demo", "--count", "1", "--output", "json")...)
		if r.code != 0 {
			return errorString(r.stderr)
		}
		if l := cliJSONLines(t, r.stdout); l[0]["idc"] != "idc1" {
			return errorString("still sent to " + l[0]["idc"].(string))
		}
		return nil
	})

	// Bad requests are usage errors.
	r = ctl("stop", "broker", "idc7")
	testutil.Equal(t, r.code, 2)
	cliOneLine(t, r, "unknown IDC")
	r = ctl("stop", "printer", "idc1")
	testutil.Equal(t, r.code, 2)

	cancel()
	select {
	case code := <-done:
		testutil.Equal(t, code, 0, errb.String())
	case <-time.After(20 * time.Second):
		t.Fatal("dev did not stop")
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Fatalf("temporary data dir %s not removed: %v", dataDir, err)
	}
	r = ctl("status")
	testutil.Equal(t, r.code, 1)
	cliOneLine(t, r, "is 'zonemq dev' running?")
}

// cliHasRow reports whether a text table has a row of exactly these cells.
func cliHasRow(table string, cells ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		if strings.Join(strings.Fields(line), " ") == strings.Join(cells, " ") {
			return true
		}
	}
	return false
}

type errorString string

func (e errorString) Error() string { return string(e) }

func TestCLIDevKeepsDataDir(t *testing.T) {
	cliClearEnv(t)
	dir := t.TempDir() + "/dev-data"
	readyCh := make(chan struct{}, 1)
	devReadyHook = func(*devcluster.Cluster, string) { readyCh <- struct{}{} }
	t.Cleanup(func() { devReadyHook = nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	errb := &cliBuffer{}
	go func() {
		done <- cliRunCtx(ctx, []string{"dev", "--idcs", "1", "--base-port", "0", "--control", "off", "--topic", "", "--data", dir}, &cliBuffer{}, errb)
	}()
	select {
	case <-readyCh:
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not come up")
	}
	cancel()
	testutil.Equal(t, <-done, 0, errb.String())
	_, err := os.Stat(dir + "/idc1/broker")
	testutil.NoError(t, err, "data kept in --data")
}

// `zonemq dev --controller` runs a voter per IDC, prints how to reach it,
// and the controller knows every broker group.
func TestCLIDevController(t *testing.T) {
	cliClearEnv(t)
	readyCh := make(chan *devcluster.Cluster, 1)
	devReadyHook = func(c *devcluster.Cluster, _ string) { readyCh <- c }
	t.Cleanup(func() { devReadyHook = nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	out, errb := &cliBuffer{}, &cliBuffer{}
	go func() {
		done <- cliRunCtx(ctx, []string{"dev", "--idcs", "3", "--replicas", "2", "--controller", "--base-port", "0",
			"--control", "off", "--topic", ""}, out, errb)
	}()
	var c *devcluster.Cluster
	select {
	case c = <-readyCh:
	case <-time.After(60 * time.Second):
		t.Fatal("dev did not come up", errb.String())
	}
	addrs := c.ControllerAddrs()
	testutil.Equal(t, len(addrs), 3, "one voter per IDC")
	testutil.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(out.String(), "zonemq admin controller status --controller "+strings.Join(addrs, ",")) {
			return errors.New("no controller command printed yet")
		}
		return nil
	})
	var stdout, stderr bytes.Buffer
	code := run([]string{"admin", "controller", "status", "--controller", strings.Join(addrs, ","), "--output", "json"}, &stdout, &stderr)
	testutil.Equal(t, code, 0, "status", stderr.String())
	var st protocol.ControllerStatus
	testutil.NoError(t, json.Unmarshal(stdout.Bytes(), &st))
	testutil.Equal(t, len(st.Groups), 3, "groups")
	for _, g := range st.Groups {
		testutil.True(t, g.MasterID == 0 && len(g.History) == 1, "each group's master adopted, with its history", g)
	}
	cancel()
	testutil.Equal(t, <-done, 0, errb.String())
}

// TestDevCtlStatusListsReplicas: with --replicas, dev-ctl status shows the
// replicas each IDC hosts (they stop and start with its broker).
func TestDevCtlStatusListsReplicas(t *testing.T) {
	cliClearEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Options{IDCs: 2, Replicas: 2, DataDir: t.TempDir()})
	testutil.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	d := newDevControl(c)
	var b bytes.Buffer
	d.writeStatus(&b)
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	var lines []string
	for _, l := range strings.Split(b.String(), "\n") {
		lines = append(lines, norm(l))
	}
	for _, want := range []string{
		"idc2 replica 1 of broker-idc1 " + c.ReplicaAddr(1, 1) + " running",
		"idc1 replica 1 of broker-idc2 " + c.ReplicaAddr(2, 1) + " running",
	} {
		testutil.True(t, slices.Contains(lines, want), "status lacks", want, b.String())
	}
	d.act(ctx, "idc2", "broker", "stop")
	b.Reset()
	d.writeStatus(&b)
	testutil.True(t, strings.Contains(norm(b.String()), "idc2 replica 1 of broker-idc1 "+c.ReplicaAddr(1, 1)+" stopped"), b.String())
}
