package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// TestBenchLocalJSON runs a short benchmark against an in-process cluster
// and checks the report's shape and counts, never its timings.
func TestBenchLocalJSON(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"bench", "--local", "--count", "200", "--producers", "2", "--output", "json", "--log-level", "error"}, &stdout, &stderr)
	testutil.Equal(t, code, 0, "exit status; stderr: "+stderr.String())
	var rep benchReport
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
	var rep benchReport
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
	testutil.Equal(t, o.duration, benchDefaultDuration, "neither --count nor --duration")
	o, err = parseBenchArgs([]string{"--local", "--count", "10"}, io.Discard)
	testutil.NoError(t, err)
	testutil.Equal(t, o.duration, benchMaxDuration, "--count alone is capped")
	o, err = parseBenchArgs([]string{"--local", "--count", "10", "--duration", "2s"}, io.Discard)
	testutil.NoError(t, err)
	testutil.Equal(t, o.duration, 2*time.Second, "--duration wins")
}

func TestBenchHistogramPercentiles(t *testing.T) {
	var h latencyHistogram
	testutil.Equal(t, h.percentile(0.5), time.Duration(0), "empty")
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	within := func(got, want time.Duration) bool {
		return got >= want && float64(got) <= float64(want)*(1+1.0/histSubBuckets)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.9, 900 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, time.Millisecond}} {
		if got := h.percentile(c.q); !within(got, c.want) {
			t.Errorf("p%v = %v, want %v (+1/%d)", c.q*100, got, c.want, histSubBuckets)
		}
	}
	testutil.Equal(t, h.max, time.Millisecond, "max")
	if got := h.report().P999; got < 0.999 || got > 1.0 {
		t.Errorf("p99.9 = %vms, want 0.999–1 ms", got)
	}
	var other latencyHistogram
	other.record(time.Hour * 100) // beyond the last bucket: still counted, max exact
	h.merge(&other)
	testutil.Equal(t, h.n, uint64(1001))
	testutil.Equal(t, h.percentile(1), 100*time.Hour, "max after merge")
	// Every bucket's upper bound maps back to the bucket.
	for b := 0; b < histBuckets-1; b++ {
		testutil.Equal(t, histBucket(histUpper(b)), b, "bucket of upper bound")
		testutil.Equal(t, histBucket(histUpper(b)+1), b+1, "bucket after upper bound")
	}
}

func TestBenchSeqSet(t *testing.T) {
	var acked, seen seqSet
	testutil.True(t, acked.addRange(1, 100), "new range")
	testutil.True(t, !acked.addRange(50, 60), "known range")
	for n := int64(1); n <= 100; n += 2 {
		seen.addRange(n, n)
	}
	seen.addRange(500, 500) // received but never acknowledged: not missing
	testutil.Equal(t, acked.missingFrom(&seen), int64(50), "missing")
}
