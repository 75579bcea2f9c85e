package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// soakConfig is `compare run --soak`: one zonemq broker under a steady
// load for a long time, to see that its memory stays flat and its tail
// latency low (issue 11: 10 k msg/s for 10 minutes, p99.9 ≤ 10 ms).
type soakConfig struct {
	rate     int
	duration time.Duration
	every    time.Duration // RSS sampling period
}

// runSoak starts a zonemq name server and broker (--flush async), runs
// `zonemq bench --rate R --inflight N --duration D` against it, samples the
// broker's resident memory meanwhile, and prints a summary.
func runSoak(c config, s soakConfig, w io.Writer) error {
	dir := filepath.Join(c.work, "soak")
	z := zonemqSystem{label: "zonemq", bin: c.zonemq}
	srv, cl, err := z.start(c, dir, setupPlain)
	if err != nil {
		return err
	}
	defer z.stop(srv)
	nsAddr := cl.(zonemqClient).namesrv

	var mu sync.Mutex
	var rss []int64 // KiB, one sample per period
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(s.every)
		defer t.Stop()
		for {
			if kb, err := residentKiB(srv.cmd.Process.Pid); err == nil {
				mu.Lock()
				rss = append(rss, kb)
				mu.Unlock()
			}
			select {
			case <-t.C:
			case <-stop:
				return
			}
		}
	}()
	cpu0 := srv.cpu()
	var b benchJSON
	fmt.Fprintf(os.Stderr, "soak: %d msg/s for %s, %d in flight\n", s.rate, s.duration, c.inflight)
	_, err = runClient(filepath.Join(dir, "soak-client.log"), &b, c.zonemq, "bench", "--namesrv", nsAddr, "--idc", "idc1",
		"--topic", "BenchTopic", "--mode", "send", "--size", strconv.Itoa(c.size), "--duration", s.duration.String(),
		"--inflight", strconv.Itoa(c.inflight), "--rate", strconv.Itoa(s.rate), "--output", "json", "--log-level", "error")
	serverCPU := srv.cpu() - cpu0
	close(stop)
	<-sampled
	if err != nil {
		return err
	}
	if b.Send == nil {
		return fmt.Errorf("zonemq bench reported no send section")
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(w, "soak: zonemq, %d-byte bodies, %d msg/s asked for %s, %d in flight, --flush async\n\n",
		c.size, s.rate, s.duration, c.inflight)
	fmt.Fprintf(w, "| sent | msg/s | p50 / p99 / p99.9 / max (ms) | errors | broker CPU per msg | broker RSS first / last / max (MiB) |\n|---|---|---|---|---|---|\n")
	perMsg := 0.0
	if b.Send.Messages > 0 {
		perMsg = float64(serverCPU.Microseconds()) / float64(b.Send.Messages)
	}
	l := b.Send.Latency
	first, last, peak := int64(0), int64(0), int64(0)
	if len(rss) > 0 {
		first, last, peak = rss[0], rss[len(rss)-1], slices.Max(rss)
	}
	mib := func(kb int64) string { return strconv.FormatFloat(float64(kb)/1024, 'f', 1, 64) }
	fmt.Fprintf(w, "| %d | %.0f | %.2f / %.2f / %.2f / %.2f | %d | %.1f µs | %s / %s / %s |\n\n",
		b.Send.Messages, b.Send.MsgsPerSec, l.P50, l.P99, l.P999, l.Max, b.Send.Errors, perMsg, mib(first), mib(last), mib(peak))
	var samples []string
	for _, kb := range rss {
		samples = append(samples, mib(kb))
	}
	fmt.Fprintf(w, "broker RSS every %s (MiB): %s\n", s.every, strings.Join(samples, " "))
	return nil
}

// residentKiB reads VmRSS from /proc/PID/status.
func residentKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
