package remoting

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/testutil"
)

// goldenFrame is what a golden file must decode to.
type goldenFrame struct {
	code     int32
	response bool
	ext      []string // keys that must be present
	body     bool     // a body is present
	check    func(t *testing.T, c *Command)
}

var pullExt = []string{"consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
	"suspendTimeoutMillis", "subscription", "subVersion", "expressionType", "bname"}

var sendExt = []string{"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
	"bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes", "batch", "bname"}

// goldenFrames lists every file under testdata/golden (TestRemotingCaptureGolden
// writes them) with the fields the real client is known to send.
var goldenFrames = map[string]goldenFrame{
	"get_routeinfo_by_topic": {code: 105, ext: []string{"topic"}},
	"send_message": {code: 10, ext: sendExt, body: true, check: func(t *testing.T, c *Command) {
		p := c.Ext("properties")
		testutil.True(t, strings.Contains(p, "TAGS\x01TagA\x02") && strings.Contains(p, "UNIQ_KEY\x01"), "properties "+p)
		testutil.Equal(t, c.Ext("defaultTopic"), "TBW102")
		testutil.Equal(t, c.Ext("batch"), "false")
	}},
	"send_message_transaction_half": {code: 10, ext: sendExt, body: true, check: func(t *testing.T, c *Command) {
		testutil.True(t, strings.Contains(c.Ext("properties"), "TRAN_MSG\x01true\x02"), "half message")
		testutil.Equal(t, c.Ext("sysFlag"), "4")
	}},
	"send_batch_message": {code: 320, ext: strings.Split("a b c d e f g h i j k l m n", " "), body: true,
		check: func(t *testing.T, c *Command) { testutil.Equal(t, c.Ext("m"), "true") }},
	"end_transaction": {code: 37, ext: []string{"producerGroup", "tranStateTableOffset", "commitLogOffset",
		"commitOrRollback", "fromTransactionCheck", "msgId", "transactionId", "bname"}},
	"heart_beat": {code: 34, body: true, check: func(t *testing.T, c *Command) {
		var hb struct {
			ClientID string            `json:"clientID"`
			Consumer []json.RawMessage `json:"consumerDataSet"`
		}
		testutil.NoError(t, json.Unmarshal(c.Body, &hb))
		testutil.True(t, strings.Contains(hb.ClientID, "@"), "clientID "+hb.ClientID)
		testutil.True(t, len(hb.Consumer) > 0, "consumer data")
	}},
	"get_consumer_list_by_group": {code: 38, ext: []string{"consumerGroup"}},
	"query_consumer_offset":      {code: 14, ext: []string{"consumerGroup", "topic", "queueId", "bname"}},
	"get_max_offset":             {code: 30, ext: []string{"topic", "queueId", "bname"}},
	"search_offset_by_timestamp": {code: 29, ext: []string{"topic", "queueId", "timestamp", "bname"}},
	"pull_message_push": {code: 11, ext: pullExt,
		check: func(t *testing.T, c *Command) { testutil.Equal(t, c.Ext("sysFlag"), "2") }},
	"pull_message_pull": {code: 11, ext: pullExt,
		check: func(t *testing.T, c *Command) { testutil.Equal(t, c.Ext("sysFlag"), "6") }},
	"update_consumer_offset": {code: 15, ext: []string{"consumerGroup", "topic", "queueId", "commitOffset", "bname"},
		// The Go client calls it oneway but never sets the flag.
		check: func(t *testing.T, c *Command) { testutil.True(t, !c.IsOneway(), "no oneway bit") }},
	"consumer_send_msg_back": {code: 36, ext: []string{"group", "offset", "delayLevel", "originMsgId", "originTopic",
		"unitMode", "maxReconsumeTimes", "bname"}},
	"lock_batch_mq":   {code: 41, body: true},
	"unlock_batch_mq": {code: 42, body: true},
	"update_and_create_topic": {code: 17, ext: []string{"topic", "defaultTopic", "readQueueNums", "writeQueueNums",
		"perm", "topicFilterType", "topicSysFlag", "order"}},
	"delete_topic_in_broker":             {code: 215, ext: []string{"topic"}},
	"delete_topic_in_namesrv":            {code: 216, ext: []string{"topic"}},
	"get_all_topic_list_from_nameserver": {code: 206},
	"get_all_subscriptiongroup_config":   {code: 201},
	// The client's answer to a GET_CONSUMER_RUNNING_INFO the broker sent.
	"response_get_consumer_running_info": {code: 0, response: true, body: true},
}

func TestCodecGoldenFrames(t *testing.T) {
	frames := readGoldenFrames(t)
	for name := range goldenFrames {
		if frames[name] == nil {
			t.Errorf("golden frame %s.hex is missing; re-run the capture (see golden_capture_test.go)", name)
		}
	}
	for _, name := range sortedNames(frames) {
		t.Run(name, func(t *testing.T) {
			want, ok := goldenFrames[name]
			if !ok {
				t.Fatalf("testdata/golden/%s.hex has no entry in goldenFrames", name)
			}
			raw := frames[name]
			cmd, err := DecodeWholeFrame(raw)
			testutil.NoError(t, err, "decode")
			testutil.Equal(t, cmd.Serialize, SerializeJSON, "the Go client only writes JSON headers")
			testutil.Equal(t, cmd.Code, want.code, "code")
			testutil.Equal(t, cmd.Language, "GO", "language")
			testutil.Equal(t, cmd.Version, int32(317), "version")
			testutil.Equal(t, cmd.IsResponse(), want.response, "response flag")
			testutil.True(t, cmd.Opaque > 0, "opaque is positive")
			testutil.Equal(t, cmd.Remark, "", "remark")
			for _, k := range want.ext {
				if _, ok := cmd.ExtFields[k]; !ok {
					t.Errorf("ext field %q missing from %v", k, cmd.ExtFields)
				}
			}
			testutil.Equal(t, len(cmd.Body) > 0, want.body, "body present")
			if want.check != nil {
				want.check(t, cmd)
			}

			// Re-encoded in both encodings, it decodes to the same command.
			for _, typ := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
				cmd.Serialize = typ
				again, err := DecodeWholeFrame(EncodeFrame(cmd))
				testutil.NoError(t, err, typ)
				testutil.NoError(t, equalCommand(again, cmd), typ)
			}
		})
	}
}
