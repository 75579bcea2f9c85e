package main

import (
	"io"
	"testing"

	"github.com/zonemq/zonemq/internal/testutil"
)

func TestCLIMetricsListenFlag(t *testing.T) {
	const addr = "127.0.0.1:0"
	ns, _, err := parseNamesrvArgs([]string{"--idc", "idc1", "--metrics-listen", addr}, io.Discard)
	testutil.NoError(t, err, "namesrv")
	testutil.Equal(t, ns.MetricsListen, addr, "namesrv")
	as, _, err := parseAddrsrvArgs([]string{"--idc", "idc1", "--namesrv", "idc1=127.0.1.1:9876", "--metrics-listen", addr}, io.Discard)
	testutil.NoError(t, err, "addrsrv")
	testutil.Equal(t, as.MetricsListen, addr, "addrsrv")
	ba, err := parseBrokerArgs([]string{"--idc", "idc1", "--name", "b1", "--data", t.TempDir(), "--namesrv", "127.0.1.1:9876", "--metrics-listen", addr}, io.Discard)
	testutil.NoError(t, err, "broker")
	testutil.Equal(t, ba.opts.MetricsListen, addr, "broker")
}
