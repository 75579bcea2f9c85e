package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/broker"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestCLIAdminBrokerSwitch: `admin broker status` shows each group's master
// and replica; `admin broker switch` moves broker-idc1's master to its
// replica in idc2 and back, and refuses bad requests with a clear error.
func TestCLIAdminBrokerSwitch(t *testing.T) {
	cliClearEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Options{IDCs: 2, Replicas: 2, Replication: broker.ReplicationSync, DataDir: t.TempDir()})
	testutil.NoError(t, err, "devcluster.Start")
	t.Cleanup(func() { c.Close() })
	admin := func(args ...string) cliResult {
		t.Helper()
		return cli(t, cliArgs(c, 1, append([]string{"admin"}, args...))...)
	}
	roles := func() map[string]string {
		r := admin("broker", "status", "--name", "broker-idc1", "--output", "json")
		testutil.Equal(t, r.code, 0, r.stderr)
		var sts []brokerStatusJSON
		cliDecode(t, r.stdout, &sts)
		out := map[string]string{}
		for _, st := range sts {
			out[st.Addr] = fmt.Sprintf("%d/%s", st.ID, st.Role)
		}
		return out
	}
	master, replica := c.BrokerAddr(1), c.ReplicaAddr(1, 1)
	got := roles()
	testutil.Equal(t, got[master], "0/SYNC_MASTER", "master before")
	testutil.Equal(t, got[replica], "1/SLAVE", "replica before")

	r := admin("broker", "switch", "--name", "broker-idc1", "--to", "1", "--output", "json")
	testutil.Equal(t, r.code, 0, r.stderr)
	var sw switchJSON
	cliDecode(t, r.stdout, &sw)
	testutil.Equal(t, sw.NewMaster, replica, "new master")
	testutil.Eventually(t, 10*time.Second, func() error {
		got := roles()
		if got[replica] != "0/SYNC_MASTER" || got[master] != "1/SLAVE" {
			return fmt.Errorf("roles after the switch: %v", got)
		}
		return nil
	})

	// And back, in text.
	r = admin("broker", "switch", "--name", "broker-idc1", "--to", "1")
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.True(t, len(r.stdout) > 0, "a line on stdout")

	for _, bad := range [][]string{
		{"broker", "switch", "--to", "1"},
		{"broker", "switch", "--name", "broker-idc1"},
		{"broker", "switch", "--name", "broker-idc1", "--to", "0"},
	} {
		r := admin(bad...)
		testutil.Equal(t, r.code, 2, fmt.Sprintf("%v: %s", bad, r.stderr))
	}
	r = admin("broker", "switch", "--name", "no-such-broker", "--to", "1")
	testutil.Equal(t, r.code, 1, r.stderr)
}
