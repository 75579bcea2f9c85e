package testutil

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Series is one sample of a Prometheus text exposition: the metric name, its
// labels and its value.
type Series struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Scrape fetches url (a /metrics endpoint) and parses the text format. It
// fails the test on a transport error, a non-200 answer or a line it cannot
// read.
func Scrape(t testing.TB, url string) []Series {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scraping %s: %s: %s", url, resp.Status, b)
	}
	var out []Series
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSeries(line)
		if err != nil {
			t.Fatalf("scraping %s: %v", url, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	return out
}

// parseSeries reads `name{a="x",b="y"} value`; label values hold no escaped
// quotes in zonemq's metrics, which keeps this reader small.
func parseSeries(line string) (Series, error) {
	s := Series{Labels: map[string]string{}}
	rest := line
	if i := strings.IndexByte(line, '{'); i >= 0 {
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return s, fmt.Errorf("unbalanced braces in %q", line)
		}
		s.Name = line[:i]
		for _, kv := range splitLabels(line[i+1 : j]) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return s, fmt.Errorf("bad label %q in %q", kv, line)
			}
			s.Labels[k] = strings.Trim(v, `"`)
		}
		rest = strings.TrimSpace(line[j+1:])
	} else {
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			return s, fmt.Errorf("no value in %q", line)
		}
		s.Name, rest = name, v
	}
	if f := strings.Fields(rest); len(f) > 0 {
		rest = f[0] // a timestamp may follow
	}
	v, err := strconv.ParseFloat(rest, 64)
	if err != nil {
		return s, fmt.Errorf("bad value in %q: %w", line, err)
	}
	s.Value = v
	return s, nil
}

// splitLabels splits `a="x",b="y,z"` at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	inQuote, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// Find returns the value of the first series named name whose labels include
// every pair of want (given as "k", "v", "k", "v", …), and whether there is
// one.
func Find(series []Series, name string, want ...string) (float64, bool) {
next:
	for _, s := range series {
		if s.Name != name {
			continue
		}
		for i := 0; i+1 < len(want); i += 2 {
			if s.Labels[want[i]] != want[i+1] {
				continue next
			}
		}
		return s.Value, true
	}
	return 0, false
}
