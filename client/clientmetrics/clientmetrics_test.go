package clientmetrics_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/clientmetrics"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/testutil"
)

// value returns the value of the series name whose labels include want.
func value(fams []*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			if m.Counter != nil {
				return m.Counter.GetValue(), true
			}
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

func TestClientMetricsProducerCollectorAcrossFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Options{IDCs: 2, DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	testutil.NoError(t, err, "devcluster.Start")
	t.Cleanup(func() { c.Close() })
	cc := c.ClientConfig(1)
	cc.Logger = slog.New(slog.DiscardHandler)
	p, err := client.NewProducer(client.ProducerConfig{ClientConfig: cc})
	testutil.NoError(t, err)
	testutil.NoError(t, p.Start(ctx))
	t.Cleanup(func() { p.Shutdown(context.Background()) })

	reg := prometheus.NewRegistry()
	reg.MustRegister(clientmetrics.NewProducerCollector(p, "orders", "idc1"))
	send := func() *client.SendResult {
		t.Helper()
		r, err := p.SendSync(ctx, &client.Message{Topic: "MetricsClientTopic", Body: []byte("x")})
		testutil.NoError(t, err, "send")
		return r
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		if r := send(); r.IDC != "idc1" {
			return fmt.Errorf("stored in %s, want idc1 while healthy", r.IDC)
		}
		return nil
	})
	c.StopBroker(1)
	testutil.Eventually(t, 20*time.Second, func() error {
		if r := send(); r.IDC != "idc2" {
			return fmt.Errorf("stored in %s, want idc2 after idc1's broker stopped", r.IDC)
		}
		return nil
	})

	fams, err := reg.Gather()
	testutil.NoError(t, err, "gather")
	base := map[string]string{"producer": "orders", "idc": "idc1"}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for a, b := range base {
			m[a] = b
		}
		return m
	}
	for _, idc := range []string{"idc1", "idc2"} {
		n, ok := value(fams, "zonemq_client_sends_total", with("target_idc", idc))
		testutil.True(t, ok && n >= 1, "sends to "+idc+" counted")
	}
	for _, name := range []string{"zonemq_client_cross_idc_sends_total", "zonemq_client_failovers_total", "zonemq_client_last_failover_timestamp_seconds"} {
		n, ok := value(fams, name, base)
		testutil.True(t, ok && n >= 1, name+" ≥ 1")
	}
	n, ok := value(fams, "zonemq_client_send_failures_total", base)
	testutil.True(t, ok && n == 0, "no failed sends")
}
