package idc

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func liveIn(idcs ...string) func(string) bool {
	return func(name string) bool {
		for _, i := range idcs {
			if Same(i, name) {
				return true
			}
		}
		return false
	}
}

func TestIDCEligibleConsumers(t *testing.T) {
	c1 := FormatClientID("127.0.1.1", "c1", "idc1")
	c1b := FormatClientID("127.0.1.2", "c1b", "idc1")
	c2 := FormatClientID("127.0.2.1", "c2", "idc2")
	c2b := FormatClientID("127.0.2.2", "c2b", "idc2")
	c3 := FormatClientID("127.0.3.1", "c3", "idc3")
	stock := "127.0.9.1@stock"

	cases := []struct {
		name      string
		brokerIDC string
		consumers []string
		live      func(string) bool
		want      []string
	}{
		{"S1 healthy: broker in idc1 serves only idc1 consumers",
			"idc1", []string{c2, c1}, liveIn("idc1", "idc2"), []string{c1}},
		{"S1 healthy: broker in idc2 serves only idc2 consumers",
			"idc2", []string{c2, c1, c2b}, liveIn("idc1", "idc2"), []string{c2, c2b}},
		{"partition: broker idc1's view lacks c1, so c2 drains it",
			"idc1", []string{c2}, liveIn("idc1", "idc2"), []string{c2}},
		{"S2: idc1 has no live broker, broker in idc2 serves c1 and c2",
			"idc2", []string{c2, c1}, liveIn("idc2"), []string{c1, c2}},
		{"S2 with three IDCs: idc3 consumers stay home",
			"idc2", []string{c3, c2, c1}, liveIn("idc2", "idc3"), []string{c1, c2}},
		{"S2: the dead IDC's own broker (stale view) still prefers its IDC",
			"idc1", []string{c1, c2}, liveIn("idc2"), []string{c1}},
		{"S4: every idc1 consumer gone, idc2 consumers take idc1's broker",
			"idc1", []string{c2b, c2}, liveIn("idc1", "idc2"), []string{c2, c2b}},
		{"S5: idc1 consumer back, queues return to it",
			"idc1", []string{c2, c1, c2b}, liveIn("idc1", "idc2"), []string{c1}},
		{"IDC names compare case-insensitively",
			"IDC1", []string{c1, c2}, liveIn("idc1", "idc2"), []string{c1}},
		{"stock consumers only: all of them",
			"idc1", []string{stock, "127.0.8.1@x"}, liveIn("idc1"), []string{"127.0.8.1@x", stock}},
		{"stock consumers are not eligible beside an own-IDC consumer",
			"idc1", []string{stock, c1}, liveIn("idc1"), []string{c1}},
		{"stock consumers join the fallback",
			"idc1", []string{stock, c2}, liveIn("idc1", "idc2"), []string{c2, stock}},
		{"broker of unknown IDC: fallback to all",
			"", []string{c1, c2}, liveIn("idc1", "idc2"), []string{c1, c2}},
		{"broker of unknown IDC: consumers without a live home broker",
			"", []string{c1, c2}, liveIn("idc2"), []string{c1}},
		{"nil callback: every IDC has a live broker",
			"idc1", []string{c2, c1, c1b}, nil, []string{c1, c1b}},
		{"duplicates reported once",
			"idc1", []string{c1, c2, c1}, liveIn("idc1", "idc2"), []string{c1}},
		{"duplicates reported once in the fallback",
			"idc3", []string{c1, c2, c1}, liveIn("idc1", "idc2", "idc3"), []string{c1, c2}},
		{"no consumers", "idc1", nil, liveIn("idc1"), []string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.consumers)
			got := EligibleConsumers(c.brokerIDC, in, c.live)
			if !slices.Equal(got, c.want) {
				t.Fatalf("EligibleConsumers(%q, %v) = %v, want %v", c.brokerIDC, c.consumers, got, c.want)
			}
			if !slices.Equal(in, c.consumers) {
				t.Fatalf("input changed to %v", in)
			}
			if !slices.IsSorted(got) {
				t.Fatalf("result not sorted: %v", got)
			}
		})
	}
}

func TestIDCEligibleConsumersAsksOncePerIDC(t *testing.T) {
	calls := map[string]int{}
	flip := false
	live := func(name string) bool {
		calls[name]++
		flip = !flip // an answer that changes on every call
		return flip
	}
	ids := []string{
		FormatClientID("127.0.2.1", "a", "idc2"),
		FormatClientID("127.0.2.2", "b", "IDC2"),
		FormatClientID("127.0.2.3", "c", "idc2"),
	}
	got := EligibleConsumers("idc1", ids, live)
	total := 0
	for _, n := range calls {
		total += n
	}
	if total != 1 {
		t.Fatalf("callback asked %d times (%v), want once for one IDC", total, calls)
	}
	// The one answer (true: idc2 has a live broker) leaves nobody eligible,
	// so all three are returned — never a mix of answers.
	if len(got) != 3 {
		t.Fatalf("got %v, want all three consumers", got)
	}
}

// TestIDCEligibleConsumersDeterministic: every consumer gets the broker's
// list in its own order; all must compute the same answer.
func TestIDCEligibleConsumersDeterministic(t *testing.T) {
	var ids []string
	for i := range 9 {
		ids = append(ids, FormatClientID(fmt.Sprintf("127.0.%d.1", i%3+1), fmt.Sprint(i), fmt.Sprintf("idc%d", i%3+1)))
	}
	ids = append(ids, "127.0.9.9@stock")
	want := EligibleConsumers("idc2", ids, liveIn("idc2", "idc3"))
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		shuffled := slices.Clone(ids)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := EligibleConsumers("idc2", shuffled, liveIn("idc2", "idc3")); !slices.Equal(got, want) {
			t.Fatalf("order-dependent result: %v vs %v", got, want)
		}
	}
}

func TestIDCAllocateAveragely(t *testing.T) {
	three := []string{"a", "b", "c"}
	type rng struct{ start, end int }
	cases := []struct {
		n         int
		consumers []string
		want      map[string]rng
	}{
		{8, three, map[string]rng{"a": {0, 3}, "b": {3, 6}, "c": {6, 8}}},
		{9, three, map[string]rng{"a": {0, 3}, "b": {3, 6}, "c": {6, 9}}},
		{4, three, map[string]rng{"a": {0, 2}, "b": {2, 3}, "c": {3, 4}}},
		{3, three, map[string]rng{"a": {0, 1}, "b": {1, 2}, "c": {2, 3}}},
		{2, three, map[string]rng{"a": {0, 1}, "b": {1, 2}, "c": {0, 0}}},
		{1, three, map[string]rng{"a": {0, 1}, "b": {0, 0}, "c": {0, 0}}},
		{0, three, map[string]rng{"a": {0, 0}, "b": {0, 0}, "c": {0, 0}}},
		{-1, three, map[string]rng{"a": {0, 0}}},
		{4, []string{"solo"}, map[string]rng{"solo": {0, 4}, "other": {0, 0}}},
		{4, nil, map[string]rng{"a": {0, 0}}},
	}
	for _, c := range cases {
		for me, want := range c.want {
			s, e := AllocateAveragely(c.n, c.consumers, me)
			if s != want.start || e != want.end {
				t.Errorf("AllocateAveragely(%d, %v, %q) = (%d,%d), want (%d,%d)", c.n, c.consumers, me, s, e, want.start, want.end)
			}
		}
	}
}

// TestIDCAllocateAveragelyCovers checks, for many sizes, that the ranges of
// all consumers tile [0,n) exactly once, in consumer order, and differ in size
// by at most one.
func TestIDCAllocateAveragelyCovers(t *testing.T) {
	for n := 0; n <= 20; n++ {
		for k := 1; k <= 8; k++ {
			var consumers []string
			for i := range k {
				consumers = append(consumers, fmt.Sprintf("c%02d", i))
			}
			next, minSize, maxSize := 0, n+1, -1
			for _, c := range consumers {
				s, e := AllocateAveragely(n, consumers, c)
				if s == e {
					minSize = 0
					continue
				}
				if s != next {
					t.Fatalf("n=%d k=%d: %s starts at %d, want %d", n, k, c, s, next)
				}
				next = e
				minSize, maxSize = min(minSize, e-s), max(maxSize, e-s)
			}
			if next != n {
				t.Fatalf("n=%d k=%d: ranges cover [0,%d), want [0,%d)", n, k, next, n)
			}
			if n > 0 && maxSize-minSize > 1 {
				t.Fatalf("n=%d k=%d: sizes range %d..%d", n, k, minSize, maxSize)
			}
		}
	}
}

// TestIDCTakeoverEndToEnd walks one broker's queues through S1 → S4 → S5
// with the two functions composed the way a consumer uses them.
func TestIDCTakeoverEndToEnd(t *testing.T) {
	c1 := FormatClientID("127.0.1.1", "c1", "idc1")
	c2 := FormatClientID("127.0.2.1", "c2", "idc2")
	c2b := FormatClientID("127.0.2.2", "c2b", "idc2")
	const queues = 4
	owned := func(view []string, me string) int {
		s, e := AllocateAveragely(queues, EligibleConsumers("idc1", view, liveIn("idc1", "idc2")), me)
		return e - s
	}
	// S1: c1 owns all four of idc1's broker's queues.
	if owned([]string{c1, c2, c2b}, c1) != 4 || owned([]string{c1, c2, c2b}, c2) != 0 {
		t.Fatal("S1: idc1's queues should all belong to c1")
	}
	// S4: c1 gone; c2 and c2b split them.
	if owned([]string{c2, c2b}, c2) != 2 || owned([]string{c2, c2b}, c2b) != 2 {
		t.Fatal("S4: idc2's consumers should split idc1's queues")
	}
	// S5: c1 back; the queues return.
	if owned([]string{c2b, c1, c2}, c1) != 4 || owned([]string{c2b, c1, c2}, c2b) != 0 {
		t.Fatal("S5: idc1's queues should return to c1")
	}
}
