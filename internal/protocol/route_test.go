package protocol_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

func sampleRoute() *protocol.TopicRouteData {
	return &protocol.TopicRouteData{
		QueueDatas: []protocol.QueueData{
			{BrokerName: "broker-a", ReadQueueNums: 4, WriteQueueNums: 4, Perm: protocol.PermReadWrite},
			{BrokerName: "broker-b", ReadQueueNums: 8, WriteQueueNums: 8, Perm: protocol.PermRead, TopicSysFlag: 1},
		},
		BrokerDatas: []protocol.BrokerData{
			{Cluster: "DefaultCluster", BrokerName: "broker-a", ZoneName: "idc1",
				BrokerAddrs: map[int64]string{0: "127.0.1.1:10911", 1: "127.0.1.2:10911"}},
			{Cluster: "DefaultCluster", BrokerName: "broker-b", ZoneName: "idc2",
				BrokerAddrs: map[int64]string{0: "[::1]:10911"}},
		},
		FilterServerTable: map[string][]string{},
	}
}

func TestRouteEncodeDecode(t *testing.T) {
	r := sampleRoute()
	b := r.Encode()
	got, err := protocol.DecodeTopicRouteData(b)
	testutil.NoError(t, err)
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip:\n%s\n%+v\nwant %+v", b, got, r)
	}
	testutil.Equal(t, got.BrokerDatas[0].MasterAddr(), "127.0.1.1:10911")
	testutil.Equal(t, (&protocol.BrokerData{}).MasterAddr(), "")
}

// rocketmq-client-go reads brokerAddrs by splitting raw text, so the output
// must be compact; it panics on a missing brokerAddrs and fails on a null
// queueDatas, so both are always there.
func TestRouteEncodeShape(t *testing.T) {
	for name, r := range map[string]*protocol.TopicRouteData{
		"zero route":         {},
		"broker without ids": {BrokerDatas: []protocol.BrokerData{{Cluster: "c", BrokerName: "b"}}},
		"full":               sampleRoute(),
	} {
		t.Run(name, func(t *testing.T) {
			b := r.Encode()
			testutil.True(t, json.Valid(b), "valid JSON")
			var compact bytes.Buffer
			testutil.NoError(t, json.Compact(&compact, b))
			testutil.Equal(t, compact.String(), string(b), "compact")
			var raw struct {
				QueueDatas  json.RawMessage `json:"queueDatas"`
				BrokerDatas []map[string]json.RawMessage
				Filter      json.RawMessage `json:"filterServerTable"`
			}
			testutil.NoError(t, json.Unmarshal(b, &raw))
			testutil.True(t, bytes.HasPrefix(raw.QueueDatas, []byte("[")), "queueDatas is an array: "+string(b))
			testutil.True(t, bytes.HasPrefix(raw.Filter, []byte("{")), "filterServerTable is an object: "+string(b))
			for _, bd := range raw.BrokerDatas {
				testutil.True(t, bytes.HasPrefix(bd["brokerAddrs"], []byte("{")), "brokerAddrs is an object: "+string(b))
				_, hasZone := bd["zoneName"]
				testutil.Equal(t, hasZone, name == "full", "zoneName only when set")
			}
		})
	}
	// Encode does not change its receiver.
	r := &protocol.TopicRouteData{BrokerDatas: []protocol.BrokerData{{BrokerName: "b"}}}
	r.Encode()
	testutil.True(t, r.QueueDatas == nil && r.BrokerDatas[0].BrokerAddrs == nil, "receiver untouched")
}

// A Java name server answers the Go client (version 317) with fastjson's
// unquoted integer keys.
func TestRouteDecodeFastjson(t *testing.T) {
	body := `{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.2:10911"},"brokerName":"broker-a",` +
		`"cluster":"DefaultCluster","enableActingMaster":false,"zoneName":"zone-1"}],"filterServerTable":{},` +
		`"orderTopicConf":"broker-a:4","queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,` +
		`"topicSysFlag":0,"writeQueueNums":4}],"topicQueueMappingByBroker":{"broker-a":{"x":1}}}`
	r, err := protocol.DecodeTopicRouteData([]byte(body))
	testutil.NoError(t, err)
	testutil.Equal(t, len(r.BrokerDatas), 1)
	want := map[int64]string{0: "127.0.0.1:10911", 1: "127.0.0.2:10911"}
	if !maps.Equal(r.BrokerDatas[0].BrokerAddrs, want) {
		t.Fatalf("brokerAddrs %v", r.BrokerDatas[0].BrokerAddrs)
	}
	testutil.Equal(t, r.BrokerDatas[0].ZoneName, "zone-1")
	testutil.Equal(t, r.OrderTopicConf, "broker-a:4")
	testutil.Equal(t, r.QueueDatas[0].WriteQueueNums, 4)
	testutil.Equal(t, string(r.TopicQueueMapping["broker-a"]), `{"x":1}`)

	// Pretty-printed fastjson with spaces and negative keys too.
	r, err = protocol.DecodeTopicRouteData([]byte("{\"brokerDatas\":[{\"brokerAddrs\":{ 0:\"a:1\",\n\t-1:\"b:2\"}}],\"queueDatas\":[]}"))
	testutil.NoError(t, err)
	testutil.Equal(t, r.BrokerDatas[0].BrokerAddrs[-1], "b:2")

	_, err = protocol.DecodeTopicRouteData([]byte(`{"queueDatas":`))
	testutil.True(t, err != nil, "truncated body fails")
}

func TestRouteQuoteIntegerKeys(t *testing.T) {
	for in, want := range map[string]string{
		`{0:"a"}`:                                `{"0":"a"}`,
		`{0:"a",12:"b",-3:"c"}`:                  `{"0":"a","12":"b","-3":"c"}`,
		`{"m":{0:{1:"x"}}}`:                      `{"m":{"0":{"1":"x"}}}`,
		"{\n  0:\"a\"}":                          "{\n  \"0\":\"a\"}",
		`{"0":"a"}`:                              `{"0":"a"}`,
		`{"s":"{0:1}","t":"x,1:y"}`:              `{"s":"{0:1}","t":"x,1:y"}`,
		`{"s":"a\"{0:1","k":{2:"v"}}`:            `{"s":"a\"{0:1","k":{"2":"v"}}`,
		`{"s":"a\\","k":{2:"v"}}`:                `{"s":"a\\","k":{"2":"v"}}`,
		`[1,2,3]`:                                `[1,2,3]`,
		`{"a":[1,2],"b":0}`:                      `{"a":[1,2],"b":0}`,
		``:                                       ``,
		`{0`:                                     `{0`,
		`{"codeSet":["2598919"],"subVersion":1}`: `{"codeSet":["2598919"],"subVersion":1}`,
	} {
		got := string(protocol.QuoteIntegerKeys([]byte(in)))
		testutil.Equal(t, got, want, in)
	}
	// Valid JSON comes back as the same slice, without a copy.
	in := []byte(`{"0":"a","s":"{1:2}"}`)
	out := protocol.QuoteIntegerKeys(in)
	testutil.True(t, &out[0] == &in[0], "no copy for valid JSON")
}

func TestRouteParseOrderTopicConf(t *testing.T) {
	got, err := protocol.ParseOrderTopicConf("broker-a:4;broker-b:8;")
	testutil.NoError(t, err)
	if !maps.Equal(got, map[string]int{"broker-a": 4, "broker-b": 8}) {
		t.Fatalf("got %v", got)
	}
	got, err = protocol.ParseOrderTopicConf("")
	testutil.NoError(t, err)
	testutil.Equal(t, len(got), 0)
	for _, bad := range []string{"broker-a", "broker-a:", ":4", "broker-a:0", "broker-a:-1", "broker-a:4x", "broker-a: 4", "a:4;b"} {
		if _, err := protocol.ParseOrderTopicConf(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestRoutePermsAndQueues(t *testing.T) {
	testutil.True(t, protocol.Readable(protocol.PermReadWrite) && protocol.Writeable(protocol.PermReadWrite), "rw")
	testutil.True(t, protocol.Readable(protocol.PermRead) && !protocol.Writeable(protocol.PermRead), "r")
	testutil.True(t, !protocol.Readable(protocol.PermWrite|protocol.PermInherit), "w")
	testutil.Equal(t, protocol.PermReadWrite|protocol.PermInherit, 7, "TBW102's perm")

	q := protocol.MessageQueue{Topic: "T", BrokerName: "broker-a", QueueID: 3}
	testutil.Equal(t, q.String(), "T@broker-a#3")
	qs := []protocol.MessageQueue{
		{Topic: "T", BrokerName: "b", QueueID: 1}, {Topic: "S", BrokerName: "z", QueueID: 0},
		{Topic: "T", BrokerName: "a", QueueID: 2}, {Topic: "T", BrokerName: "b", QueueID: 0},
	}
	protocol.SortMessageQueues(qs)
	var names []string
	for _, q := range qs {
		names = append(names, q.String())
	}
	testutil.Equal(t, strings.Join(names, " "), "S@z#0 T@a#2 T@b#0 T@b#1")
	b, err := json.Marshal(q)
	testutil.NoError(t, err)
	testutil.Equal(t, string(b), `{"topic":"T","brokerName":"broker-a","queueId":3}`)
}

func TestRouteBodiesJSONNames(t *testing.T) {
	// The key names Java and the Go client read.
	body := protocol.RegisterBrokerBody{
		TopicConfigSerializeWrapper: protocol.TopicConfigSerializeWrapper{
			TopicConfigTable: map[string]protocol.TopicConfig{"T": {TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4,
				Perm: 6, TopicFilterType: "SINGLE_TAG"}},
			DataVersion: protocol.DataVersion{Counter: 3, Timestamp: 1700000000000},
		},
		FilterServerList: []string{},
	}
	b, err := json.Marshal(body)
	testutil.NoError(t, err)
	for _, key := range []string{`"topicConfigSerializeWrapper"`, `"topicConfigTable"`, `"dataVersion"`, `"counter":3`,
		`"stateVersion"`, `"timestamp"`, `"filterServerList":[]`, `"readQueueNums":4`, `"topicFilterType":"SINGLE_TAG"`,
		`"topicSysFlag"`, `"order"`, `"attributes"`} {
		testutil.True(t, strings.Contains(string(b), key), key+" in "+string(b))
	}
	b, err = json.Marshal(protocol.KVTable{Table: map[string]string{"T": "broker-a:4"}})
	testutil.NoError(t, err)
	testutil.Equal(t, string(b), `{"table":{"T":"broker-a:4"}}`)
	b, err = json.Marshal(protocol.TopicList{TopicList: []string{"a"}})
	testutil.NoError(t, err)
	testutil.Equal(t, string(b), `{"topicList":["a"]}`)
}
