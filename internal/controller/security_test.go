package controller

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

const testControllerACL = `accounts:
  - accessKey: ctrlAdmin01
    secretKey: ctrlAdminSecret
    admin: true
  - accessKey: appUser01
    secretKey: appSecret01
`

// With an ACL, a voter answers only signed requests; a broker's heartbeat
// and an election need an admin account, a status read any account.
func TestControllerACL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	testutil.NoError(t, os.WriteFile(path, []byte(testControllerACL), 0o600))
	c := startClusterWith(t, 1, func(o *Options) { o.ACLFile = path })
	addr := c.leader().srv.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	report := (&testBroker{id: 0, role: protocol.RoleMaster, epoch: 1}).header()

	// Unsigned: refused, whatever the request.
	for _, code := range []protocol.RequestCode{protocol.ControllerBrokerHeartbeat, protocol.ControllerGetStatus, protocol.ControllerElect} {
		var h protocol.Header = report
		if code == protocol.ControllerElect {
			h = &protocol.ControllerElectRequestHeader{Cluster: "zc", BrokerName: "b", To: -1}
		}
		if code == protocol.ControllerGetStatus {
			h = nil
		}
		resp := c.invoke(addr, code, h)
		testutil.Equal(t, protocol.ResponseCode(resp.Code), protocol.NoPermission, "unsigned", code)
	}

	clientAs := func(ak, sk string) *Client {
		cl := NewClientWithOptions([]string{addr}, ClientOptions{AccessKey: ak, SecretKey: sk})
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	wrong := clientAs("ctrlAdmin01", "notTheSecret")
	_, err := wrong.Heartbeat(ctx, report)
	testutil.True(t, err != nil && strings.Contains(err.Error(), "NO_PERMISSION"), "a wrong signature is refused", err)

	app := clientAs("appUser01", "appSecret01")
	_, err = app.Heartbeat(ctx, report)
	testutil.True(t, err != nil && strings.Contains(err.Error(), "NO_PERMISSION"), "a heartbeat needs an admin account", err)
	_, _, err = app.Elect(ctx, &protocol.ControllerElectRequestHeader{Cluster: report.Cluster, BrokerName: report.BrokerName, To: -1})
	testutil.True(t, err != nil && strings.Contains(err.Error(), "NO_PERMISSION"), "an election needs an admin account", err)

	admin := clientAs("ctrlAdmin01", "ctrlAdminSecret")
	ans, err := admin.Heartbeat(ctx, report)
	testutil.NoError(t, err, "the admin account's heartbeat")
	testutil.Equal(t, ans.MasterID, int64(0), "the first master is the reporting broker")

	st, err := app.Status(ctx, addr)
	testutil.NoError(t, err, "any account reads the status")
	testutil.Equal(t, len(st.Groups), 1, "the group the admin's heartbeat created")
}
