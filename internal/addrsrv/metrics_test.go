package addrsrv_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/addrsrv"
	"github.com/zonemq/zonemq/internal/testutil"
)

func TestAddrsrvMetricsProbes(t *testing.T) {
	ns1, _ := startNamesrv(t, "idc1", "127.0.1.1:0")
	ns2, stop2 := startNamesrv(t, "idc2", "127.0.2.1:0")
	o := addrsrv.NewOptions()
	o.Listen = "127.0.1.1:0"
	o.IDC = "idc1"
	o.Namesrvs = []addrsrv.Namesrv{{Addr: ns1, IDC: "idc1"}, {Addr: ns2, IDC: "idc2"}}
	o.ProbeInterval = testInterval
	o.ProbeTimeout = testTimeout
	o.MetricsListen = "127.0.1.1:0"
	s, err := addrsrv.New(o)
	testutil.NoError(t, err, "addrsrv.New")
	done := make(chan error, 1)
	go func() { done <- s.Run(t.Context()) }()
	t.Cleanup(func() {
		s.Shutdown()
		testutil.NoError(t, <-done, "addrsrv Run")
	})
	url := "http://" + s.MetricsAddr() + "/metrics"

	testutil.Eventually(t, 5*time.Second, func() error {
		series := testutil.Scrape(t, url)
		for _, ns := range []string{ns1, ns2} {
			if ok, _ := testutil.Find(series, "zonemq_addrsrv_probes_total", "namesrv", ns, "result", "ok"); ok < 1 {
				return fmt.Errorf("no successful probe of %s yet", ns)
			}
			if n, _ := testutil.Find(series, "zonemq_addrsrv_probe_latency_seconds_count", "namesrv", ns); n < 1 {
				return fmt.Errorf("no probe latency of %s yet", ns)
			}
		}
		if n, _ := testutil.Find(series, "zonemq_addrsrv_namesrvs_alive", "namesrv_idc", "idc2"); n != 1 {
			return fmt.Errorf("idc2 alive = %v, want 1", n)
		}
		return nil
	})
	stop2()
	testutil.Eventually(t, downWithin+5*time.Second, func() error {
		series := testutil.Scrape(t, url)
		failed, _ := testutil.Find(series, "zonemq_addrsrv_probes_total", "namesrv", ns2, "result", "fail")
		up, _ := testutil.Find(series, "zonemq_addrsrv_namesrv_up", "namesrv", ns2)
		alive, ok := testutil.Find(series, "zonemq_addrsrv_namesrvs_alive", "namesrv_idc", "idc2")
		if failed < 1 || up != 0 || !ok || alive != 0 {
			return fmt.Errorf("idc2's name server: failed probes %v, up %v, alive %v (present %v)", failed, up, alive, ok)
		}
		return nil
	})
}
