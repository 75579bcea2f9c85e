package wallclock

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// A skew file steps the wall clock; durations measured with time.Now do
// not see the step.
func TestSkewFileStepsTheWallClockOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "skew")
	t.Setenv(EnvSkewFile, path)
	t.Cleanup(func() { Set(0) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), 10*time.Millisecond)
	}()
	t.Cleanup(func() { cancel(); <-done })

	began := time.Now()
	testutil.NoError(t, os.WriteFile(path, []byte("-10m\n"), 0o644))
	testutil.Eventually(t, 5*time.Second, func() error {
		if Skew() != -10*time.Minute {
			return fmt.Errorf("skew %v", Skew())
		}
		return nil
	})
	if d := time.Now().Sub(Now()); d < 10*time.Minute-time.Second || d > 10*time.Minute+time.Second {
		t.Fatalf("the wall clock is %v behind, want 10m", d)
	}
	testutil.True(t, time.Since(began) < time.Minute, "durations on the monotonic clock do not see the step")

	bad := filepath.Join(t.TempDir(), "bad")
	testutil.NoError(t, os.WriteFile(bad, []byte("48h"), 0o644))
	_, err := readSkew(bad)
	testutil.True(t, err != nil, "a skew beyond ±24h is refused")
	testutil.NoError(t, os.Remove(path))
	testutil.Eventually(t, 5*time.Second, func() error {
		if Skew() != 0 {
			return fmt.Errorf("skew %v", Skew())
		}
		return nil
	})
}
