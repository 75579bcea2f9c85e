package namesrv

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

func clientHeartbeat(t *testing.T, c *remoting.Client, ns string, hb protocol.ClientHeartbeat) *remoting.Command {
	t.Helper()
	return invoke(t, c, ns, protocol.ClientHeartbeatToNamesrv, nil, hb.Encode())
}

// listClients returns "id@idc" items of the live clients (of idc if set).
func listClients(t *testing.T, c *remoting.Client, ns, idc string) (string, *protocol.ClientList) {
	t.Helper()
	var ext map[string]string
	if idc != "" {
		ext = map[string]string{protocol.ExtClientIDC: idc}
	}
	resp := invoke(t, c, ns, protocol.GetClientsByIDC, ext, nil)
	wantCode(t, resp, protocol.Success)
	l, err := protocol.DecodeClientList(resp.Body)
	testutil.NoError(t, err)
	var items []string
	for _, ci := range l.Clients {
		items = append(items, ci.ClientID+"@"+ci.IDC)
	}
	return strings.Join(items, " "), l
}

func clientsAre(t *testing.T, c *remoting.Client, ns, idc, want string) func() error {
	return func() error {
		if got, _ := listClients(t, c, ns, idc); got != want {
			return fmt.Errorf("clients %q, want %q", got, want)
		}
		return nil
	}
}

// TestNamesrvClientRegistry: client heartbeats (9001) are listed (9002) by
// IDC, expire after ClientExpiry and go at once when their connection
// closes. The clock is moved by hand.
func TestNamesrvClientRegistry(t *testing.T) {
	clock := newFakeClock()
	ns := startNamesrv(t, "127.0.1.1", "idc1", fakeClockExpiry(clock))
	admin := newClient(t)
	p1, c1, c2 := newClient(t), newClient(t), newClient(t)
	hbP1 := protocol.ClientHeartbeat{ClientID: "127.0.1.1@p1", IDC: "idc1", Role: "producer", Groups: []string{"pg"}}
	hbC1 := protocol.ClientHeartbeat{ClientID: "127.0.1.1@c1", IDC: "idc1", Role: "producer,consumer", Groups: []string{"pg", "cg"}}
	hbC2 := protocol.ClientHeartbeat{ClientID: "127.0.2.1@c2", IDC: "idc2", Role: "consumer", Groups: []string{"cg"}}
	wantCode(t, clientHeartbeat(t, p1, ns.Addr(), hbP1), protocol.Success)
	wantCode(t, clientHeartbeat(t, c1, ns.Addr(), hbC1), protocol.Success)
	wantCode(t, clientHeartbeat(t, c2, ns.Addr(), hbC2), protocol.Success)

	all, l := listClients(t, admin, ns.Addr(), "")
	testutil.Equal(t, all, "127.0.1.1@c1@idc1 127.0.1.1@p1@idc1 127.0.2.1@c2@idc2", "sorted by IDC then id")
	got := l.Clients[0]
	testutil.Equal(t, got.Role, "producer,consumer", "role")
	testutil.Equal(t, strings.Join(got.Groups, ","), "pg,cg", "groups")
	testutil.Equal(t, got.LastSeen, clock.Now().UnixMilli(), "lastSeen is the heartbeat time")
	conn, ok := c1.ConnIfOpen(ns.Addr())
	testutil.True(t, ok, "c1 is connected")
	testutil.Equal(t, got.Addr, conn.LocalAddr(), "addr is the client's side of the connection")

	byIDC, _ := listClients(t, admin, ns.Addr(), "IDC2")
	testutil.Equal(t, byIDC, "127.0.2.1@c2@idc2", "idc filter, case-insensitive")
	none, _ := listClients(t, admin, ns.Addr(), "idc9")
	testutil.Equal(t, none, "", "unknown IDC")

	// Bad heartbeats are refused and change nothing.
	for _, body := range []string{"{", `{"clientId":"","idc":"idc1","role":"producer"}`, `{"clientId":"x","idc":"idc1","role":"observer"}`} {
		resp := invoke(t, admin, ns.Addr(), protocol.ClientHeartbeatToNamesrv, nil, []byte(body))
		wantCode(t, resp, protocol.InvalidParameter)
		testutil.True(t, strings.HasPrefix(resp.Remark, "bad client heartbeat: "), resp.Remark)
	}
	testutil.NoError(t, clientsAre(t, admin, ns.Addr(), "", all)())

	// c2's connection closes: it goes at once, without waiting for expiry.
	c2.CloseConn(ns.Addr())
	testutil.Eventually(t, 2*time.Second, clientsAre(t, admin, ns.Addr(), "", "127.0.1.1@c1@idc1 127.0.1.1@p1@idc1"))

	// p1 keeps sending heartbeats, c1 stops: c1 expires, p1 stays.
	clock.Advance(200 * time.Millisecond)
	wantCode(t, clientHeartbeat(t, p1, ns.Addr(), hbP1), protocol.Success)
	scanned := waitEvent(t, &ns.scans, 2)
	clock.Advance(200 * time.Millisecond) // c1: 400 ms silent; p1: 200 ms
	scanned()
	testutil.NoError(t, clientsAre(t, admin, ns.Addr(), "", "127.0.1.1@p1@idc1")())
	_, l = listClients(t, admin, ns.Addr(), "idc1")
	testutil.Equal(t, l.Clients[0].LastSeen, clock.Now().Add(-200*time.Millisecond).UnixMilli(), "p1's lastSeen")
	clock.Advance(101 * time.Millisecond)
	testutil.Eventually(t, 2*time.Second, clientsAre(t, admin, ns.Addr(), "", ""))
}

// TestNamesrvClientReconnect: a client that reconnected keeps its entry when
// its old connection closes afterwards.
func TestNamesrvClientReconnect(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", func(o *Options) { o.ClientExpiry = time.Hour })
	admin, oldConn, newConn := newClient(t), newClient(t), newClient(t)
	hb := protocol.ClientHeartbeat{ClientID: "127.0.3.1@c3", IDC: "idc3", Role: "consumer"}
	wantCode(t, clientHeartbeat(t, oldConn, ns.Addr(), hb), protocol.Success)
	wantCode(t, clientHeartbeat(t, newConn, ns.Addr(), hb), protocol.Success)
	closed := ns.connsClosed.Load()
	oldConn.CloseConn(ns.Addr())
	testutil.Eventually(t, 2*time.Second, func() error {
		if ns.connsClosed.Load() == closed {
			return fmt.Errorf("close not processed yet")
		}
		return nil
	})
	testutil.NoError(t, clientsAre(t, admin, ns.Addr(), "idc3", "127.0.3.1@c3@idc3")())
	newConn.CloseConn(ns.Addr())
	testutil.Eventually(t, 2*time.Second, clientsAre(t, admin, ns.Addr(), "", ""))
}

// TestNamesrvClientRegistryEmptyList: the list is an array even when empty.
func TestNamesrvClientRegistryEmptyList(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", nil)
	resp := invoke(t, newClient(t), ns.Addr(), protocol.GetClientsByIDC, nil, nil)
	testutil.Equal(t, string(resp.Body), `{"clients":[]}`, "body")
}
