package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// zonemqName finds the zonemq metric names an expression or document uses.
var zonemqName = regexp.MustCompile(`zonemq_(broker|namesrv|addrsrv|client)_[a-z_]+`)

// documented returns every metric name docs/metrics.md lists, with the
// histogram series suffixes.
func documented(t *testing.T) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	section := ""
	for _, line := range strings.Split(string(doc), "\n") {
		switch {
		case strings.HasPrefix(line, "## Broker"):
			section = "zonemq_broker_"
		case strings.HasPrefix(line, "## Name server"):
			section = "zonemq_namesrv_"
		case strings.HasPrefix(line, "## Address server"):
			section = "zonemq_addrsrv_"
		case strings.HasPrefix(line, "## SDK"):
			section = "zonemq_client_"
		case strings.HasPrefix(line, "## "):
			section = ""
		}
		if section == "" || !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.SplitN(line, "|", 3)[1]
		for _, n := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(cell, -1) {
			full := section + n[1]
			names[full] = true
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				names[full+suffix] = true
			}
		}
	}
	return names
}

// TestMetricsContribUsesDocumentedNames keeps the Grafana dashboard and the
// alert rules in step with docs/metrics.md: a renamed metric breaks here,
// not silently on an operator's screen.
func TestMetricsContribUsesDocumentedNames(t *testing.T) {
	names := documented(t)
	if len(names) < 40 {
		t.Fatalf("only %d names read from docs/metrics.md; is the table format unchanged?", len(names))
	}
	dash, err := os.ReadFile("../../contrib/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("contrib/grafana-dashboard.json: %v", err)
	}
	if len(d.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	alerts, err := os.ReadFile("../../contrib/prometheus-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{"contrib/prometheus-alerts.yml": string(alerts)}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			texts["dashboard panel "+p.Title] += tg.Expr + "\n"
		}
	}
	for where, text := range texts {
		for _, n := range zonemqName.FindAllString(text, -1) {
			if !names[n] {
				t.Errorf("%s uses %s, which docs/metrics.md does not list", where, n)
			}
		}
	}
	for _, alert := range []string{"ZonemqBrokerDown", "ZonemqCrossIDCTrafficWhileHealthy", "ZonemqConsumerLagGrowing", "ZonemqDiskNearGuard"} {
		if !strings.Contains(string(alerts), "alert: "+alert) {
			t.Errorf("alert %s missing from contrib/prometheus-alerts.yml", alert)
		}
	}
}
