package protocol_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
)

func TestNamesrvClientHeartbeatRoundTrip(t *testing.T) {
	hb := protocol.ClientHeartbeat{ClientID: "127.0.1.1@1234", IDC: "idc1", Role: protocol.ClientRoleBoth, Groups: []string{"pg", "cg"}}
	b := hb.Encode()
	if want := `{"clientId":"127.0.1.1@1234","idc":"idc1","role":"producer,consumer","groups":["pg","cg"]}`; string(b) != want {
		t.Fatalf("wire form:\n got %s\nwant %s", b, want)
	}
	got, err := protocol.DecodeClientHeartbeat(b)
	if err != nil || !reflect.DeepEqual(*got, hb) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if !got.HasRole(protocol.ClientRoleProducer) || !got.HasRole(protocol.ClientRoleConsumer) {
		t.Fatal("HasRole")
	}
	empty := protocol.ClientHeartbeat{ClientID: "x", Role: "producer"}
	if s := string(empty.Encode()); !strings.Contains(s, `"groups":[]`) {
		t.Fatalf("groups must be an array: %s", s)
	}
	if _, err := protocol.DecodeClientHeartbeat([]byte("{")); err == nil {
		t.Fatal("bad JSON accepted")
	}
}

func TestNamesrvClientHeartbeatValidate(t *testing.T) {
	ok := protocol.ClientHeartbeat{ClientID: "c", IDC: "idc1", Role: "consumer", Groups: []string{"g"}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"producer", "consumer", "producer,consumer", "consumer,producer"} {
		h := ok
		h.Role = role
		if err := h.Validate(); err != nil {
			t.Fatalf("role %q: %v", role, err)
		}
	}
	long := strings.Repeat("x", protocol.MaxClientIDLength+1)
	bad := map[string]func(h *protocol.ClientHeartbeat){
		"clientId":      func(h *protocol.ClientHeartbeat) { h.ClientID = "" },
		"clientId ":     func(h *protocol.ClientHeartbeat) { h.ClientID = long },
		"idc":           func(h *protocol.ClientHeartbeat) { h.IDC = long },
		"role":          func(h *protocol.ClientHeartbeat) { h.Role = "admin" },
		"role ":         func(h *protocol.ClientHeartbeat) { h.Role = "" },
		"group":         func(h *protocol.ClientHeartbeat) { h.Groups = []string{""} },
		"groups listed": func(h *protocol.ClientHeartbeat) { h.Groups = make([]string, protocol.MaxClientGroups+1) },
	}
	for mention, mutate := range bad {
		h := ok
		mutate(&h)
		err := h.Validate()
		if err == nil || !strings.Contains(err.Error(), strings.TrimSpace(mention)) {
			t.Errorf("%s: got %v", mention, err)
		}
	}
}

func TestNamesrvClientListRoundTrip(t *testing.T) {
	if s := string((&protocol.ClientList{}).Encode()); s != `{"clients":[]}` {
		t.Fatalf("empty list: %s", s)
	}
	l := protocol.ClientList{Clients: []protocol.ClientInfo{{
		ClientHeartbeat: protocol.ClientHeartbeat{ClientID: "a", IDC: "idc1", Role: "producer", Groups: []string{"g"}},
		Addr:            "127.0.1.1:5555", LastSeen: 1700000000123,
	}}}
	b := l.Encode()
	if !strings.Contains(string(b), `"clientId":"a"`) || !strings.Contains(string(b), `"lastSeen":1700000000123`) ||
		!strings.Contains(string(b), `"addr":"127.0.1.1:5555"`) {
		t.Fatalf("flattened wire form: %s", b)
	}
	got, err := protocol.DecodeClientList(b)
	if err != nil || !reflect.DeepEqual(*got, l) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
}

func TestNamesrvClusterLiveInfoDecode(t *testing.T) {
	// A Java name server's body (fastjson, unquoted integer keys) decodes
	// with an empty liveness table.
	java := `{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.1.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false,"zoneName":"idc1"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}`
	ci, err := protocol.DecodeClusterLiveInfo([]byte(java))
	if err != nil {
		t.Fatal(err)
	}
	bd := ci.BrokerAddrTable["broker-a"]
	if bd.MasterAddr() != "127.0.1.1:10911" || bd.ZoneName != "idc1" ||
		len(ci.ClusterAddrTable["DefaultCluster"]) != 1 || len(ci.BrokerLiveTable) != 0 {
		t.Fatalf("decoded %+v", ci)
	}
}
