package filter

import (
	"errors"
	"testing"
)

// FuzzFilterParse feeds arbitrary text to the parser: it must never panic,
// must refuse with a SyntaxError or compile, and a compiled expression must
// evaluate on any properties without panicking.
func FuzzFilterParse(f *testing.F) {
	for _, s := range []string{
		"a > 5 AND b = 'x'", "a BETWEEN 1 AND 3", "a NOT IN ('x','y')", "a IS NOT NULL", "NOT (a <> 1.5e3)",
		"TRUE", "(((a)))", "a CONTAINS 'x' OR b STARTSWITH 'y'", "-a = -1", "'it''s' = q", "/* c */ a = 1 -- d",
		"a > b", "a = TRUE",
	} {
		f.Add(s, "5")
	}
	f.Fuzz(func(t *testing.T, src, prop string) {
		e, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) returned %T, want *SyntaxError", src, err)
			}
			return
		}
		props := MapProperties(map[string]string{"a": prop, "b": prop, "q": prop, "TAGS": prop})
		_ = e.Match(props)
		_ = e.Match(MapProperties(nil))
		// Splitting the source in two must not panic either (each half is
		// its own expression).
		mid := len(src) / 2
		_, _ = Parse(src[:mid])
		_, _ = Parse(src[mid:])
	})
}
