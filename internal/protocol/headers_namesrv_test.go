package protocol_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
)

// namesrvHeaderCases lists one filled value of every name-server header and
// a constructor of an empty one.
func namesrvHeaderCases() []struct {
	name  string
	full  protocol.Header
	empty func() protocol.Header
} {
	return []struct {
		name  string
		full  protocol.Header
		empty func() protocol.Header
	}{
		{"RegisterBrokerRequest", &protocol.RegisterBrokerRequestHeader{
			BrokerName: "broker-a", BrokerAddr: "127.0.1.1:10911", ClusterName: "DefaultCluster",
			HAServerAddr: "127.0.1.1:10912", BrokerID: 1, HeartbeatTimeoutMillis: 3000, EnableActingMaster: true,
			Compressed: true, BodyCRC32: 0x7ABCDEF0, ZoneName: "idc1",
		}, func() protocol.Header { return &protocol.RegisterBrokerRequestHeader{} }},
		{"RegisterBrokerRequestMinimal", &protocol.RegisterBrokerRequestHeader{
			BrokerName: "b", BrokerAddr: "a:1", ClusterName: "c",
		}, func() protocol.Header { return &protocol.RegisterBrokerRequestHeader{} }},
		{"RegisterBrokerResponse", &protocol.RegisterBrokerResponseHeader{HAServerAddr: "h:1", MasterAddr: "m:2"},
			func() protocol.Header { return &protocol.RegisterBrokerResponseHeader{} }},
		{"RegisterBrokerResponseEmpty", &protocol.RegisterBrokerResponseHeader{},
			func() protocol.Header { return &protocol.RegisterBrokerResponseHeader{} }},
		{"UnregisterBrokerRequest", &protocol.UnregisterBrokerRequestHeader{
			BrokerName: "broker-a", BrokerAddr: "127.0.1.1:10911", ClusterName: "DefaultCluster", BrokerID: 2,
		}, func() protocol.Header { return &protocol.UnregisterBrokerRequestHeader{} }},
		{"BrokerHeartbeatRequest", &protocol.BrokerHeartbeatRequestHeader{
			ClusterName: "c", BrokerAddr: "a:1", BrokerName: "b", BrokerID: 3, Epoch: 4, MaxOffset: 5,
			ConfirmOffset: 6, HeartbeatTimeoutMillis: 7000, ElectionPriority: 8,
		}, func() protocol.Header { return &protocol.BrokerHeartbeatRequestHeader{} }},
		{"BrokerHeartbeatRequestMinimal", &protocol.BrokerHeartbeatRequestHeader{ClusterName: "c", BrokerAddr: "a:1", BrokerName: "b"},
			func() protocol.Header { return &protocol.BrokerHeartbeatRequestHeader{} }},
		{"GetRouteInfoRequest", &protocol.GetRouteInfoRequestHeader{
			Topic: "TopicA", AcceptStandardJSONOnly: true, ZoneName: "idc2", ZoneMode: true,
		}, func() protocol.Header { return &protocol.GetRouteInfoRequestHeader{} }},
		{"GetRouteInfoRequestPlain", &protocol.GetRouteInfoRequestHeader{Topic: "TopicA"},
			func() protocol.Header { return &protocol.GetRouteInfoRequestHeader{} }},
		{"DeleteTopicFromNamesrvRequest", &protocol.DeleteTopicFromNamesrvRequestHeader{Topic: "T", ClusterName: "C"},
			func() protocol.Header { return &protocol.DeleteTopicFromNamesrvRequestHeader{} }},
		{"RegisterTopicRequest", &protocol.RegisterTopicRequestHeader{Topic: "T"},
			func() protocol.Header { return &protocol.RegisterTopicRequestHeader{} }},
		{"PutKVConfigRequest", &protocol.PutKVConfigRequestHeader{Namespace: "ns", Key: "k", Value: "v w"},
			func() protocol.Header { return &protocol.PutKVConfigRequestHeader{} }},
		{"GetKVConfigRequest", &protocol.GetKVConfigRequestHeader{Namespace: "ns", Key: "k"},
			func() protocol.Header { return &protocol.GetKVConfigRequestHeader{} }},
		{"GetKVConfigResponse", &protocol.GetKVConfigResponseHeader{Value: "v"},
			func() protocol.Header { return &protocol.GetKVConfigResponseHeader{} }},
		{"DeleteKVConfigRequest", &protocol.DeleteKVConfigRequestHeader{Namespace: "ns", Key: "k"},
			func() protocol.Header { return &protocol.DeleteKVConfigRequestHeader{} }},
		{"GetKVListByNamespaceRequest", &protocol.GetKVListByNamespaceRequestHeader{Namespace: "ns"},
			func() protocol.Header { return &protocol.GetKVListByNamespaceRequestHeader{} }},
		{"GetTopicsByClusterRequest", &protocol.GetTopicsByClusterRequestHeader{Cluster: "DefaultCluster"},
			func() protocol.Header { return &protocol.GetTopicsByClusterRequestHeader{} }},
		{"QueryDataVersionRequest", &protocol.QueryDataVersionRequestHeader{
			BrokerName: "b", BrokerAddr: "a:1", ClusterName: "c", BrokerID: 0,
		}, func() protocol.Header { return &protocol.QueryDataVersionRequestHeader{} }},
		{"QueryDataVersionResponse", &protocol.QueryDataVersionResponseHeader{Changed: true},
			func() protocol.Header { return &protocol.QueryDataVersionResponseHeader{} }},
	}
}

func TestNamesrvHeadersRoundTrip(t *testing.T) {
	for _, tc := range namesrvHeaderCases() {
		t.Run(tc.name, func(t *testing.T) {
			ext := tc.full.Ext()
			for k, v := range ext {
				if k == "" {
					t.Fatalf("empty ext key (value %q)", v)
				}
			}
			got := tc.empty()
			if err := got.SetExt(ext); err != nil {
				t.Fatalf("SetExt(%v): %v", ext, err)
			}
			if !reflect.DeepEqual(got, tc.full) {
				t.Fatalf("round trip:\n got %+v\nwant %+v\n ext %v", got, tc.full, ext)
			}
		})
	}
}

func TestNamesrvHeadersWireKeys(t *testing.T) {
	// The keys brokers and tools of RocketMQ send, spelled exactly.
	ext := (&protocol.RegisterBrokerRequestHeader{BrokerName: "b", BrokerAddr: "a:1", ClusterName: "c",
		HAServerAddr: "h:2", BrokerID: 0, HeartbeatTimeoutMillis: 9, BodyCRC32: 5, ZoneName: "idc1"}).Ext()
	for _, k := range []string{"brokerName", "brokerAddr", "clusterName", "haServerAddr", "brokerId",
		"heartbeatTimeoutMillis", "enableActingMaster", "compressed", "bodyCrc32", "zoneName", "__ZONE_NAME"} {
		if _, ok := ext[k]; !ok {
			t.Errorf("REGISTER_BROKER ext lacks %q: %v", k, ext)
		}
	}
	hb := (&protocol.BrokerHeartbeatRequestHeader{ClusterName: "c", BrokerAddr: "a", BrokerName: "b", HeartbeatTimeoutMillis: 1}).Ext()
	if hb["heartbeatTimeoutMills"] != "1" {
		t.Errorf("BROKER_HEARTBEAT uses RocketMQ's heartbeatTimeoutMills key: %v", hb)
	}
	if c := (&protocol.GetTopicsByClusterRequestHeader{Cluster: "x"}).Ext(); c["cluster"] != "x" {
		t.Errorf("GET_TOPICS_BY_CLUSTER key is cluster: %v", c)
	}
	route := (&protocol.GetRouteInfoRequestHeader{Topic: "t", ZoneName: "idc1", ZoneMode: true}).Ext()
	if route["__ZONE_NAME"] != "idc1" || route["__ZONE_MODE"] != "true" {
		t.Errorf("zone ext fields: %v", route)
	}
	if plain := (&protocol.GetRouteInfoRequestHeader{Topic: "t"}).Ext(); len(plain) != 1 {
		t.Errorf("a plain route query carries only topic, like the Go client: %v", plain)
	}
}

func TestNamesrvHeadersZoneNamePrecedence(t *testing.T) {
	var h protocol.RegisterBrokerRequestHeader
	base := map[string]string{"brokerName": "b", "brokerAddr": "a:1", "clusterName": "c", "brokerId": "0"}
	ext := map[string]string{"zoneName": "header-zone", "__ZONE_NAME": " idc2 "}
	for k, v := range base {
		ext[k] = v
	}
	if err := h.SetExt(ext); err != nil {
		t.Fatal(err)
	}
	if h.ZoneName != "idc2" {
		t.Fatalf("__ZONE_NAME wins and is trimmed: got %q", h.ZoneName)
	}
	delete(ext, "__ZONE_NAME")
	if err := h.SetExt(ext); err != nil || h.ZoneName != "header-zone" {
		t.Fatalf("zoneName fallback: %q %v", h.ZoneName, err)
	}
	var r protocol.GetRouteInfoRequestHeader
	if err := r.SetExt(map[string]string{"topic": "t", "__ZONE_MODE": "yes-please"}); err != nil || r.ZoneMode {
		t.Fatalf("a __ZONE_MODE other than true is off, not an error: %+v %v", r, err)
	}
	if err := r.SetExt(map[string]string{"topic": "t", "__ZONE_MODE": "TRUE"}); err != nil || !r.ZoneMode {
		t.Fatalf("__ZONE_MODE=TRUE: %+v %v", r, err)
	}
}

func TestNamesrvHeadersBadValues(t *testing.T) {
	registerOK := func() map[string]string {
		return map[string]string{"brokerName": "b", "brokerAddr": "a:1", "clusterName": "c", "brokerId": "0"}
	}
	with := func(m map[string]string, k, v string) map[string]string { m[k] = v; return m }
	without := func(m map[string]string, k string) map[string]string { delete(m, k); return m }
	cases := []struct {
		name    string
		h       protocol.Header
		ext     map[string]string
		mention string
	}{
		{"register missing brokerName", &protocol.RegisterBrokerRequestHeader{}, without(registerOK(), "brokerName"), "brokerName"},
		{"register missing brokerId", &protocol.RegisterBrokerRequestHeader{}, without(registerOK(), "brokerId"), "brokerId"},
		{"register brokerId not a number", &protocol.RegisterBrokerRequestHeader{}, with(registerOK(), "brokerId", "master"), "brokerId"},
		{"register bad compressed", &protocol.RegisterBrokerRequestHeader{}, with(registerOK(), "compressed", "maybe"), "compressed"},
		{"register crc over int32", &protocol.RegisterBrokerRequestHeader{}, with(registerOK(), "bodyCrc32", "4294967295"), "bodyCrc32"},
		{"register bad timeout", &protocol.RegisterBrokerRequestHeader{}, with(registerOK(), "heartbeatTimeoutMillis", "3s"), "heartbeatTimeoutMillis"},
		{"unregister missing brokerAddr", &protocol.UnregisterBrokerRequestHeader{}, without(registerOK(), "brokerAddr"), "brokerAddr"},
		{"heartbeat missing clusterName", &protocol.BrokerHeartbeatRequestHeader{}, without(registerOK(), "clusterName"), "clusterName"},
		{"heartbeat bad epoch", &protocol.BrokerHeartbeatRequestHeader{}, with(registerOK(), "epoch", "x"), "epoch"},
		{"route missing topic", &protocol.GetRouteInfoRequestHeader{}, map[string]string{}, "topic"},
		{"route bad acceptStandardJsonOnly", &protocol.GetRouteInfoRequestHeader{}, map[string]string{"topic": "t", "acceptStandardJsonOnly": "2"}, "acceptStandardJsonOnly"},
		{"delete topic missing topic", &protocol.DeleteTopicFromNamesrvRequestHeader{}, nil, "topic"},
		{"register topic missing topic", &protocol.RegisterTopicRequestHeader{}, nil, "topic"},
		{"put kv missing value", &protocol.PutKVConfigRequestHeader{}, map[string]string{"namespace": "n", "key": "k"}, "value"},
		{"get kv missing key", &protocol.GetKVConfigRequestHeader{}, map[string]string{"namespace": "n"}, "key"},
		{"delete kv missing namespace", &protocol.DeleteKVConfigRequestHeader{}, map[string]string{"key": "k"}, "namespace"},
		{"kv list missing namespace", &protocol.GetKVListByNamespaceRequestHeader{}, nil, "namespace"},
		{"topics by cluster missing cluster", &protocol.GetTopicsByClusterRequestHeader{}, map[string]string{"clusterName": "c"}, "cluster"},
		{"data version bad brokerId", &protocol.QueryDataVersionRequestHeader{}, with(registerOK(), "brokerId", "1.5"), "brokerId"},
		{"data version reply bad changed", &protocol.QueryDataVersionResponseHeader{}, map[string]string{"changed": "perhaps"}, "changed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.h.SetExt(tc.ext)
			if err == nil {
				t.Fatalf("SetExt(%v) accepted a bad header: %+v", tc.ext, tc.h)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("error %q does not name %q", err, tc.mention)
			}
		})
	}
}

func TestNamesrvBrokerNotExistCode(t *testing.T) {
	if protocol.BrokerNotExist != 211 || protocol.BrokerNotExist.String() != "BROKER_NOT_EXIST" {
		t.Fatalf("BrokerNotExist = %d %q", protocol.BrokerNotExist, protocol.BrokerNotExist)
	}
	if protocol.BrokerNotExist.Retryable() {
		t.Fatal("BROKER_NOT_EXIST is answered by re-registering, not by retrying a send")
	}
}
