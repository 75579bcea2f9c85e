package broker

import (
	"encoding/json"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// GET_TOPIC_FLOWS reports what was stored per topic and pulled per topic
// and group, and filters by topic.
func TestBrokerTopicFlows(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-flow", ns.Addr()))
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "FlowA", 1)
	createTopic(t, c, s.Addr(), "FlowB", 1)
	for range 3 {
		expectCode(t, sendRaw(t, c, s.Addr(), "FlowA", 0, nil, []byte("abcd")), protocol.Success, "send")
	}
	expectCode(t, sendRaw(t, c, s.Addr(), "FlowB", 0, nil, []byte("x")), protocol.Success, "send")
	expectCode(t, pullRaw(t, c, s.Addr(), "flow_cg", "FlowA", 0, 0, "*", 32), protocol.Success, "pull")

	flows := func(ext map[string]string) protocol.TopicFlows {
		t.Helper()
		resp := invoke(t, c, s.Addr(), protocol.GetTopicFlows, ext, nil)
		expectCode(t, resp, protocol.Success, "GET_TOPIC_FLOWS")
		var f protocol.TopicFlows
		testutil.NoError(t, json.Unmarshal(resp.Body, &f))
		return f
	}
	f := flows(map[string]string{"topic": "FlowA"})
	testutil.Equal(t, len(f.In), 1, f.In)
	testutil.Equal(t, f.In[0], protocol.TopicFlow{Topic: "FlowA", Messages: 3, Bytes: 12})
	testutil.Equal(t, len(f.Out), 1, f.Out)
	testutil.Equal(t, f.Out[0].Group, "flow_cg")
	testutil.Equal(t, f.Out[0].Messages, int64(3))
	testutil.True(t, f.AtMillis >= f.StartMillis && f.StartMillis > 0, f.AtMillis, f.StartMillis)
	f = flows(nil)
	testutil.Equal(t, len(f.In), 2, f.In)
}
