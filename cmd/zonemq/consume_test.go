package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/testutil"
)

// cliConsumeKeys runs consume to completion and returns the keys it printed
// (sorted), checking every line's fields.
func cliConsumeKeys(t *testing.T, c *devcluster.Cluster, n int, more ...string) []string {
	t.Helper()
	args := cliArgs(c, n, []string{"consume"}, append([]string{"--output", "json", "--duration", "20s"}, more...)...)
	r := cli(t, args...)
	testutil.Equal(t, r.code, 0, r.stderr)
	var keys []string
	for _, l := range cliJSONLines(t, r.stdout) {
		for _, f := range []string{"ts", "key", "msgId", "topic", "broker", "brokerAddr", "idc", "queueId", "queueOffset", "body"} {
			if _, ok := l[f]; !ok {
				t.Fatalf("line %v has no %q", l, f)
			}
		}
		key := l["key"].(string)
		testutil.Equal(t, l["body"], any("hello from zonemq "+key))
		testutil.True(t, strings.HasPrefix(l["idc"].(string), "idc"), "idc field", l)
		testutil.Equal(t, l["broker"], any("broker-"+l["idc"].(string)))
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

func cliKeys(prefix string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	sort.Strings(out)
	return out
}

func TestCLIConsumeJSON(t *testing.T) {
	c := cliCluster(t, 2)
	r := cli(t, cliArgs(c, 1, []string{"send"}, "--topic", "ConsT", "--count", "15", "--output", "json")...)
	testutil.Equal(t, r.code, 0, r.stderr)

	// A new group reads everything with --from first, and stops at --count.
	keys := cliConsumeKeys(t, c, 1, "--topic", "ConsT", "--group", "G1", "--from", "first", "--count", "15")
	testutil.Equal(t, strings.Join(keys, ","), strings.Join(cliKeys("P", 1, 15), ","))

	// Its offsets were committed on the way out. A pull still in flight at
	// Shutdown may carry an older commit offset that the broker applies
	// last; the contract allows that one duplicate (the in-flight window),
	// so allow a lag of 1 per queue here. TestCLIAdminClusterClientsGroup
	// checks that a running group's lag reaches 0.
	r = cli(t, cliArgs(c, 1, []string{"admin", "group"}, "--group", "G1", "--topic", "ConsT", "--output", "json")...)
	testutil.Equal(t, r.code, 0, r.stderr)
	var g struct {
		TotalLag int64 `json:"totalLag"`
		Queues   []struct {
			IDC       string `json:"idc"`
			Committed int64  `json:"committed"`
			Lag       int64  `json:"lag"`
		} `json:"queues"`
	}
	cliDecode(t, r.stdout, &g)
	testutil.True(t, len(g.Queues) > 0, "queues listed")
	for _, q := range g.Queues {
		testutil.True(t, q.Committed >= 0 && q.Lag <= 1, "offset committed at exit", r.stdout)
		testutil.Equal(t, q.IDC, "idc1")
	}

	// A group nobody used is named unknown, not shown with the topic's
	// whole depth as its lag.
	for _, more := range [][]string{{"--topic", "ConsT"}, {}} {
		r = cli(t, cliArgs(c, 1, []string{"admin", "group"}, append([]string{"--group", "NoSuchGroup"}, more...)...)...)
		testutil.Equal(t, r.code, 1, r.stdout)
		cliOneLine(t, r, "group NoSuchGroup is unknown")
		testutil.True(t, !strings.Contains(r.stdout, "total lag"), r.stdout)
	}

	// A committed offset beats --from: the group reads only what is new
	// (plus what the lag above left).
	r = cli(t, cliArgs(c, 1, []string{"send"}, "--topic", "ConsT", "--count", "2", "--key-prefix", "N")...)
	testutil.Equal(t, r.code, 0, r.stderr)
	keys = cliConsumeKeys(t, c, 1, "--topic", "ConsT", "--group", "G1", "--from", "first", "--count", fmt.Sprint(2+g.TotalLag))
	testutil.True(t, containsString(keys, "N-1") && containsString(keys, "N-2"), keys)

	// Text mode.
	r = cli(t, cliArgs(c, 1, []string{"consume"}, "--topic", "ConsT", "--group", "G2", "--from", "first", "--count", "1", "--duration", "20s")...)
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.True(t, strings.HasPrefix(r.stdout, "received "), r.stdout)
	testutil.True(t, strings.Contains(r.stdout, "body \"hello from zonemq "), r.stdout)
}

func TestCLIConsumeFromLast(t *testing.T) {
	c := cliCluster(t, 1)
	r := cli(t, cliArgs(c, 1, []string{"send"}, "--topic", "LastT", "--count", "4", "--key-prefix", "OLD")...)
	testutil.Equal(t, r.code, 0, r.stderr)

	started := make(chan struct{})
	consumeStartedHook = func(*client.PushConsumer) { close(started) }
	t.Cleanup(func() { consumeStartedHook = nil })
	out, errb := &cliBuffer{}, &cliBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- cliRunCtx(context.Background(), cliArgs(c, 1, []string{"consume"},
			"--topic", "LastT", "--group", "LastG", "--from", "last", "--count", "3", "--duration", "30s", "--output", "json"), out, errb)
	}()
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatalf("consumer did not start: %s", errb.String())
	}
	consumeStartedHook = nil
	r = cli(t, cliArgs(c, 1, []string{"send"}, "--topic", "LastT", "--count", "3", "--key-prefix", "NEW")...)
	testutil.Equal(t, r.code, 0, r.stderr)
	select {
	case code := <-done:
		testutil.Equal(t, code, 0, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("consume --count 3 did not finish")
	}
	var keys []string
	for _, l := range cliJSONLines(t, out.String()) {
		keys = append(keys, l["key"].(string))
	}
	sort.Strings(keys)
	testutil.Equal(t, strings.Join(keys, ","), "NEW-1,NEW-2,NEW-3")

	// --from first for another new group: the old ones too.
	keys = cliConsumeKeys(t, c, 1, "--topic", "LastT", "--group", "FirstG", "--from", "first", "--count", "7")
	testutil.Equal(t, len(keys), 7)
}

func TestCLIConsumeDurationAndSignal(t *testing.T) {
	c := cliCluster(t, 1)
	// Nothing to read: --duration ends it normally.
	r := cli(t, cliArgs(c, 1, []string{"consume"}, "--topic", "Quiet", "--group", "QG", "--duration", "300ms")...)
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.Equal(t, r.stdout, "")
	// --count not reached within --duration is an error.
	r = cli(t, cliArgs(c, 1, []string{"consume"}, "--topic", "Quiet", "--group", "QG", "--duration", "300ms", "--count", "2", "--log-level", "error")...)
	testutil.Equal(t, r.code, 1)
	// In text mode a start line comes first, then the one-line reason.
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	testutil.Equal(t, len(lines), 2, r.stderr)
	testutil.True(t, strings.HasPrefix(lines[0], "zonemq consume: consuming Quiet as group QG in IDC idc1"), r.stderr)
	testutil.True(t, strings.Contains(lines[1], "received 0 of 2 messages"), r.stderr)
	// A signal (ctx) is a normal stop.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	errb := &cliBuffer{}
	code := cliRunCtx(ctx, cliArgs(c, 1, []string{"consume"}, "--topic", "Quiet", "--group", "QG"), &cliBuffer{}, errb)
	testutil.Equal(t, code, 0, errb.String())
	testutil.True(t, strings.Contains(errb.String(), "zonemq consume: stopped after 0 messages"), errb.String())
}
