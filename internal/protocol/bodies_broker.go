package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// JSON bodies of the requests a broker serves and of its answers.

// Consume types, message models and starting points a consumer reports in
// its heartbeat.
const (
	ConsumeActively       = "CONSUME_ACTIVELY"  // pull consumer
	ConsumePassively      = "CONSUME_PASSIVELY" // push consumer
	MessageModelCluster   = "CLUSTERING"
	MessageModelBroadcast = "BROADCASTING"
	ExpressionTypeTag     = "TAG"
	ExpressionTypeSQL92   = "SQL92"
	// SubscribeAll is the subscription expression that matches every tag.
	SubscribeAll = "*"
)

// HeartbeatData is HEART_BEAT's body: the producer and consumer groups of
// one client process.
type HeartbeatData struct {
	ClientID        string         `json:"clientID"`
	ProducerDataSet []ProducerData `json:"producerDataSet"`
	ConsumerDataSet []ConsumerData `json:"consumerDataSet"`
	// HeartbeatIntervalMillis is a zonemq extension: the period at which
	// the client heartbeats this broker. A zonemq broker then expires the
	// client's registrations after max(3×period, 3 s) of silence instead of
	// its channel expiry (120 s, sized for stock clients' 30 s heartbeat).
	// 0 (absent, as from stock clients) keeps the channel expiry. RocketMQ
	// brokers ignore the field (fastjson skips unknown properties).
	HeartbeatIntervalMillis int64 `json:"heartbeatIntervalMillis,omitempty"`
}

// ProducerData is one producer group in a heartbeat.
type ProducerData struct {
	GroupName string `json:"groupName"`
}

// ConsumerData is one consumer group in a heartbeat.
type ConsumerData struct {
	GroupName           string             `json:"groupName"`
	ConsumeType         string             `json:"consumeType"`
	MessageModel        string             `json:"messageModel"`
	ConsumeFromWhere    string             `json:"consumeFromWhere"`
	SubscriptionDataSet []SubscriptionData `json:"subscriptionDataSet"`
	UnitMode            bool               `json:"unitMode"`
	// HeartbeatIntervalMillis is HeartbeatData.HeartbeatIntervalMillis for
	// this consumer group's registration only; it wins over the top-level
	// value. A zonemq extension, 0 when absent.
	HeartbeatIntervalMillis int64 `json:"heartbeatIntervalMillis,omitempty"`
}

// SubscriptionData is one topic subscription of a consumer group.
type SubscriptionData struct {
	ClassFilterMode bool     `json:"classFilterMode"`
	Topic           string   `json:"topic"`
	SubString       string   `json:"subString"`
	TagsSet         []string `json:"tagsSet"`
	CodeSet         TagCodes `json:"codeSet"`
	SubVersion      int64    `json:"subVersion"`
	ExpressionType  string   `json:"expressionType"`
}

// TagCodes is a subscription's tag hash codes. rocketmq-client-go sends
// them as JSON strings, Java as numbers; both decode. They encode as numbers.
type TagCodes []int64

// UnmarshalJSON accepts an array of numbers or numeric strings.
func (c *TagCodes) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*c = nil
		return nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("codeSet: %w", err)
	}
	out := make(TagCodes, 0, len(raw))
	for _, r := range raw {
		s := string(bytes.Trim(bytes.TrimSpace(r), `"`))
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("codeSet: %s is not an integer", r)
		}
		out = append(out, n)
	}
	*c = out
	return nil
}

// ParseSubscription parses a TAG expression ("*", "", "A || B") into the tag
// set and code set a SubscriptionData carries. An empty set means every tag.
func ParseSubscription(expr string) (tags []string, codes TagCodes) {
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == SubscribeAll {
		return nil, nil
	}
	for _, t := range strings.Split(expr, "||") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		tags = append(tags, t)
		codes = append(codes, TagsHashCode(t))
	}
	return tags, codes
}

// ConsumerListBody is GET_CONSUMER_LIST_BY_GROUP's answer.
type ConsumerListBody struct {
	ConsumerIDList []string `json:"consumerIdList"`
}

// Connection is one client connection as admin answers list it.
type Connection struct {
	ClientID   string `json:"clientId"`
	ClientAddr string `json:"clientAddr"`
	Language   string `json:"language"`
	Version    int32  `json:"version"`
}

// ConsumerConnection is GET_CONSUMER_CONNECTION_LIST's answer.
type ConsumerConnection struct {
	ConnectionSet     []Connection                `json:"connectionSet"`
	SubscriptionTable map[string]SubscriptionData `json:"subscriptionTable"`
	ConsumeType       string                      `json:"consumeType"`
	MessageModel      string                      `json:"messageModel"`
	ConsumeFromWhere  string                      `json:"consumeFromWhere"`
}

// SubscriptionGroupConfig is a consumer group as a broker holds it.
type SubscriptionGroupConfig struct {
	GroupName                      string `json:"groupName"`
	ConsumeEnable                  bool   `json:"consumeEnable"`
	ConsumeFromMinEnable           bool   `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         bool   `json:"consumeBroadcastEnable"`
	ConsumeMessageOrderly          bool   `json:"consumeMessageOrderly"`
	RetryQueueNums                 int    `json:"retryQueueNums"`
	RetryMaxTimes                  int    `json:"retryMaxTimes"`
	BrokerID                       int64  `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64  `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable bool   `json:"notifyConsumerIdsChangedEnable"`
}

// NewSubscriptionGroupConfig returns RocketMQ's defaults for group.
func NewSubscriptionGroupConfig(group string) SubscriptionGroupConfig {
	return SubscriptionGroupConfig{
		GroupName: group, ConsumeEnable: true, ConsumeFromMinEnable: true, ConsumeBroadcastEnable: true,
		RetryQueueNums: 1, RetryMaxTimes: 16, WhichBrokerWhenConsumeSlowly: 1, NotifyConsumerIdsChangedEnable: true,
	}
}

// SubscriptionGroupWrapper is GET_ALL_SUBSCRIPTIONGROUP_CONFIG's answer.
type SubscriptionGroupWrapper struct {
	SubscriptionGroupTable map[string]SubscriptionGroupConfig `json:"subscriptionGroupTable"`
	DataVersion            DataVersion                        `json:"dataVersion"`
}

// ConsumerOffsetWrapper is GET_ALL_CONSUMER_OFFSET's answer: offsets keyed
// "topic@group", then by queue id.
type ConsumerOffsetWrapper struct {
	OffsetTable map[string]map[int32]int64 `json:"offsetTable"`
}

// TopicOffset is one queue's offsets in GET_TOPIC_STATS_INFO's answer.
type TopicOffset struct {
	MinOffset           int64 `json:"minOffset"`
	MaxOffset           int64 `json:"maxOffset"`
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
}

// OffsetWrapper is one queue's figures in GET_CONSUME_STATS's answer.
type OffsetWrapper struct {
	BrokerOffset   int64 `json:"brokerOffset"`
	ConsumerOffset int64 `json:"consumerOffset"`
	PullOffset     int64 `json:"pullOffset"`
	LastTimestamp  int64 `json:"lastTimestamp"`
}

// TopicStatsTable is GET_TOPIC_STATS_INFO's answer.
type TopicStatsTable struct {
	OffsetTable map[MessageQueue]TopicOffset
}

// ConsumeStats is GET_CONSUME_STATS's answer.
type ConsumeStats struct {
	OffsetTable map[MessageQueue]OffsetWrapper
	ConsumeTPS  float64
}

// Encode writes the table as Java's fastjson does: a map keyed by objects,
// `{"offsetTable":{{"brokerName":…,"queueId":0,"topic":…}:{…}}}`, which Java
// admin tools read. It is not standard JSON; DecodeTopicStatsTable reads it.
func (t *TopicStatsTable) Encode() []byte {
	var b bytes.Buffer
	b.WriteString(`{"offsetTable":`)
	writeQueueKeyedMap(&b, t.OffsetTable)
	b.WriteString(`}`)
	return b.Bytes()
}

// DecodeTopicStatsTable parses TopicStatsTable.Encode's output.
func DecodeTopicStatsTable(data []byte) (*TopicStatsTable, error) {
	var top map[string]json.RawMessage
	if err := decodeQueueKeyedTop(data, &top); err != nil {
		return nil, err
	}
	t := &TopicStatsTable{OffsetTable: map[MessageQueue]TopicOffset{}}
	if err := readQueueKeyedMap(top["offsetTable"], t.OffsetTable); err != nil {
		return nil, err
	}
	return t, nil
}

// Encode writes the stats in fastjson's object-keyed form (see
// TopicStatsTable.Encode).
func (s *ConsumeStats) Encode() []byte {
	var b bytes.Buffer
	b.WriteString(`{"consumeTps":`)
	b.WriteString(strconv.FormatFloat(s.ConsumeTPS, 'f', -1, 64))
	b.WriteString(`,"offsetTable":`)
	writeQueueKeyedMap(&b, s.OffsetTable)
	b.WriteString(`}`)
	return b.Bytes()
}

// DecodeConsumeStats parses ConsumeStats.Encode's output.
func DecodeConsumeStats(data []byte) (*ConsumeStats, error) {
	var top map[string]json.RawMessage
	if err := decodeQueueKeyedTop(data, &top); err != nil {
		return nil, err
	}
	s := &ConsumeStats{OffsetTable: map[MessageQueue]OffsetWrapper{}}
	if raw, ok := top["consumeTps"]; ok {
		if err := json.Unmarshal(raw, &s.ConsumeTPS); err != nil {
			return nil, fmt.Errorf("protocol: consumeTps: %w", err)
		}
	}
	if err := readQueueKeyedMap(top["offsetTable"], s.OffsetTable); err != nil {
		return nil, err
	}
	return s, nil
}

func writeQueueKeyedMap[V any](b *bytes.Buffer, m map[MessageQueue]V) {
	qs := make([]MessageQueue, 0, len(m))
	for q := range m {
		qs = append(qs, q)
	}
	SortMessageQueues(qs)
	b.WriteByte('{')
	for i, q := range qs {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(q)
		v, _ := json.Marshal(m[q])
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
}

// decodeQueueKeyedTop splits the top-level object of an object-keyed body
// into raw members, each member value found by bracket matching because the
// standard decoder rejects object keys.
func decodeQueueKeyedTop(data []byte, top *map[string]json.RawMessage) error {
	members, err := splitObject(data)
	if err != nil {
		return err
	}
	*top = map[string]json.RawMessage{}
	for _, kv := range members {
		var k string
		if err := json.Unmarshal(kv[0], &k); err != nil {
			return fmt.Errorf("protocol: object key %s: %w", kv[0], err)
		}
		(*top)[k] = kv[1]
	}
	return nil
}

func readQueueKeyedMap[V any](raw []byte, out map[MessageQueue]V) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	members, err := splitObject(raw)
	if err != nil {
		return err
	}
	for _, kv := range members {
		var q MessageQueue
		if err := json.Unmarshal(kv[0], &q); err != nil {
			return fmt.Errorf("protocol: queue key %s: %w", kv[0], err)
		}
		var v V
		if err := json.Unmarshal(kv[1], &v); err != nil {
			return fmt.Errorf("protocol: value for %s: %w", q, err)
		}
		out[q] = v
	}
	return nil
}

// splitObject returns the key and value texts of a JSON-like object whose
// keys may themselves be objects.
func splitObject(b []byte) ([][2][]byte, error) {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return nil, fmt.Errorf("protocol: expected an object")
	}
	var out [][2][]byte
	i := 1
	for {
		i = skipSpace(b, i)
		if i >= len(b)-1 {
			return out, nil
		}
		kEnd, err := valueEnd(b, i)
		if err != nil {
			return nil, err
		}
		key := b[i:kEnd]
		i = skipSpace(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return nil, fmt.Errorf("protocol: expected ':' at byte %d", i)
		}
		i = skipSpace(b, i+1)
		vEnd, err := valueEnd(b, i)
		if err != nil {
			return nil, err
		}
		out = append(out, [2][]byte{key, b[i:vEnd]})
		i = skipSpace(b, vEnd)
		if i < len(b)-1 {
			if b[i] != ',' {
				return nil, fmt.Errorf("protocol: expected ',' at byte %d", i)
			}
			i++
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the index just past the JSON value starting at b[i].
func valueEnd(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, fmt.Errorf("protocol: unexpected end of object")
	}
	depth, inString, escaped := 0, false, false
	for j := i; j < len(b); j++ {
		c := b[j]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
				if depth == 0 {
					return j + 1, nil
				}
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j, nil
			}
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		case ',', ':':
			if depth == 0 {
				return j, nil
			}
		}
	}
	return 0, fmt.Errorf("protocol: unterminated value at byte %d", i)
}
