package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// cliCheckSendLines checks send --output json lines: keys prefix-1..n in
// order, each stored by a broker of wantIDC with its address, queue and
// offset.
func cliCheckSendLines(t *testing.T, out, topic, prefix string, n int, wantIDC string) []map[string]any {
	t.Helper()
	lines := cliJSONLines(t, out)
	testutil.Equal(t, len(lines), n, "send lines")
	for i, l := range lines {
		testutil.Equal(t, l["key"], any(fmt.Sprintf("%s-%d", prefix, i+1)), "key of line", i)
		testutil.Equal(t, l["topic"], any(topic))
		testutil.Equal(t, l["idc"], any(wantIDC), "idc of", l["key"])
		testutil.Equal(t, l["broker"], any("broker-"+wantIDC))
		for _, f := range []string{"ts", "msgId", "brokerAddr", "queueId", "queueOffset"} {
			if _, ok := l[f]; !ok {
				t.Fatalf("line %v has no %q", l, f)
			}
		}
		if _, err := net.ResolveTCPAddr("tcp", l["brokerAddr"].(string)); err != nil {
			t.Fatalf("brokerAddr %v: %v", l["brokerAddr"], err)
		}
		testutil.True(t, l["ts"].(float64) > 1e12, "ts is Unix ms", l["ts"])
		testutil.True(t, l["queueOffset"].(float64) >= 0 && l["queueId"].(float64) >= 0, "queue position", l)
		testutil.True(t, l["msgId"].(string) != "", "msgId set")
		if _, bad := l["error"]; bad {
			t.Fatalf("send failed: %v", l)
		}
	}
	return lines
}

func TestCLISendJSONAndText(t *testing.T) {
	c := cliCluster(t, 2)

	r := cli(t, cliArgs(c, 1, []string{"send"}, "--topic", "SendT", "--count", "12", "--output", "json")...)
	testutil.Equal(t, r.code, 0, r.stderr)
	cliCheckSendLines(t, r.stdout, "SendT", "P", 12, "idc1")

	// IDC 2's producer stays in IDC 2 (a topic it creates, so IDC 2 has
	// it); --size and --key-prefix.
	r = cli(t, cliArgs(c, 2, []string{"send"}, "--topic", "SendT2", "--count", "3", "--size", "2000",
		"--key-prefix", "Q", "--tag", "TagA", "--interval", "10ms", "--output", "json")...)
	testutil.Equal(t, r.code, 0, r.stderr)
	cliCheckSendLines(t, r.stdout, "SendT2", "Q", 3, "idc2")

	// Text mode: one readable line per send.
	r = cli(t, cliArgs(c, 1, []string{"send"}, "--topic", "SendT", "--count", "2")...)
	testutil.Equal(t, r.code, 0, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	testutil.Equal(t, len(lines), 2)
	testutil.True(t, strings.HasPrefix(lines[1], "sent P-2 → broker-idc1 (idc1, "+c.BrokerAddr(1)+") queue "), lines[1])
}

func TestCLISendUntilStopped(t *testing.T) {
	c := cliCluster(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cliBuffer{}
	errb := &cliBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- cliRunCtx(ctx, cliArgs(c, 1, []string{"send"}, "--topic", "Forever", "--count", "0", "--output", "json"), out, errb)
	}()
	testutil.Eventually(t, 20*time.Second, func() error {
		if n := strings.Count(out.String(), "\n"); n < 5 {
			return fmt.Errorf("%d lines so far", n)
		}
		return nil
	})
	cancel()
	select {
	case code := <-done:
		testutil.Equal(t, code, 0, errb.String())
	case <-time.After(10 * time.Second):
		t.Fatal("send did not stop on cancel")
	}
	// Every line is whole and keys run from P-1 without a gap.
	lines := cliJSONLines(t, out.String())
	for i, l := range lines {
		testutil.Equal(t, l["key"], any(fmt.Sprintf("P-%d", i+1)))
	}
}

func TestCLISendInterruptedCount(t *testing.T) {
	c := cliCluster(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errb := &cliBuffer{}
	code := cliRunCtx(ctx, cliArgs(c, 1, []string{"send"}, "--topic", "Never", "--count", "5"), &cliBuffer{}, errb)
	testutil.True(t, code != 0, "an interrupted --count 5 is not a success")

	// Stopped by a signal (ctx) in text mode, send says how far it got.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	out := &cliBuffer{}
	errb = &cliBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- cliRunCtx(ctx, cliArgs(c, 1, []string{"send"}, "--topic", "Forever", "--count", "0"), out, errb)
	}()
	testutil.Eventually(t, 20*time.Second, func() error {
		if n := strings.Count(out.String(), "\n"); n < 3 {
			return fmt.Errorf("%d lines so far", n)
		}
		return nil
	})
	cancel()
	select {
	case code = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("send did not stop on cancel")
	}
	testutil.Equal(t, code, 0, errb.String())
	sent := strings.Count(out.String(), "\n")
	testutil.True(t, strings.Contains(errb.String(), fmt.Sprintf("zonemq send: stopped after %d sends, 0 failed", sent)), errb.String())
}

func TestCLISendUnreachable(t *testing.T) {
	cliClearEnv(t)
	// A port nobody listens on: bind one, then close it.
	ln, err := net.Listen("tcp", "127.0.9.1:0")
	testutil.NoError(t, err)
	dead := ln.Addr().String()
	ln.Close()

	start := time.Now()
	r := cli(t, "send", "--namesrv", dead, "--idc", "idc1", "--topic", "T", "--count", "2", "--output", "json", "--log-level", "error", "--send-timeout", "1s")
	testutil.True(t, r.code != 0, "exit status non-zero")
	cliOneLine(t, r, "2 of 2 sends failed")
	lines := cliJSONLines(t, r.stdout)
	testutil.Equal(t, len(lines), 2)
	testutil.Equal(t, lines[0]["key"], any("P-1"))
	testutil.True(t, lines[0]["error"].(string) != "", "error field")
	testutil.True(t, time.Since(start) < 15*time.Second, "fails within the send timeouts")

	r = cli(t, "send", "--addrsrv", "http://"+dead, "--idc", "idc1", "--topic", "T", "--log-level", "error")
	testutil.True(t, r.code != 0, "exit status non-zero")
	cliOneLine(t, r, "zonemq send: ")
}

// TestCLISendNewTopic: a send to a topic that does not exist says so (and
// names the existing topic a typo is close to); --no-create refuses it and
// creates nothing.
func TestCLISendNewTopic(t *testing.T) {
	c := cliCluster(t, 1)
	r := cli(t, cliArgs(c, 1, []string{"admin", "topic", "create", "--topic", "Orders", "--queues", "2"})...)
	testutil.Equal(t, r.code, 0, r.stderr)

	r = cli(t, cliArgs(c, 1, []string{"send"}, "--topic", "Ordres", "--no-create")...)
	testutil.Equal(t, r.code, 1, r.stderr)
	cliOneLine(t, r, "topic Ordres does not exist (did you mean Orders?); --no-create refuses")
	r = cli(t, cliArgs(c, 1, []string{"admin", "topic", "route"}, "--topic", "Ordres")...)
	testutil.True(t, r.code != 0, "Ordres was created", r.stdout)

	// An existing topic: no notice, --no-create or not.
	r = cli(t, cliArgs(c, 1, []string{"send"}, "--topic", "Orders", "--no-create", "--output", "json")...)
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.True(t, !strings.Contains(r.stderr, "does not exist"), r.stderr)

	r = cli(t, cliArgs(c, 1, []string{"send"}, "--topic", "Ordres", "--output", "json")...)
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.True(t, strings.Contains(r.stderr, "topic Ordres does not exist yet (did you mean Orders?): the broker creates it"), r.stderr)
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"Demo", "Dmeo", 1}, {"Demo", "Demo", 0}, {"", "abc", 3}, {"Orders", "Ordres", 1}, {"kitten", "sitting", 3}} {
		testutil.Equal(t, editDistance(c.a, c.b), c.d, c.a, c.b)
	}
	testutil.Equal(t, nearestTopic("Dmeo", []string{"TBW102", "Demo", "Other"}), "Demo")
	testutil.Equal(t, nearestTopic("Zzzzzz", []string{"Demo"}), "")
}

// TestCLISendTooLarge: a body over --max-message-size is refused before it
// leaves, with a line that says what send checks and what the brokers do.
func TestCLISendTooLarge(t *testing.T) {
	c := cliCluster(t, 1)
	r := cli(t, cliArgs(c, 1, []string{"send"}, "--topic", "Big", "--size", "5000", "--max-message-size", "4096")...)
	testutil.Equal(t, r.code, 1, r.stderr)
	testutil.True(t, strings.Contains(r.stderr, "send checks the body as given against its --max-message-size"), r.stderr)
	testutil.True(t, strings.Contains(r.stderr, "each broker checks the body as sent (zlib-compressed above 4 KiB)"), r.stderr)
}

// TestCLISwappedAddresses: --addrsrv given a name server's address is
// named as the likely swap.
func TestCLISwappedAddresses(t *testing.T) {
	c := cliCluster(t, 1)
	r := cli(t, "send", "--addrsrv", "http://"+c.NamesrvAddr(1), "--topic", "T")
	testutil.True(t, r.code != 0, r.stdout)
	testutil.True(t, strings.Contains(r.stderr, "is it a name server? --addrsrv wants an address server's http://host:port"), r.stderr)

	// And the other way round: an address server given to --namesrv.
	u := strings.TrimPrefix(c.AddrsrvURL(1), "http://")
	r = cli(t, "send", "--namesrv", u, "--topic", "T", "--log-level", "error")
	testutil.Equal(t, r.code, 1, r.stdout)
	testutil.True(t, strings.Contains(r.stderr, u+" answers HTTP: it looks like an address server; give it as --addrsrv http://"+u), r.stderr)
}
