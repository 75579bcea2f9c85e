package idc

import (
	"slices"
	"testing"
)

type node struct{ name, idc string }

func nodeIDC(n node) string { return n.idc }

func names(ns []node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.name
	}
	return out
}

func TestIDCOwnFirst(t *testing.T) {
	items := []node{{"a", "idc2"}, {"b", "idc1"}, {"c", ""}, {"d", "idc1"}, {"e", "idc3"}, {"f", "IDC1"}}
	cases := []struct {
		own  string
		want []string
	}{
		{"idc1", []string{"b", "d", "f", "a", "c", "e"}},
		{"idc2", []string{"a", "b", "c", "d", "e", "f"}},
		{"idc3", []string{"e", "a", "b", "c", "d", "f"}},
		{"idc9", []string{"a", "b", "c", "d", "e", "f"}},
		{"", []string{"a", "b", "c", "d", "e", "f"}}, // unknown own IDC: "" items are not promoted
	}
	for _, c := range cases {
		before := slices.Clone(items)
		got := OwnFirst(items, nodeIDC, c.own)
		if !slices.Equal(names(got), c.want) {
			t.Errorf("OwnFirst(own=%q) = %v, want %v", c.own, names(got), c.want)
		}
		if !slices.Equal(items, before) {
			t.Fatalf("OwnFirst changed its input: %v", items)
		}
	}
	if got := OwnFirst(nil, nodeIDC, "idc1"); got == nil || len(got) != 0 {
		t.Errorf("OwnFirst(nil) = %#v, want an empty slice", got)
	}
	// The result is a new slice even when nothing moves.
	got := OwnFirst(items, nodeIDC, "idc9")
	got[0].name = "changed"
	if items[0].name != "a" {
		t.Errorf("OwnFirst returned a slice sharing its input's array")
	}
}
