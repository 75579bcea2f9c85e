package main

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"text/tabwriter"

	"github.com/zonemq/zonemq/internal/addrsrv"
	"github.com/zonemq/zonemq/internal/broker"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/namesrv"
)

// The dev cluster's metrics ports, offsets from --base-port on each IDC's
// own address (127.0.n.1): below the name servers' BASE+9876 and clear of
// the control endpoint (BASE+8000), the address servers (BASE+8080) and the
// console (BASE+8088). Broker group members add their id.
const (
	devMetricsBrokerPort  = 9100 // + broker id: 19100, replicas 19101…
	devMetricsNamesrvPort = 9200 // 19200
	devMetricsAddrsrvPort = 9300 // 19300
)

// devMetricsListen is the metrics address of a server listening on listen:
// the same host, port base+offset (a free port with base 0).
func devMetricsListen(listen string, base, offset int) string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = "127.0.0.1"
	}
	port := 0
	if base > 0 {
		port = base + offset
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// enableDevMetrics makes every server of the dev cluster serve /metrics
// (`--metrics-listen` on each role).
func enableDevMetrics(o *devcluster.Options, base int) {
	o.Broker = func(_ int, b *broker.Options) {
		b.MetricsListen = devMetricsListen(b.Listen, base, devMetricsBrokerPort+int(b.BrokerID))
	}
	o.Namesrv = func(_ int, n *namesrv.Options) {
		n.MetricsListen = devMetricsListen(n.Listen, base, devMetricsNamesrvPort)
	}
	o.Addrsrv = func(_ int, a *addrsrv.Options) {
		a.MetricsListen = devMetricsListen(a.Listen, base, devMetricsAddrsrvPort)
	}
}

// printDevMetrics lists the metrics endpoints under the banner.
func printDevMetrics(w io.Writer, c *devcluster.Cluster) {
	eps := c.MetricsEndpoints()
	if len(eps) == 0 {
		return
	}
	fmt.Fprintf(w, "\nPrometheus metrics (docs/metrics.md):\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, ep := range eps {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", ep.IDC, ep.Role, ep.Name, ep.URL)
	}
	tw.Flush()
}
