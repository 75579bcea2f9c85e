package namesrv

import (
	"fmt"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

func TestNamesrvMetricsBrokersAliveAndRemovals(t *testing.T) {
	s := startNamesrv(t, "127.0.1.1", "idc1", func(o *Options) { o.MetricsListen = "127.0.1.1:0" })
	url := "http://" + s.MetricsAddr() + "/metrics"
	a := newFakeBroker(t, "broker-a", "127.0.1.1:10911", "idc1")
	b := newFakeBroker(t, "broker-b", "127.0.2.1:10911", "idc2")
	c := newFakeBroker(t, "broker-c", "127.0.2.2:10911", "idc2")
	for _, fb := range []*fakeBroker{a, b, c} {
		fb.mustRegister(s.Addr(), map[string]int{"T": 4}, 1)
	}
	series := testutil.Scrape(t, url)
	for idc, want := range map[string]float64{"idc1": 1, "idc2": 2} {
		got, _ := testutil.Find(series, "zonemq_namesrv_brokers_alive", "idc", "idc1", "broker_idc", idc)
		testutil.Equal(t, got, want, "brokers alive in "+idc)
	}
	got, _ := testutil.Find(series, "zonemq_namesrv_topics")
	testutil.True(t, got >= 1, "topics counted")

	wantCode(t, b.unregister(s.Addr()), protocol.Success)
	testutil.Eventually(t, 5*time.Second, func() error {
		series := testutil.Scrape(t, url)
		alive, _ := testutil.Find(series, "zonemq_namesrv_brokers_alive", "broker_idc", "idc2")
		removed, _ := testutil.Find(series, "zonemq_namesrv_broker_removals_total", "broker_idc", "idc2")
		last, _ := testutil.Find(series, "zonemq_namesrv_last_broker_removal_timestamp_seconds")
		if alive != 1 || removed != 1 || last <= 0 {
			return fmt.Errorf("idc2 alive %v removed %v last %v, want 1, 1, > 0", alive, removed, last)
		}
		return nil
	})
}
