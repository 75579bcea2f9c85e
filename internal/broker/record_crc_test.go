package broker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// The attack (issue 22): a byte flipped on disk in a stored topic name was
// served — to a consumer of the wrong topic — because only the body was
// checksummed; so were flipped properties and keys. Every stored record now
// carries a CRC32C of all its bytes: a pull of the damaged record's topic
// gets MESSAGE_CORRUPT, the topic the flipped byte now spells has nothing,
// and VIEW_MESSAGE_BY_ID refuses it. Before the damage, rocketmq-client-go's
// own decoder reads the pull answers: they are still the v1 format.
func TestBrokerFlippedTopicPropertyKeyNotServed(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-rcrc")
	s := startBroker(t, opts)
	c := newRawClient(t)
	cases := []struct{ topic, needle string }{
		{"FlipTopic", "FlipTopic"}, // becomes FlIpTopic
		{"PropTopic", "crimson"},   // a property value
		{"KeyTopic", "kiwi-key"},   // a key
	}
	createTopic(t, c, s.Addr(), "FlIpTopic", 1)
	offsets := map[string]int64{}
	for i, tc := range cases {
		createTopic(t, c, s.Addr(), tc.topic, 1)
		props := map[string]string{"KEYS": fmt.Sprintf("key-%d", i)}
		switch tc.topic {
		case "PropTopic":
			props["color"] = "crimson"
		case "KeyTopic":
			props["KEYS"] = "kiwi-key"
		}
		expectCode(t, sendRaw(t, c, s.Addr(), tc.topic, 0, props, []byte(fmt.Sprintf("payload %d", i))), protocol.Success, "send")

		resp := pullRaw(t, c, s.Addr(), "rcrc_cg", tc.topic, 0, 0, "*", 32)
		expectCode(t, resp, protocol.Success, "pull before the damage")
		got := primitive.DecodeMessage(resp.Body)
		testutil.Equal(t, len(got), 1, "rocketmq-client-go decodes the pull answer")
		testutil.Equal(t, got[0].Topic, tc.topic)
		testutil.Equal(t, string(got[0].Body), fmt.Sprintf("payload %d", i))
		testutil.Equal(t, got[0].GetKeys(), props["KEYS"])
		offsets[tc.topic] = got[0].CommitLogOffset
	}
	for _, tc := range cases {
		flipInCommitLog(t, opts.DataDir, []byte(tc.needle))
	}
	for _, tc := range cases {
		resp := pullRaw(t, c, s.Addr(), "rcrc_cg", tc.topic, 0, 0, "*", 32)
		expectCode(t, resp, protocol.SystemError, "pull of the damaged record of "+tc.topic)
		testutil.True(t, strings.Contains(resp.Remark, "MESSAGE_CORRUPT"), resp.Remark)
		testutil.Equal(t, resp.ExtFields["nextBeginOffset"], "0", "the consumer is not moved past it")

		vh := protocol.ViewMessageRequestHeader{Offset: offsets[tc.topic]}
		resp = invoke(t, c, s.Addr(), protocol.ViewMessageByID, vh.Ext(), nil)
		expectCode(t, resp, protocol.SystemError, "view the damaged record of "+tc.topic)
	}
	resp := pullRaw(t, c, s.Addr(), "rcrc_cg", "FlIpTopic", 0, 0, "*", 32)
	expectCode(t, resp, protocol.PullNotFound, "the topic the flipped byte spells has no message")
	testutil.True(t, s.store.CorruptRecords() >= 6, fmt.Sprint("corrupt reads counted: ", s.store.CorruptRecords()))
}
