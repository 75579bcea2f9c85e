package namesrv

import (
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
)

// FuzzNamesrvDecodeRegisterBody: no REGISTER_BROKER body, plain or
// compressed, may panic the decoder or yield a topic the tables cannot hold.
func FuzzNamesrvDecodeRegisterBody(f *testing.F) {
	f.Add(registerBody(topicTable(map[string]int{"TopicA": 4}), 1), false)
	f.Add([]byte(`{"topicConfigTable":{"T":{"readQueueNums":1}},"dataVersion":{"counter":1}}`), false)
	f.Add([]byte(`{"topicConfigSerializeWrapper":{"topicConfigTable":{0:{}}}}`), false)
	f.Add(compressedBody(nil, protocol.DataVersion{Counter: 2}, []string{"T 1 1 6 SINGLE_TAG {}"}, `[]`, true), true)
	f.Add([]byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01}, true)
	f.Fuzz(func(t *testing.T, body []byte, compressed bool) {
		reg, err := decodeRegisterBody(body, compressed, 0)
		if err != nil {
			return
		}
		for name, tc := range reg.topics {
			if name == "" || tc.ReadQueueNums < 0 || tc.WriteQueueNums < 0 {
				t.Fatalf("accepted topic %q %+v", name, tc)
			}
		}
	})
}

func TestNamesrvQueryDataVersionBadBody(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", nil)
	q := protocol.QueryDataVersionRequestHeader{BrokerName: "b", BrokerAddr: "127.0.1.1:1", ClusterName: "c"}
	resp := invoke(t, newClient(t), ns.Addr(), protocol.QueryDataVersion, q.Ext(), []byte("{counter"))
	wantCode(t, resp, protocol.InvalidParameter)
}
