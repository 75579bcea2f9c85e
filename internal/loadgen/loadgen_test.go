package loadgen

import (
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

func TestHistogramPercentiles(t *testing.T) {
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

func TestSeqSet(t *testing.T) {
	var acked, seen seqSet
	testutil.True(t, acked.addRange(1, 100), "new range")
	testutil.True(t, !acked.addRange(50, 60), "known range")
	for n := int64(1); n <= 100; n += 2 {
		seen.addRange(n, n)
	}
	seen.addRange(500, 500) // received but never acknowledged: not missing
	testutil.Equal(t, acked.missingFrom(&seen), int64(50), "missing")
}
