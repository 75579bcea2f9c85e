package store

import (
	"context"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// A fenced store shows consumers only confirmed records: GetVisible stops
// at the first record past the mark without stepping over it (not even
// through a filter that rejects it), VisibleMaxOffset ends there, the mark
// survives a restart, and cutting the log lowers it.
func TestFencedStoreShowsOnlyConfirmedRecords(t *testing.T) {
	o, _ := testOptions(t)
	o.Fenced = true
	s := openStore(t, o)
	if got := s.Confirmed(); got != 0 {
		t.Fatalf("a new fenced store confirms %d, want 0", got)
	}
	var puts []PutResult
	for _, b := range []string{"a", "b", "c", "d"} {
		puts = append(puts, mustPut(t, s, newMsg("T", 0, b, map[string]string{protocol.PropertyTags: "x"})))
	}
	res := s.GetVisible(nil, "T", 0, 0, 32, 0, nil)
	if res.Status != OffsetOverflowOne || res.NextBeginOffset != 0 || res.MaxOffset != 0 || res.FencedAt != puts[0].End {
		t.Fatalf("nothing confirmed: got status %v next %d max %d fencedAt %d, want OffsetOverflowOne 0 0 %d",
			res.Status, res.NextBeginOffset, res.MaxOffset, res.FencedAt, puts[0].End)
	}
	if got := s.GetMessages("T", 0, 0, 32, 0, nil); len(got.Messages) != 4 {
		t.Fatalf("the broker's own reads see %d records, want all 4", len(got.Messages))
	}

	s.SetConfirmed(puts[1].End)
	res = s.GetVisible(nil, "T", 0, 0, 32, 0, nil)
	if res.Status != Found || len(res.Messages) != 2 || res.NextBeginOffset != 2 || res.MaxOffset != 2 || res.FencedAt != puts[2].End {
		t.Fatalf("two confirmed: got status %v, %d records, next %d max %d fencedAt %d", res.Status, len(res.Messages),
			res.NextBeginOffset, res.MaxOffset, res.FencedAt)
	}
	if got := s.VisibleMaxOffset("T", 0); got != 2 {
		t.Fatalf("VisibleMaxOffset = %d, want 2", got)
	}
	if got := s.GetVisible(nil, "T", 0, 0, 1, 0, nil); got.MaxOffset != 2 || got.FencedAt != 0 {
		t.Fatalf("a batch full before the fence: max %d fencedAt %d, want 2 and 0", got.MaxOffset, got.FencedAt)
	}
	none := func(int64) bool { return false }
	res = s.GetVisible(nil, "T", 0, 2, 32, 0, none)
	if res.NextBeginOffset != 2 || res.Status != OffsetOverflowOne {
		t.Fatalf("a filter stepped over unconfirmed entries: next %d status %v, want 2 OffsetOverflowOne", res.NextBeginOffset, res.Status)
	}
	if res := s.GetVisible(nil, "T", 0, 0, 32, 0, none); res.NextBeginOffset != 2 || res.Status != NoMatchedMessage {
		t.Fatalf("filtered confirmed entries: next %d status %v, want 2 NoMatchedMessage", res.NextBeginOffset, res.Status)
	}

	checkpointNow(t, s)
	testutil.NoError(t, s.Close(), "Close")
	s = openStore(t, o)
	if got := s.Confirmed(); got != puts[1].End {
		t.Fatalf("after a restart the store confirms %d, want %d", got, puts[1].End)
	}
	testutil.NoError(t, s.TruncateLog(puts[1].CommitLogOffset), "TruncateLog")
	if got := s.Confirmed(); got != puts[1].CommitLogOffset {
		t.Fatalf("after cutting the log to %d the store confirms %d", puts[1].CommitLogOffset, got)
	}
	if got := s.VisibleMaxOffset("T", 0); got != 1 {
		t.Fatalf("VisibleMaxOffset after the cut = %d, want 1", got)
	}
}

// Without Fenced every record is visible, and with FlushSync only fsynced
// ones are.
func TestUnfencedStoreShowsEveryRecord(t *testing.T) {
	o, _ := testOptions(t)
	s := openStore(t, o)
	mustPut(t, s, newMsg("T", 0, "a", nil))
	if s.Confirmed() != NoFence || s.Visible() != NoFence {
		t.Fatalf("an unfenced store confirms %d, shows %d", s.Confirmed(), s.Visible())
	}
	if res := s.GetVisible(nil, "T", 0, 0, 32, 0, nil); len(res.Messages) != 1 || res.MaxOffset != 1 {
		t.Fatalf("got %d records, max %d", len(res.Messages), res.MaxOffset)
	}
}

// Pull-sized reads (32 records) of 1 KiB messages, well below the fence of
// a store whose newest 1 000 records are not confirmed (a replicated
// master under load), against the same reads of an unfenced store: what the
// fence costs a pull (the check per entry and finding the visible end).
func BenchmarkGetVisibleBelowTheFence(b *testing.B) {
	const n, unconfirmed = 20_000, 1_000
	for _, fenced := range []bool{false, true} {
		name := "unfenced"
		if fenced {
			name = "fenced"
		}
		b.Run(name, func(b *testing.B) {
			s := benchStore(b, FlushAsync)
			for i := 0; i < n; i++ {
				res, err := s.PutMessage(context.Background(), benchMessage(0, i))
				if err != nil {
					b.Fatal(err)
				}
				if fenced && i == n-unconfirmed-1 {
					s.SetConfirmed(res.End)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			off := int64(0)
			for i := 0; i < b.N; i++ {
				res := s.GetVisible(nil, "BenchTopic", 0, off, 32, 0, nil)
				if res.Status != Found || len(res.Messages) != 32 {
					b.Fatalf("status %v, %d messages at %d", res.Status, len(res.Messages), off)
				}
				if fenced && res.MaxOffset != n-unconfirmed {
					b.Fatalf("visible max %d, want %d", res.MaxOffset, n-unconfirmed)
				}
				off = res.NextBeginOffset
				if off >= n-unconfirmed-32 {
					off = 0
				}
			}
		})
	}
}
