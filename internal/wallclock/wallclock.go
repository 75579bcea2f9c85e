// Package wallclock is the wall clock a broker stamps and schedules by:
// time.Now, shifted by a skew that a chaos campaign may set, to step the
// clock of one process the way NTP or an operator steps a machine's.
//
// Only wall-clock readings see the skew (Now, UnixMilli): durations are
// measured with time.Since on the monotonic clock, which a real step does
// not move either, and code that measures them keeps calling time.Now.
// The skew is 0 unless the process was started with ZONEMQ_CLOCK_SKEW_FILE
// (Watch), which `zonemq drill --chaos` does for its clock faults.
package wallclock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// EnvSkewFile names the file a process reads its skew from (Watch).
const EnvSkewFile = "ZONEMQ_CLOCK_SKEW_FILE"

// maxSkew bounds the skew a file may set.
const maxSkew = 24 * time.Hour

var skew atomic.Int64 // nanoseconds

// Now is the wall-clock time: time.Now plus the skew. Its monotonic
// reading is stripped, so t.Sub and time.Since on it compare wall clocks:
// use time.Now for durations.
func Now() time.Time {
	d := skew.Load()
	if d == 0 {
		return time.Now()
	}
	return time.Now().Round(0).Add(time.Duration(d))
}

// UnixMilli is Now in Unix milliseconds.
func UnixMilli() int64 { return Now().UnixMilli() }

// Skew is the current skew.
func Skew() time.Duration { return time.Duration(skew.Load()) }

// Set sets the skew.
func Set(d time.Duration) { skew.Store(int64(d)) }

// Watch, when the environment names a skew file (EnvSkewFile), reads a
// duration from it (e.g. "-90s", "0") every interval until ctx ends and
// makes it the skew, logging each change; a missing file means 0. Without
// the variable it returns at once.
func Watch(ctx context.Context, logger *slog.Logger, interval time.Duration) {
	path := os.Getenv(EnvSkewFile)
	if path == "" {
		return
	}
	logger.Warn("the wall clock follows a skew file (chaos testing)", "file", path)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		d, err := readSkew(path)
		if err != nil {
			logger.Warn("reading the clock skew file", "file", path, "err", err)
		} else if d != Skew() {
			Set(d)
			logger.Warn("the wall clock was stepped (chaos testing)", "skew", d)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readSkew reads one skew file.
func readSkew(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, err
	}
	if d > maxSkew || d < -maxSkew {
		return 0, fmt.Errorf("skew %v is beyond ±%v", d, maxSkew)
	}
	return d, nil
}
