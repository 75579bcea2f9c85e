package protocol_test

import (
	"maps"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

func TestPropertiesParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want map[string]string
	}{
		{"empty", "", map[string]string{}},
		{"Go client send", "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01C00002022C180000000096172ff00001\x02",
			map[string]string{"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "C00002022C180000000096172ff00001"}},
		{"last item without terminator", "A\x011\x02B\x012", map[string]string{"A": "1", "B": "2"}},
		{"items without separator skipped", "JUNK\x02A\x011\x02\x02ALSOJUNK", map[string]string{"A": "1"}},
		{"empty key skipped", "\x01v\x02A\x011\x02", map[string]string{"A": "1"}},
		{"empty value kept", "A\x01\x02", map[string]string{"A": ""}},
		{"value with a separator", "A\x01x\x01y\x02", map[string]string{"A": "x\x01y"}},
		{"later duplicate wins", "A\x011\x02A\x012\x02", map[string]string{"A": "2"}},
		{"unicode", "标签\x01值\x02", map[string]string{"标签": "值"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := protocol.ParseProperties(tc.in)
			if !maps.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPropertiesEncode(t *testing.T) {
	testutil.Equal(t, protocol.EncodeProperties(nil), "")
	testutil.Equal(t, protocol.EncodeProperties(map[string]string{}), "")
	m := map[string]string{"UNIQ_KEY": "u", "KEYS": "a b", "TAGS": "TagA", "E": ""}
	s := protocol.EncodeProperties(m)
	// Sorted keys, every pair terminated: deterministic output.
	testutil.Equal(t, s, "E\x01\x02KEYS\x01a b\x02TAGS\x01TagA\x02UNIQ_KEY\x01u\x02")
	for range 10 {
		testutil.Equal(t, protocol.EncodeProperties(m), s)
	}
	if got := protocol.ParseProperties(s); !maps.Equal(got, m) {
		t.Fatalf("round trip %q != %q", got, m)
	}
}

func TestPropertiesProperty(t *testing.T) {
	s := "TAGSX\x01no\x02TAGS\x01TagA\x02KEYS\x01\x02XTAGS\x01no\x02JUNK\x02WAIT\x01false"
	for name, want := range map[string]struct {
		v  string
		ok bool
	}{
		"TAGS":  {"TagA", true},
		"TAGSX": {"no", true},
		"KEYS":  {"", true},
		"WAIT":  {"false", true},
		"TAG":   {"", false},
		"JUNK":  {"", false},
		"":      {"", false},
		"DELAY": {"", false},
	} {
		v, ok := protocol.Property(s, name)
		testutil.Equal(t, v, want.v, name)
		testutil.Equal(t, ok, want.ok, name)
	}
	// Property agrees with ParseProperties on every key.
	for k, v := range protocol.ParseProperties(s) {
		got, ok := protocol.Property(s, k)
		testutil.True(t, ok, k)
		testutil.Equal(t, got, v, k)
	}
}

// TagsHashCode must equal Java's String.hashCode: the Go client sends these
// numbers in a subscription's codeSet and Java brokers store them.
func TestPropertiesTagsHashCode(t *testing.T) {
	for tag, want := range map[string]int64{
		"TagA":               2598919, // §2.3, observed in a heartbeat's codeSet
		"TagB":               2598920,
		"":                   0,
		"*":                  42,
		"hello world":        1794106052,
		"polygenelubricants": -2147483648, // wraps to Integer.MIN_VALUE
		"标签":                 857175,
		"😀":                  1772899, // a surrogate pair in UTF-16
	} {
		testutil.Equal(t, protocol.TagsHashCode(tag), want, tag)
	}
}
