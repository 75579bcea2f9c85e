package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/testutil"
)

// Helpers shared by the client-tool tests (send, consume, admin, dev).

// cliBuffer is a bytes.Buffer safe for a command writing while the test
// reads.
type cliBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *cliBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *cliBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// cliResult is one finished command.
type cliResult struct {
	stdout, stderr string
	code           int
}

// cliExitCode maps a command's error to its exit status exactly as run
// does, for commands the tests call with their own context.
func cliExitCode(err error) int {
	var ee *exitError
	var ue *usageError
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return 2
	}
	return 1
}

// cliRunCtx runs `zonemq args…` in-process with ctx, as run would.
func cliRunCtx(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, ok := commands[args[0]]
	if !ok {
		panic("no command " + args[0])
	}
	err := c.run(ctx, args[1:], stdout, stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stderr, "zonemq %s: %v\n", c.name, err)
	}
	return cliExitCode(err)
}

// cli runs `zonemq args…` to completion through run.
func cli(t *testing.T, args ...string) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return cliResult{stdout: out.String(), stderr: errb.String(), code: code}
}

// cliClearEnv unsets the client environment variables for the test.
func cliClearEnv(t *testing.T) {
	t.Setenv(envAddrsrv, "")
	t.Setenv(envNamesrv, "")
	t.Setenv(envIDC, "")
	t.Setenv(envDevControl, "")
	t.Setenv(envAccessKey, "")
	t.Setenv(envSecretKey, "")
}

// cliCluster starts an in-process cluster on free ports, stopped at the
// end of the test.
func cliCluster(t *testing.T, idcs int) *devcluster.Cluster {
	t.Helper()
	cliClearEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Options{IDCs: idcs, DataDir: t.TempDir()})
	testutil.NoError(t, err, "devcluster.Start")
	t.Cleanup(func() { c.Close() })
	return c
}

// cliClientArgs are the client flags of a client living in IDC n.
func cliClientArgs(c *devcluster.Cluster, n int) []string {
	return []string{"--addrsrv", strings.Join(c.AddrsrvURLs(n), ","), "--idc", devcluster.IDCName(n)}
}

// cliArgs joins a command, the client flags of IDC n and more flags.
func cliArgs(c *devcluster.Cluster, n int, cmd []string, more ...string) []string {
	out := append([]string(nil), cmd...)
	out = append(out, cliClientArgs(c, n)...)
	return append(out, more...)
}

// cliJSONLines decodes every line of out into a map.
func cliJSONLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	return lines
}

// cliOneLine checks that stderr holds exactly one line that contains want.
func cliOneLine(t *testing.T, r cliResult, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Fatalf("stderr = %q; want one line containing %q", r.stderr, want)
	}
}

func TestCLIClientFlagsNoCluster(t *testing.T) {
	cliClearEnv(t)
	for _, args := range [][]string{
		{"send", "--topic", "T"},
		{"consume", "--topic", "T", "--group", "G"},
		{"admin", "cluster"},
		{"admin", "topic", "list"},
	} {
		r := cli(t, args...)
		testutil.Equal(t, r.code, 2, args)
		cliOneLine(t, r, "--addrsrv")
	}
}

func TestCLIClientFlagsFromEnv(t *testing.T) {
	cliClearEnv(t)
	t.Setenv(envNamesrv, "127.0.1.1:9876;127.0.2.1:9876")
	t.Setenv(envIDC, "idc2")
	fs := newFlagSet("x", "", io.Discard)
	cf := addClientFlags(fs)
	testutil.NoError(t, fs.Parse(nil))
	cfg, err := cf.config(io.Discard)
	testutil.NoError(t, err)
	testutil.Equal(t, strings.Join(cfg.NamesrvAddrs, ","), "127.0.1.1:9876;127.0.2.1:9876")
	testutil.Equal(t, cfg.IDC, "idc2")
	testutil.Equal(t, len(cfg.AddrsrvURLs), 0)

	// An explicit flag beats the environment.
	fs = newFlagSet("x", "", io.Discard)
	cf = addClientFlags(fs)
	testutil.NoError(t, fs.Parse([]string{"--idc", "idc1", "--addrsrv", "http://127.0.1.1:18080"}))
	cfg, err = cf.config(io.Discard)
	testutil.NoError(t, err)
	testutil.Equal(t, cfg.IDC, "idc1")
	testutil.Equal(t, cfg.AddrsrvURLs[0], "http://127.0.1.1:18080")
}

// TestCLIClientFlagsCredentials: the ACL keys come from the flags or the
// environment, and one without the other is a usage error.
func TestCLIClientFlagsCredentials(t *testing.T) {
	cliClearEnv(t)
	t.Setenv(envNamesrv, "127.0.1.1:9876")
	t.Setenv(envAccessKey, "envKey01")
	t.Setenv(envSecretKey, "envSecret01")
	fs := newFlagSet("x", "", io.Discard)
	cf := addClientFlags(fs)
	testutil.NoError(t, fs.Parse(nil))
	cfg, err := cf.config(io.Discard)
	testutil.NoError(t, err)
	testutil.Equal(t, cfg.AccessKey+"/"+cfg.SecretKey, "envKey01/envSecret01")

	fs = newFlagSet("x", "", io.Discard)
	cf = addClientFlags(fs)
	testutil.NoError(t, fs.Parse([]string{"--access-key", "flagKey01", "--secret-key", ""}))
	_, err = cf.config(io.Discard)
	var ue *usageError
	testutil.True(t, errors.As(err, &ue), "a key without its secret: %v", err)
}

func TestCLIBadFlags(t *testing.T) {
	cliClearEnv(t)
	ns := []string{"--namesrv", "127.0.1.1:9876"}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"send", "--nope"}, "-nope"},
		{append([]string{"send", "--topic", "T", "--output", "xml"}, ns...), "--output"},
		{append([]string{"send", "--topic", "T", "--body", "x", "--size", "3"}, ns...), "--body or --size"},
		{append([]string{"send", "--topic", "T", "--count", "-1"}, ns...), "--count"},
		{append([]string{"send", "--topic", "T", "--key-prefix", "a b"}, ns...), "--key-prefix"},
		{append([]string{"send"}, ns...), "--topic is required"},
		{append([]string{"send", "--topic", "T", "--idc", "bad idc!"}, ns...), "--idc"},
		{append([]string{"send", "--topic", "T", "--local-ip", "nowhere"}, ns...), "--local-ip"},
		{append([]string{"send", "--topic", "T", "--log-level", "loud"}, ns...), "--log-level"},
		{append([]string{"consume", "--topic", "T"}, ns...), "--group is required"},
		{append([]string{"consume", "--topic", "T", "--group", "G", "--from", "middle"}, ns...), "--from"},
		{append([]string{"consume", "--topic", "T", "--group", "G", "--tag", "||"}, ns...), "--tag"},
		{append([]string{"consume", "--topic", "T", "--group", "G", "--duration", "soon"}, ns...), "-duration"},
		{[]string{"admin", "bogus"}, "unknown admin command"},
		{[]string{"admin", "topic", "frob"}, "expected one of"},
		{append([]string{"admin", "topic", "create"}, ns...), "--topic is required"},
		{append([]string{"admin", "topic", "create", "--topic", "T", "--queues", "0"}, ns...), "--queues"},
		{append([]string{"admin", "topic", "create", "--topic", "T", "--cluster", "C", "--broker", "1.2.3.4:5"}, ns...), "not both"},
		{append([]string{"admin", "group"}, ns...), "--group is required"},
		{append([]string{"admin", "kv", "put", "--namespace", "N", "--key", "K"}, ns...), "--value is required"},
		{append([]string{"admin", "kv", "list"}, ns...), "--namespace is required"},
		{append([]string{"admin", "cluster", "--output", "yaml"}, ns...), "--output"},
		{[]string{"dev", "--idcs", "0"}, "--idcs"},
		{[]string{"dev", "--base-port", "60000"}, "--base-port"},
		{[]string{"dev-ctl", "explode"}, "usage"},
		{[]string{"dev-ctl", "stop", "broker"}, "which IDC?"},
		{append([]string{"send", "--topic", "bad topic!"}, ns...), "--topic"},
		{append([]string{"consume", "--topic", "bad topic!", "--group", "G"}, ns...), "--topic"},
		{append([]string{"send", "--topic", "T", "--size", "0"}, ns...), "--size must be at least 1"},
		{append([]string{"send", "--topic", "T", "--interval", "500"}, ns...), "needs a unit"},
		{append([]string{"send", "--topic", "T", "--body", "@no-such-file"}, ns...), "no-such-file"},
	}
	for _, tc := range cases {
		r := cli(t, tc.args...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", tc.args, r.code, r.stderr)
			continue
		}
		cliOneLine(t, r, tc.want)
		testutil.Equal(t, r.stdout, "", tc.args)
	}
}

func TestCLIHelp(t *testing.T) {
	cliClearEnv(t)
	for _, args := range [][]string{{"help", "send"}, {"send", "--help"}, {"consume", "-h"}, {"admin", "help"}, {"admin", "topic", "create", "--help"}, {"dev", "--help"}} {
		r := cli(t, args...)
		testutil.Equal(t, r.code, 0, args)
		testutil.True(t, strings.Contains(r.stderr, "Usage: zonemq"), args, r.stderr)
	}
}

func TestCLIVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := cli(t, args...)
		testutil.Equal(t, r.code, 0, args)
		testutil.True(t, strings.HasPrefix(r.stdout, "zonemq ") && strings.Contains(r.stdout, "go1."), args, r.stdout)
		// A test binary carries no VCS stamp: the line says why.
		testutil.True(t, strings.Contains(r.stdout, "revision") || strings.Contains(r.stdout, "no revision recorded: built by go run or go test"), r.stdout)
	}
}

// TestCLISendBodyFromFile sends nothing (no cluster): it checks that --body
// @FILE is read before the producer starts, so a file's bytes become the
// body of every message.
func TestCLISendBodyFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "body.txt")
	testutil.NoError(t, os.WriteFile(path, []byte("from a file"), 0o644))
	o, err := parseSendArgs([]string{"--namesrv", "127.0.1.1:9876", "--topic", "T", "--body", "@" + path}, io.Discard)
	testutil.NoError(t, err)
	testutil.Equal(t, string(o.messageBody("P-1")), "from a file", "body")
	o.body = "-"
	testutil.NoError(t, o.readBody(strings.NewReader("from stdin")))
	testutil.Equal(t, string(o.messageBody("P-1")), "from stdin", "body")
}

// TestCLILogLineForTerminal: on a terminal an SDK log record is one short
// line, without time and without the attributes every line repeats.
func TestCLILogLineForTerminal(t *testing.T) {
	var b bytes.Buffer
	l := newCLILogger(&b, "zonemq send", slog.LevelWarn).With("role", "client", "kind", "producer", "idc", "idc1")
	l.Info("not shown")
	l.Warn("name server failed;\nmoving on", "namesrv", "127.0.1.1:9876", "err", errors.New("EOF"))
	testutil.Equal(t, b.String(), "zonemq send: warn: name server failed; moving on (namesrv=127.0.1.1:9876, err=EOF)\n")
}
