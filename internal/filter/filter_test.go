package filter

import (
	"errors"
	"strings"
	"testing"
)

func TestFilterMatch(t *testing.T) {
	props := map[string]string{
		"a": "10", "b": "x", "c": "2.5", "flag": "TRUE", "neg": "-3", "word": "abc", "quote": "it's",
		"TAGS": "TagA", "big": "9000000000", "space": " 7 ",
	}
	cases := []struct {
		expr string
		want bool
	}{
		{"a > 5 AND b = 'x'", true},
		{"a > 5 AND b = 'y'", false},
		{"a > 10", false},
		{"a >= 10", true},
		{"a < 10.5", true},
		{"a <= 9", false},
		{"a = 10", true},
		{"a = 10.0", true},
		{"a <> 10", false},
		{"a <> 11", true},
		{"c > 2", false}, // "2.5" is not a long: evaluation error, no match (RocketMQ)
		{"c > 2.0", true},
		{"c BETWEEN 2.0 AND 3.0", true},
		{"a BETWEEN 0 AND 10", true},
		{"a BETWEEN 11 AND 20", false},
		{"a NOT BETWEEN 11 AND 20", true},
		{"a NOT BETWEEN 0 AND 10", false},
		{"neg BETWEEN -5 AND -1", true},
		{"neg = -3", true},
		{"big > 8000000000", true},
		{"space = 7", true},
		{"b IN ('x', 'y')", true},
		{"b IN ('y')", false},
		{"b NOT IN ('y')", true},
		{"b NOT IN ('x')", false},
		{"missing IN ('x')", false},
		{"missing NOT IN ('x')", false}, // unknown
		{"missing IS NULL", true},
		{"missing IS NOT NULL", false},
		{"a IS NOT NULL", true},
		{"a IS NULL", false},
		{"missing = 'x'", false},
		{"missing <> 'x'", false}, // unknown
		{"NOT (missing = 'x')", false},
		{"missing = 'x' OR a = 10", true},
		{"missing = 'x' AND a = 10", false},
		{"NOT (a = 10)", false},
		{"NOT (a = 11)", true},
		{"NOT a = 11", false}, // NOT binds tighter than =, as in RocketMQ: (NOT a) = 11
		{"flag = TRUE", true},
		{"flag = FALSE", false},
		{"b = TRUE", false}, // "x" reads as false
		{"TRUE", true},
		{"FALSE", false},
		{"TRUE OR missing > 1", true},
		{"word > 1", false},           // "abc" is not a number
		{"word > 1 OR a = 10", false}, // an evaluation error fails the whole expression (RocketMQ)
		{"a > c", true},               // two properties ordered as numbers
		{"a > word", false},
		{"a = b", false},
		{"quote = 'it''s'", true},
		{"word CONTAINS 'b'", true},
		{"word NOT CONTAINS 'b'", false},
		{"word STARTSWITH 'ab'", true},
		{"word ENDSWITH 'ab'", false},
		{"missing CONTAINS 'b'", false},
		{"TAGS = 'TagA'", true},
		{"a", false}, // a string property is never a boolean
		{"(a > 5) = TRUE", true},
		{"a > 5 = TRUE", true},
		{"-a = -10", false}, // negating a property is NULL (RocketMQ negates numbers only)
		{"a > 5 and b = 'x' -- trailing comment", true},
		{"/* why */ a > 5", true},
		{"a IN ('10') AND NOT (b IN ('z')) AND (c > 1.0 OR FALSE)", true},
		{"1 = 1", true},
		{"1 = 1.0", true},
		{"'x' = b", true},
		{"5L < a", true},
		{"a > 1e1", false},
		{"a >= 1E1", true},
		{".5 < c", true},
	}
	for _, tc := range cases {
		e, err := Parse(tc.expr)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.expr, err)
			continue
		}
		if got := e.Match(MapProperties(props)); got != tc.want {
			t.Errorf("%q on %v: got %v, want %v", tc.expr, props, got, tc.want)
		}
	}
}

func TestFilterEvaluateTellsUnknownAndErrors(t *testing.T) {
	props := MapProperties(map[string]string{"a": "abc"})
	e, err := Parse("missing = 'x'")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := e.Evaluate(props); r != nil || err != nil {
		t.Fatalf("missing property: got %v, %v; want unknown", r, err)
	}
	e, err = Parse("a > 1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Evaluate(props); !errors.Is(err, errEval) {
		t.Fatalf("non-numeric property: got %v, want an evaluation error", err)
	}
}

func TestFilterRefuses(t *testing.T) {
	cases := []struct{ expr, msg string }{
		{"", "empty"},
		{"   ", "empty"},
		{"a >", "expected a value"},
		{"a > 'x'", "only numbers can be ordered"},
		{"a > TRUE", "only numbers can be ordered"},
		{"a > (b = 1)", "not a condition"},
		{"a = NULL", "IS NULL"},
		{"NULL = a", "IS NULL"},
		{"TRUE = 1", "cannot be compared"},
		{"a BETWEEN 5 AND 1", "wrong order"},
		{"a BETWEEN 'a' AND 'b'", "only numbers"},
		{"a BETWEEN NULL AND 1", "only numbers"},
		{"a BETWEEN 1 2", "expected AND"},
		{"5", "not a condition"},
		{"'x'", "not a condition"},
		{"5 AND a = 1", "not a condition"},
		{"NOT 5", "not a condition"},
		{"1 IN ('a')", "property only"},
		{"a IN (1)", "expected a string"},
		{"a IN ()", "expected a string"},
		{"a IN ('x'", ", or )"},
		{"a IN 'x'", "expected ("},
		{"(a = 1", "expected )"},
		{"a = 1)", "end of the expression"},
		{"a = 'x", "unterminated string"},
		{"a = 1 /* x", "unterminated comment"},
		{"a = #", "unexpected character"},
		{"a = 99999999999999999999", "64 bits"},
		{"a = 12abc", "bad number"},
		{"a IS 1", "expected NULL"},
		{"-'x' = a", "numbers only"},
		{"5 CONTAINS 'x'", "property only"},
		{"a CONTAINS 1", "a string"},
		{"a = 1 AND", "expected a value"},
		{"a == 1", "expected a value"},
		{strings.Repeat("(", MaxDepth+1) + "a = 1" + strings.Repeat(")", MaxDepth+1), "nesting"},
		{strings.Repeat("NOT ", MaxDepth+1) + "a = 1", "nesting"},
		{"a = '" + strings.Repeat("x", MaxLength) + "'", "limit"},
		{"a IN (" + strings.Repeat("'x',", MaxInItems) + "'y')", "at most"},
	}
	for _, tc := range cases {
		_, err := Parse(tc.expr)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%.40q): got %v, want a SyntaxError", tc.expr, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Parse(%.40q): error %q does not say %q", tc.expr, err, tc.msg)
		}
	}
}

func TestFilterSyntaxErrorOffset(t *testing.T) {
	_, err := Parse("a = 1 AND b > 'x'")
	var se *SyntaxError
	if !errors.As(err, &se) || se.Offset != 12 {
		t.Fatalf("got %v, want a SyntaxError at offset 12 (the >)", err)
	}
}

func TestFilterKeywordsIgnoreCase(t *testing.T) {
	e, err := Parse("a between 1 and 20 And b in ('x') oR c is null aND NOT flag is not null")
	if err != nil {
		t.Fatal(err)
	}
	if !e.Match(MapProperties(map[string]string{"a": "3", "b": "x"})) {
		t.Fatal("lower-case keywords: no match")
	}
	if e.String() == "" {
		t.Fatal("String is empty")
	}
}

func BenchmarkFilterMatch(b *testing.B) {
	e, err := Parse("a > 5 AND b = 'x' AND c IN ('p', 'q') AND d IS NULL")
	if err != nil {
		b.Fatal(err)
	}
	p := MapProperties(map[string]string{"a": "10", "b": "x", "c": "q"})
	for b.Loop() {
		if !e.Match(p) {
			b.Fatal("no match")
		}
	}
}
