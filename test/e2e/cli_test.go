package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The command-line contract of docs/architecture.md §6, checked on the real
// binary: the JSON lines of send and consume, exit statuses, and servers
// stopping on SIGTERM.

var (
	sendFields      = []string{"ts", "key", "msgId", "topic", "broker", "brokerAddr", "idc", "queueId", "queueOffset"}
	sendErrorFields = []string{"ts", "key", "error"}
	consumeFields   = []string{"ts", "key", "msgId", "topic", "broker", "brokerAddr", "idc", "queueId", "queueOffset", "body"}
)

// fieldOrder returns the top-level keys of the JSON object line, in order.
func fieldOrder(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("line %q is not a JSON object", line)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
	}
	return keys
}

// checkFields fails unless every line has exactly want's fields, in want's
// order.
func checkFields(t *testing.T, what, out string, want []string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if got := fieldOrder(t, l); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s line has fields %v, want %v: %s", what, got, want, l)
		}
	}
}

// checkPlacement checks the fields saying where a message was stored.
func checkPlacement(t *testing.T, what string, m map[string]any, topic string, br *server, startMs, endMs int64) {
	t.Helper()
	str := func(f string) string { s, _ := m[f].(string); return s }
	num := func(f string) int64 {
		n, ok := m[f].(json.Number)
		if !ok {
			t.Fatalf("%s: %s is %T %v, want a number", what, f, m[f], m[f])
		}
		i, err := n.Int64()
		if err != nil {
			t.Fatalf("%s: %s = %v is not an integer", what, f, n)
		}
		return i
	}
	if ts := num("ts"); ts < startMs || ts > endMs {
		t.Errorf("%s: ts %d is not Unix milliseconds within the run [%d, %d]", what, ts, startMs, endMs)
	}
	if str("msgId") == "" {
		t.Errorf("%s: empty msgId", what)
	}
	if str("topic") != topic || str("broker") != "broker-cli" || str("brokerAddr") != br.addr || str("idc") != "idc1" {
		t.Errorf("%s: topic/broker/brokerAddr/idc = %q/%q/%q/%q, want %s/broker-cli/%s/idc1",
			what, str("topic"), str("broker"), str("brokerAddr"), str("idc"), topic, br.addr)
	}
	if q := num("queueId"); q < 0 || q >= 4 {
		t.Errorf("%s: queueId %d outside the topic's 4 queues", what, q)
	}
	if off := num("queueOffset"); off < 0 {
		t.Errorf("%s: negative queueOffset %d", what, off)
	}
}

// checkUsageError fails unless r is a usage error: exit status 2, exactly
// one line on stderr, nothing on stdout.
func checkUsageError(t *testing.T, args []string, r cliResult) {
	t.Helper()
	cmd := "zonemq " + strings.Join(args, " ")
	if r.code != 2 {
		t.Errorf("%s: exit %d, want 2 (stderr %q)", cmd, r.code, r.stderr)
	}
	if lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n"); len(lines) != 1 || lines[0] == "" || !strings.HasSuffix(r.stderr, "\n") {
		t.Errorf("%s: want one line on stderr, got %q", cmd, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("%s: printed %q on stdout", cmd, r.stdout)
	}
}

func TestE2ECLIContract(t *testing.T) {
	ns := startNamesrv(t, 1)
	as := startAddrsrv(t, 1, map[int]string{1: ns.addr})
	br := startBroker(t, 1, "broker-cli", t.TempDir(), []string{"--addrsrv", as.url()})
	const topic = "E2ECliTopic"
	createTopic(t, topic, 1, "--namesrv", ns.addr)

	t.Run("send", func(t *testing.T) {
		const n = 20
		start := time.Now().UnixMilli()
		r := runCLI(t, 60*time.Second, "send", "--namesrv", ns.addr, "--idc", "idc1", "--topic", topic, "--count", fmt.Sprint(n), "--output", "json")
		end := time.Now().UnixMilli()
		if r.code != 0 {
			t.Fatalf("send: exit %d: %s", r.code, r.stderr)
		}
		checkFields(t, "send", r.stdout, sendFields)
		lines := jsonLines(t, r.stdout)
		if len(lines) != n {
			t.Fatalf("send printed %d lines, want %d:\n%s", len(lines), n, r.stdout)
		}
		for i, m := range lines {
			if want := fmt.Sprintf("P-%d", i+1); m["key"] != want {
				t.Errorf("line %d: key %v, want %s", i+1, m["key"], want)
			}
			checkPlacement(t, fmt.Sprintf("send line %d", i+1), m, topic, br, start, end)
		}
	})

	t.Run("consume", func(t *testing.T) {
		const n = 20
		start := time.Now().UnixMilli()
		r := runCLI(t, 60*time.Second, "consume", "--addrsrv", as.url(), "--idc", "idc1", "--topic", topic,
			"--group", "e2e_cli_"+runToken, "--from", "first", "--count", fmt.Sprint(n), "--duration", "45s", "--output", "json")
		end := time.Now().UnixMilli()
		if r.code != 0 {
			t.Fatalf("consume: exit %d: %s", r.code, r.stderr)
		}
		checkFields(t, "consume", r.stdout, consumeFields)
		lines := jsonLines(t, r.stdout)
		if len(lines) != n {
			t.Fatalf("consume printed %d lines, want %d:\n%s", len(lines), n, r.stdout)
		}
		seen := map[string]bool{}
		for i, m := range lines {
			key, _ := m["key"].(string)
			seen[key] = true
			if body, _ := m["body"].(string); !strings.Contains(body, key) {
				t.Errorf("line %d: body %q does not name its key %q (send's default body)", i+1, body, key)
			}
			checkPlacement(t, fmt.Sprintf("consume line %d", i+1), m, topic, br, start, end)
		}
		for i := 1; i <= n; i++ {
			if !seen[fmt.Sprintf("P-%d", i)] {
				t.Errorf("consume did not print P-%d; it printed %v", i, seen)
			}
		}
	})

	t.Run("send-failure", func(t *testing.T) {
		// A name server nobody serves: every send fails, each with a line,
		// and the exit status says so in one line (SDK logs silenced).
		dead := freeAddr(t, idcHost(1))
		r := runCLI(t, 60*time.Second, "send", "--namesrv", dead, "--idc", "idc1", "--topic", topic, "--count", "2",
			"--output", "json", "--send-timeout", "1s", "--log-level", "error")
		if r.code == 0 {
			t.Fatalf("send to a dead name server exited 0:\n%s", r.stdout)
		}
		if lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "zonemq send: ") {
			t.Errorf("want one line on stderr starting \"zonemq send: \", got %q", r.stderr)
		}
		checkFields(t, "failed send", r.stdout, sendErrorFields)
		lines := jsonLines(t, r.stdout)
		if len(lines) != 2 {
			t.Fatalf("send printed %d lines for 2 failed sends:\n%s", len(lines), r.stdout)
		}
		for i, m := range lines {
			if want := fmt.Sprintf("P-%d", i+1); m["key"] != want || m["error"] == "" {
				t.Errorf("failed line %d: key %v (want %s), error %q", i+1, m["key"], want, m["error"])
			}
		}
	})

	t.Run("bad-flags", func(t *testing.T) {
		nsFlags := []string{"--namesrv", ns.addr, "--idc", "idc1"}
		for _, args := range [][]string{
			append([]string{"send", "--topic", topic, "--no-such-flag"}, nsFlags...),
			append([]string{"send", "--topic", topic, "--count", "-1"}, nsFlags...),
			append([]string{"send", "--topic", topic, "--output", "yaml"}, nsFlags...),
			append([]string{"send", "--count", "1"}, nsFlags...), // no --topic
			{"send", "--topic", topic}, // no cluster
			append([]string{"send", "--topic", topic, "--body", "x", "--size", "10"}, nsFlags...),
			append([]string{"consume", "--topic", topic, "--group", "g", "--from", "middle"}, nsFlags...),
			append([]string{"consume", "--topic", topic}, nsFlags...), // no --group
			append([]string{"consume", "--topic", topic, "--group", "g", "--duration", "soon"}, nsFlags...),
			append([]string{"admin", "topic", "create"}, nsFlags...), // no --topic
			append([]string{"admin", "cluster", "--no-such-flag"}, nsFlags...),
			append([]string{"bench", "--mode", "sideways"}, nsFlags...),
			{"no-such-command"},
		} {
			checkUsageError(t, args, runCLI(t, 10*time.Second, args...))
		}
		// Servers refuse bad flags with status 2 too, naming the flag first.
		for _, args := range [][]string{
			{"namesrv", "--idc", "idc1", "--no-such-flag"},
			{"broker", "--idc", "idc1", "--no-such-flag"},
			{"addrsrv", "--idc", "idc1", "--no-such-flag"},
		} {
			r := runCLI(t, 10*time.Second, args...)
			if r.code != 2 || !strings.Contains(strings.SplitN(r.stderr, "\n", 2)[0], "no-such-flag") {
				t.Errorf("zonemq %s: exit %d, stderr starting %q; want 2 and the flag named", strings.Join(args, " "), r.code,
					strings.SplitN(r.stderr, "\n", 2)[0])
			}
		}
	})

	// Every server stops on SIGTERM with status 0 within 10 s (not a
	// subtest: the processes belong to this test).
	for _, s := range []*server{br, as, ns} {
		took := s.stopWith(syscall.SIGTERM)
		t.Logf("%s stopped %v after SIGTERM", s.name, took.Round(time.Millisecond))
		if c, err := net.DialTimeout("tcp", s.addr, 200*time.Millisecond); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections on %s after exiting", s.name, s.addr)
		}
	}
}
