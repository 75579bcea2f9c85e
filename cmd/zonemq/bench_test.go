package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/loadgen"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestBenchLocalJSON runs a short benchmark against an in-process cluster
// and checks the report's shape and counts, never its timings.
func TestBenchLocalJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "--local", "--count", "200", "--producers", "2", "--output", "json", "--log-level", "error"}, &stdout, &stderr)
	testutil.Equal(t, code, 0, "exit status; stderr: "+stderr.String())
	var rep loadgen.Report
	dec := json.NewDecoder(&stdout)
	dec.DisallowUnknownFields()
	testutil.NoError(t, dec.Decode(&rep), "the JSON report")
	var rest bytes.Buffer
	if _, err := io.Copy(&rest, dec.Buffered()); err == nil && strings.TrimSpace(rest.String()) != "" {
		t.Fatalf("more than one JSON object on stdout: %q", rest.String())
	}
	testutil.Equal(t, rep.Errors, int64(0), "errors")
	testutil.Equal(t, rep.Mode, "both")
	testutil.True(t, rep.Local, "local")
	testutil.Equal(t, rep.Flush, "async")
	testutil.True(t, rep.Send != nil && rep.Consume != nil, "send and consume sections", stdout.String())
	testutil.Equal(t, rep.Send.Messages, int64(200), "acknowledged")
	testutil.Equal(t, rep.Send.Errors, int64(0), "send errors")
	testutil.Equal(t, rep.Send.Bytes, int64(200*1024), "bytes sent")
	testutil.True(t, rep.Send.MsgsPerSec > 0 && rep.Send.MBPerSec > 0, "send throughput", rep.Send)
	testutil.True(t, rep.Send.Latency.P50 > 0 && rep.Send.Latency.P50 <= rep.Send.Latency.P99 &&
		rep.Send.Latency.P99 <= rep.Send.Latency.Max, "send latency percentiles ordered", rep.Send.Latency)
	testutil.Equal(t, rep.Consume.Messages, int64(200), "consumed")
	testutil.Equal(t, rep.Consume.Missing, int64(0), "missing")
	testutil.True(t, rep.Consume.MsgsPerSec > 0 && rep.Consume.MBPerSec > 0, "consume throughput", rep.Consume)
}

// TestBenchLocalInflight sends asynchronously with a window and checks that
// every message is acknowledged and consumed exactly once.
func TestBenchLocalInflight(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "--local", "--count", "300", "--inflight", "16", "--output", "json", "--log-level", "error"}, &stdout, &stderr)
	testutil.Equal(t, code, 0, "exit status; stderr: "+stderr.String())
	var rep loadgen.Report
	testutil.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), "the JSON report")
	testutil.Equal(t, rep.Inflight, 16, "inflight")
	testutil.Equal(t, rep.Producers, 0, "producers")
	testutil.True(t, rep.Send != nil && rep.Consume != nil, "send and consume sections", stdout.String())
	testutil.Equal(t, rep.Send.Messages, int64(300), "acknowledged")
	testutil.Equal(t, rep.Send.Calls, int64(300), "send calls")
	testutil.Equal(t, rep.Consume.Messages, int64(300), "consumed")
	testutil.Equal(t, rep.Errors, int64(0), "errors")
}

func TestBenchBadFlags(t *testing.T) {
	t.Setenv(envAddrsrv, "")
	t.Setenv(envNamesrv, "")
	for _, args := range [][]string{
		{"bench"}, // no cluster
		{"bench", "--local", "--namesrv", "127.0.0.1:9876"},
		{"bench", "--namesrv", "127.0.0.1:9876", "--flush", "sync"},
		{"bench", "--local", "--flush", "never"},
		{"bench", "--local", "--mode", "both-ways"},
		{"bench", "--local", "--size", "0"},
		{"bench", "--local", "--producers", "0"},
		{"bench", "--local", "--inflight", "-1"},
		{"bench", "--local", "--rate", "-5"},
		{"bench", "--local", "--inflight", "8", "--producers", "2"},
		{"bench", "--local", "--batch", "8", "--size", "1048576"},
		{"bench", "--local", "--output", "yaml"},
		{"bench", "--local", "--no-such-flag"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		testutil.Equal(t, code, 2, strings.Join(args, " "))
		testutil.Equal(t, strings.Count(stderr.String(), "\n"), 1, "one line on stderr: "+stderr.String())
		testutil.Equal(t, stdout.Len(), 0, "nothing on stdout")
	}
}

func TestBenchDurationDefaults(t *testing.T) {
	o, err := parseBenchArgs([]string{"--local"}, io.Discard)
	testutil.NoError(t, err)
	testutil.Equal(t, o.load.Duration, loadgen.DefaultDuration, "neither --count nor --duration")
	o, err = parseBenchArgs([]string{"--local", "--count", "10"}, io.Discard)
	testutil.NoError(t, err)
	testutil.Equal(t, o.load.Duration, loadgen.MaxDuration, "--count alone is capped")
	o, err = parseBenchArgs([]string{"--local", "--count", "10", "--duration", "2s"}, io.Discard)
	testutil.NoError(t, err)
	testutil.Equal(t, o.load.Duration, 2*time.Second, "--duration wins")
}
