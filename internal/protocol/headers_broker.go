package protocol

import (
	"fmt"
	"strconv"

	"github.com/zonemq/zonemq/internal/remoting"
)

// Typed headers of the requests a broker serves (producer, consumer and admin
// requests) and of its responses. Field names follow RocketMQ's Java
// CommandCustomHeader classes; the ext keys are the wire names. Required
// fields are the ones Java marks @CFNotNull and every client sends; the rest
// are optional and default to what Java assumes when they are absent.

// SendMessageRequestHeader is SEND_MESSAGE's header (long keys). SEND_MESSAGE_V2
// and SEND_BATCH_MESSAGE carry the same fields under the short keys a–n: see
// SendMessageRequestHeaderV2.
type SendMessageRequestHeader struct {
	ProducerGroup         string
	Topic                 string
	DefaultTopic          string // optional, default TBW102
	DefaultTopicQueueNums int32  // optional, default 4
	QueueID               int32  // negative: the broker picks a queue
	SysFlag               int32
	BornTimestamp         int64
	Flag                  int32
	Properties            string // optional
	ReconsumeTimes        int32  // optional
	UnitMode              bool   // optional
	Batch                 bool   // optional
	MaxReconsumeTimes     int32  // optional: see HasMaxReconsumeTimes
	BrokerName            string // optional ("bname"; absent from rocketmq-client-go v2.1.2)
	// Retry ("zmqRetry", zonemq's own, written only when true) marks an
	// attempt of a send that already failed once, possibly after the
	// broker stored it (the answer was lost, the replicas were slow): the
	// broker answers with the stored copy of the same UNIQ_KEY, if it has
	// one, instead of storing a second (docs/protocol.md). Stock clients
	// never send it.
	Retry bool

	// maxReconsumeTimesAbsent records a request without maxReconsumeTimes
	// (Java clients leave it out unless they send to a retry topic;
	// rocketmq-client-go always sends it, "0" on ordinary sends). It is
	// unexported and inverted so that a header built in code carries the
	// field, as Ext has always written it.
	maxReconsumeTimesAbsent bool
}

// HasMaxReconsumeTimes reports whether the header carries maxReconsumeTimes.
// Headers built in code always do; a header read by SetExt does when the
// request had the key (l for SEND_MESSAGE_V2), even with the value 0. The
// broker uses it, as Java does, to let an absent field mean "the group's
// retryMaxTimes" while an explicit 0 means 0.
func (h *SendMessageRequestHeader) HasMaxReconsumeTimes() bool { return !h.maxReconsumeTimesAbsent }

// Ext renders the header with SEND_MESSAGE's long keys. maxReconsumeTimes
// is written unless the header was read from a request without it.
func (h *SendMessageRequestHeader) Ext() map[string]string {
	w := newExtWriter(len(sendV2Keys))
	w.Str("producerGroup", h.ProducerGroup).Str("topic", h.Topic).Str("defaultTopic", h.DefaultTopic).
		Int("defaultTopicQueueNums", int64(h.DefaultTopicQueueNums)).Int("queueId", int64(h.QueueID)).
		Int("sysFlag", int64(h.SysFlag)).Int("bornTimestamp", h.BornTimestamp).Int("flag", int64(h.Flag)).
		Str("properties", h.Properties).Int("reconsumeTimes", int64(h.ReconsumeTimes)).
		Bool("unitMode", h.UnitMode).Bool("batch", h.Batch).OptStr("bname", h.BrokerName)
	if h.HasMaxReconsumeTimes() {
		w.Int("maxReconsumeTimes", int64(h.MaxReconsumeTimes))
	}
	if h.Retry {
		w.Bool(ExtSendRetry, true)
	}
	return w
}

// SetExt reads SEND_MESSAGE's long keys.
func (h *SendMessageRequestHeader) SetExt(ext map[string]string) error {
	return h.setExt(&ExtReader{ext: ext})
}

// ReadCommand fills the header from cmd's ext fields as SetExt does,
// without decoding them into a map when they are still in their wire form:
// one pass over them files each value under its field (sendSlots).
func (h *SendMessageRequestHeader) ReadCommand(cmd *remoting.Command) error {
	if raw, ok := cmd.RawExt(); ok {
		r := ExtReader{useSlots: true}
		r.slots.fill(raw, false)
		return h.setExt(&r)
	}
	return h.setExt(&ExtReader{cmd: cmd})
}

// sendSlots holds a send header's fields as found on the wire, numbered as
// sendV2Keys orders them; a key sent twice keeps its last value, as a map
// would.
type sendSlots struct {
	vals [len(sendV2Keys)]string
	have uint32
}

// fill files the ROCKETMQ-encoded fields of raw under their slots: long
// keys, or with short SEND_MESSAGE_V2's a–n. Other keys are ignored, as
// setExt ignores them.
func (s *sendSlots) fill(raw string, short bool) {
	for {
		k, v, rest, ok := remoting.NextBinaryExt(raw)
		if !ok {
			return
		}
		raw = rest
		i := -1
		if short {
			if len(k) == 1 && k[0] >= 'a' && int(k[0]-'a') < len(sendV2Keys)-1 {
				i = int(k[0] - 'a')
			} else if k == ExtSendRetry {
				i = len(sendV2Keys) - 1
			}
		} else {
			i = sendSlot(k)
		}
		if i >= 0 {
			s.vals[i] = v
			s.have |= 1 << i
		}
	}
}

// get returns the field under its long key.
func (s *sendSlots) get(long string) (string, bool) {
	i := sendSlot(long)
	if i < 0 || s.have&(1<<i) == 0 {
		return "", false
	}
	return s.vals[i], true
}

// sendSlot is the slot of a send header's long key (sendV2Keys order), or
// -1.
func sendSlot(long string) int {
	switch long {
	case "producerGroup":
		return 0
	case "topic":
		return 1
	case "defaultTopic":
		return 2
	case "defaultTopicQueueNums":
		return 3
	case "queueId":
		return 4
	case "sysFlag":
		return 5
	case "bornTimestamp":
		return 6
	case "flag":
		return 7
	case "properties":
		return 8
	case "reconsumeTimes":
		return 9
	case "unitMode":
		return 10
	case "maxReconsumeTimes":
		return 11
	case "batch":
		return 12
	case "bname":
		return 13
	case ExtSendRetry:
		return 14
	}
	return -1
}

// setExt reads the fields through r, which knows the keys they are under.
func (h *SendMessageRequestHeader) setExt(r *ExtReader) error {
	h.ProducerGroup = r.String("producerGroup")
	h.Topic = r.String("topic")
	h.DefaultTopic = r.OptString("defaultTopic")
	if h.DefaultTopic == "" {
		h.DefaultTopic = AutoCreateTopicKey
	}
	h.DefaultTopicQueueNums = r.OptInt32("defaultTopicQueueNums", 4)
	h.QueueID = r.Int32("queueId")
	h.SysFlag = r.Int32("sysFlag")
	h.BornTimestamp = r.Int64("bornTimestamp")
	h.Flag = r.Int32("flag")
	h.Properties = r.OptString("properties")
	h.ReconsumeTimes = r.OptInt32("reconsumeTimes", 0)
	h.UnitMode = r.OptBool("unitMode", false)
	h.Batch = r.OptBool("batch", false)
	_, present := r.get("maxReconsumeTimes", false)
	h.maxReconsumeTimesAbsent = !present
	h.MaxReconsumeTimes = r.OptInt32("maxReconsumeTimes", 0)
	h.BrokerName = r.OptString("bname")
	h.Retry = r.OptBool(ExtSendRetry, false)
	return r.Err()
}

// sendV2Keys maps SEND_MESSAGE_V2's short keys to SEND_MESSAGE's long ones.
var sendV2Keys = [...][2]string{
	{"a", "producerGroup"}, {"b", "topic"}, {"c", "defaultTopic"}, {"d", "defaultTopicQueueNums"},
	{"e", "queueId"}, {"f", "sysFlag"}, {"g", "bornTimestamp"}, {"h", "flag"}, {"i", "properties"},
	{"j", "reconsumeTimes"}, {"k", "unitMode"}, {"l", "maxReconsumeTimes"}, {"m", "batch"}, {"n", "bname"},
	{ExtSendRetry, ExtSendRetry}, // zonemq's own, the same key in both forms
}

// ExtSendRetry is the send request field of SendMessageRequestHeader.Retry.
const ExtSendRetry = "zmqRetry"

// sendV2ShortKey maps each long key to its short one, for reading V2
// headers without building a second map per request.
var sendV2ShortKey = func() map[string]string {
	m := make(map[string]string, len(sendV2Keys))
	for _, k := range sendV2Keys {
		m[k[1]] = k[0]
	}
	return m
}()

// SendMessageRequestHeaderV2 is SEND_MESSAGE_V2's and SEND_BATCH_MESSAGE's
// header: the fields of SendMessageRequestHeader under the keys a–n.
type SendMessageRequestHeaderV2 struct {
	SendMessageRequestHeader
}

// Ext renders the header with the short keys a–n.
func (h *SendMessageRequestHeaderV2) Ext() map[string]string {
	long := h.SendMessageRequestHeader.Ext()
	out := make(map[string]string, len(long))
	for _, k := range sendV2Keys {
		if v, ok := long[k[1]]; ok {
			out[k[0]] = v
		}
	}
	return out
}

// SetExt reads the short keys a–n. Errors name the long field and its key,
// e.g. "missing ext field topic (b)".
func (h *SendMessageRequestHeaderV2) SetExt(ext map[string]string) error {
	return h.read(&ExtReader{ext: ext, short: sendV2ShortKey})
}

// ReadCommand is SetExt over cmd's ext fields (see
// SendMessageRequestHeader.ReadCommand).
func (h *SendMessageRequestHeaderV2) ReadCommand(cmd *remoting.Command) error {
	if raw, ok := cmd.RawExt(); ok {
		r := ExtReader{useSlots: true}
		r.slots.fill(raw, true)
		return h.read(&r)
	}
	return h.read(&ExtReader{cmd: cmd, short: sendV2ShortKey})
}

func (h *SendMessageRequestHeaderV2) read(r *ExtReader) error {
	if err := h.SendMessageRequestHeader.setExt(r); err != nil {
		for _, k := range sendV2Keys {
			if errNamesField(err, k[1]) {
				return fmt.Errorf("%w (short key %s)", err, k[0])
			}
		}
		return err
	}
	return nil
}

// errNamesField reports whether an ExtReader error is about field key.
func errNamesField(err error, key string) bool {
	s := err.Error()
	return s == "missing ext field "+key || len(s) > len("ext field "+key+"=") && s[:len("ext field "+key+"=")] == "ext field "+key+"="
}

// SendMessageResponseHeader is the answer to every send request.
type SendMessageResponseHeader struct {
	MsgID         string // offset message id(s), comma-joined for a batch
	QueueID       int32
	QueueOffset   int64
	TransactionID string // optional: the message's UNIQ_KEY
	MsgRegion     string // MSG_REGION
	TraceOn       bool   // TRACE_ON
	// BrokerEpoch (zonemq, "brokerEpoch") is the replication epoch of the
	// master that acknowledged; absent (0) on a broker without a group.
	// Stock clients ignore it; the drill's checker compares it with the
	// controller's history.
	BrokerEpoch int64
}

// Ext renders the header.
func (h *SendMessageResponseHeader) Ext() map[string]string {
	w := newExtWriter(7)
	w.Str("msgId", h.MsgID).Int("queueId", int64(h.QueueID)).Int("queueOffset", h.QueueOffset).
		OptStr("transactionId", h.TransactionID).Str(PropertyMsgRegion, h.MsgRegion).Bool(PropertyTraceSwitch, h.TraceOn)
	if h.BrokerEpoch != 0 {
		w.Int(ExtBrokerEpoch, h.BrokerEpoch)
	}
	return w
}

// ExtBrokerEpoch is the send response field carrying BrokerEpoch.
const ExtBrokerEpoch = "brokerEpoch"

// ExtNotMaster ("zmqNotMaster": "true") marks a refused send whose broker is
// not, or no longer, its group's master: a replica, a master whose
// controller lease lapsed, or one handing over. The group may have a new
// master; stock clients ignore the field.
const ExtNotMaster = "zmqNotMaster"

// SetExt reads the header.
func (h *SendMessageResponseHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.MsgID = r.String("msgId")
	h.QueueID = r.Int32("queueId")
	h.QueueOffset = r.Int64("queueOffset")
	h.TransactionID = r.OptString("transactionId")
	h.MsgRegion = r.OptString(PropertyMsgRegion)
	h.TraceOn = r.OptBool(PropertyTraceSwitch, false)
	h.BrokerEpoch = r.OptInt64(ExtBrokerEpoch, 0)
	return r.Err()
}

// Pull system flags (PullSysFlag).
const (
	PullFlagCommitOffset = 1 << 0
	PullFlagSuspend      = 1 << 1
	PullFlagSubscription = 1 << 2
	PullFlagClassFilter  = 1 << 3
	PullFlagLitePull     = 1 << 4
)

// PullMessageRequestHeader is PULL_MESSAGE's header.
type PullMessageRequestHeader struct {
	ConsumerGroup        string
	Topic                string
	QueueID              int32
	QueueOffset          int64
	MaxMsgNums           int32
	SysFlag              int32
	CommitOffset         int64
	SuspendTimeoutMillis int64
	Subscription         string // optional
	SubVersion           int64
	ExpressionType       string // optional, default TAG
	MaxMsgBytes          int32  // optional, 0 = broker default
	BrokerName           string // optional ("bname")
}

// Ext renders the header.
func (h *PullMessageRequestHeader) Ext() map[string]string {
	w := ExtWriter{}
	w.Str("consumerGroup", h.ConsumerGroup).Str("topic", h.Topic).Int("queueId", int64(h.QueueID)).
		Int("queueOffset", h.QueueOffset).Int("maxMsgNums", int64(h.MaxMsgNums)).Int("sysFlag", int64(h.SysFlag)).
		Int("commitOffset", h.CommitOffset).Int("suspendTimeoutMillis", h.SuspendTimeoutMillis).
		Str("subscription", h.Subscription).Int("subVersion", h.SubVersion).OptStr("expressionType", h.ExpressionType).
		OptStr("bname", h.BrokerName)
	if h.MaxMsgBytes != 0 {
		w.Int("maxMsgBytes", int64(h.MaxMsgBytes))
	}
	return w
}

// SetExt reads the header.
func (h *PullMessageRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.ConsumerGroup = r.String("consumerGroup")
	h.Topic = r.String("topic")
	h.QueueID = r.Int32("queueId")
	h.QueueOffset = r.Int64("queueOffset")
	h.MaxMsgNums = r.Int32("maxMsgNums")
	h.SysFlag = r.Int32("sysFlag")
	h.CommitOffset = r.Int64("commitOffset")
	h.SuspendTimeoutMillis = r.Int64("suspendTimeoutMillis")
	h.Subscription = r.OptString("subscription")
	h.SubVersion = r.OptInt64("subVersion", 0)
	h.ExpressionType = r.OptString("expressionType")
	h.MaxMsgBytes = r.OptInt32("maxMsgBytes", 0)
	h.BrokerName = r.OptString("bname")
	return r.Err()
}

// PullMessageResponseHeader is PULL_MESSAGE's answer. rocketmq-client-go
// reads all four fields from every answer, so all four are always written.
type PullMessageResponseHeader struct {
	SuggestWhichBrokerID int64
	NextBeginOffset      int64
	MinOffset            int64
	MaxOffset            int64
}

// Ext renders the header.
func (h *PullMessageResponseHeader) Ext() map[string]string {
	w := ExtWriter{}
	w.Int("suggestWhichBrokerId", h.SuggestWhichBrokerID).Int("nextBeginOffset", h.NextBeginOffset).
		Int("minOffset", h.MinOffset).Int("maxOffset", h.MaxOffset)
	return w
}

// SetExt reads the header.
func (h *PullMessageResponseHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.SuggestWhichBrokerID = r.Int64("suggestWhichBrokerId")
	h.NextBeginOffset = r.Int64("nextBeginOffset")
	h.MinOffset = r.Int64("minOffset")
	h.MaxOffset = r.Int64("maxOffset")
	return r.Err()
}

// QueryConsumerOffsetRequestHeader is QUERY_CONSUMER_OFFSET's header.
type QueryConsumerOffsetRequestHeader struct {
	ConsumerGroup string
	Topic         string
	QueueID       int32
	// SetZeroIfNotFound is nil when the field is absent (the Go client never
	// sends it).
	SetZeroIfNotFound *bool
	BrokerName        string // optional ("bname")
}

// Ext renders the header.
func (h *QueryConsumerOffsetRequestHeader) Ext() map[string]string {
	w := ExtWriter{}
	w.Str("consumerGroup", h.ConsumerGroup).Str("topic", h.Topic).Int("queueId", int64(h.QueueID)).OptStr("bname", h.BrokerName)
	if h.SetZeroIfNotFound != nil {
		w.Bool("setZeroIfNotFound", *h.SetZeroIfNotFound)
	}
	return w
}

// SetExt reads the header.
func (h *QueryConsumerOffsetRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.ConsumerGroup = r.String("consumerGroup")
	h.Topic = r.String("topic")
	h.QueueID = r.Int32("queueId")
	h.BrokerName = r.OptString("bname")
	h.SetZeroIfNotFound = nil
	if v, ok := ext["setZeroIfNotFound"]; ok && v != "" {
		b := r.OptBool("setZeroIfNotFound", false)
		h.SetZeroIfNotFound = &b
	}
	return r.Err()
}

// OffsetResponseHeader is the answer to QUERY_CONSUMER_OFFSET, GET_MAX_OFFSET,
// GET_MIN_OFFSET and SEARCH_OFFSET_BY_TIMESTAMP.
type OffsetResponseHeader struct {
	Offset int64
}

// Ext renders the header.
func (h *OffsetResponseHeader) Ext() map[string]string { return ExtWriter{}.Int("offset", h.Offset) }

// SetExt reads the header.
func (h *OffsetResponseHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Offset = r.Int64("offset")
	return r.Err()
}

// UpdateConsumerOffsetRequestHeader is UPDATE_CONSUMER_OFFSET's header.
type UpdateConsumerOffsetRequestHeader struct {
	ConsumerGroup string
	Topic         string
	QueueID       int32
	CommitOffset  int64
	BrokerName    string // optional ("bname")
}

// Ext renders the header.
func (h *UpdateConsumerOffsetRequestHeader) Ext() map[string]string {
	w := ExtWriter{}
	w.Str("consumerGroup", h.ConsumerGroup).Str("topic", h.Topic).Int("queueId", int64(h.QueueID)).
		Int("commitOffset", h.CommitOffset).OptStr("bname", h.BrokerName)
	return w
}

// SetExt reads the header.
func (h *UpdateConsumerOffsetRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.ConsumerGroup = r.String("consumerGroup")
	h.Topic = r.String("topic")
	h.QueueID = r.Int32("queueId")
	h.CommitOffset = r.Int64("commitOffset")
	h.BrokerName = r.OptString("bname")
	return r.Err()
}

// QueueRequestHeader names one queue: the header of GET_MAX_OFFSET,
// GET_MIN_OFFSET and GET_EARLIEST_MSG_STORETIME.
type QueueRequestHeader struct {
	Topic      string
	QueueID    int32
	BrokerName string // optional ("bname")
}

// Ext renders the header.
func (h *QueueRequestHeader) Ext() map[string]string {
	w := ExtWriter{}
	w.Str("topic", h.Topic).Int("queueId", int64(h.QueueID)).OptStr("bname", h.BrokerName)
	return w
}

// SetExt reads the header.
func (h *QueueRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Topic = r.String("topic")
	h.QueueID = r.Int32("queueId")
	h.BrokerName = r.OptString("bname")
	return r.Err()
}

// SearchOffsetRequestHeader is SEARCH_OFFSET_BY_TIMESTAMP's header.
type SearchOffsetRequestHeader struct {
	Topic      string
	QueueID    int32
	Timestamp  int64  // Unix milliseconds
	BrokerName string // optional ("bname")
}

// Ext renders the header.
func (h *SearchOffsetRequestHeader) Ext() map[string]string {
	w := ExtWriter{}
	w.Str("topic", h.Topic).Int("queueId", int64(h.QueueID)).Int("timestamp", h.Timestamp).OptStr("bname", h.BrokerName)
	return w
}

// SetExt reads the header.
func (h *SearchOffsetRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Topic = r.String("topic")
	h.QueueID = r.Int32("queueId")
	h.Timestamp = r.Int64("timestamp")
	h.BrokerName = r.OptString("bname")
	return r.Err()
}

// TimestampResponseHeader is GET_EARLIEST_MSG_STORETIME's answer.
type TimestampResponseHeader struct {
	Timestamp int64
}

// Ext renders the header.
func (h *TimestampResponseHeader) Ext() map[string]string {
	return ExtWriter{}.Int("timestamp", h.Timestamp)
}

// SetExt reads the header.
func (h *TimestampResponseHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Timestamp = r.Int64("timestamp")
	return r.Err()
}

// QueryMessageRequestHeader is QUERY_MESSAGE's header (messages by key).
type QueryMessageRequestHeader struct {
	Topic          string
	Key            string
	MaxNum         int32
	BeginTimestamp int64
	EndTimestamp   int64
}

// Ext renders the header.
func (h *QueryMessageRequestHeader) Ext() map[string]string {
	w := ExtWriter{}
	w.Str("topic", h.Topic).Str("key", h.Key).Int("maxNum", int64(h.MaxNum)).
		Int("beginTimestamp", h.BeginTimestamp).Int("endTimestamp", h.EndTimestamp)
	return w
}

// SetExt reads the header.
func (h *QueryMessageRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Topic = r.String("topic")
	h.Key = r.String("key")
	h.MaxNum = r.Int32("maxNum")
	h.BeginTimestamp = r.Int64("beginTimestamp")
	h.EndTimestamp = r.Int64("endTimestamp")
	return r.Err()
}

// QueryMessageResponseHeader is QUERY_MESSAGE's answer.
type QueryMessageResponseHeader struct {
	IndexLastUpdateTimestamp int64
	IndexLastUpdatePhyoffset int64
}

// Ext renders the header.
func (h *QueryMessageResponseHeader) Ext() map[string]string {
	w := ExtWriter{}
	w.Int("indexLastUpdateTimestamp", h.IndexLastUpdateTimestamp).Int("indexLastUpdatePhyoffset", h.IndexLastUpdatePhyoffset)
	return w
}

// SetExt reads the header.
func (h *QueryMessageResponseHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.IndexLastUpdateTimestamp = r.Int64("indexLastUpdateTimestamp")
	h.IndexLastUpdatePhyoffset = r.Int64("indexLastUpdatePhyoffset")
	return r.Err()
}

// ViewMessageRequestHeader is VIEW_MESSAGE_BY_ID's header: the commit-log
// offset decoded from an offset message id.
type ViewMessageRequestHeader struct {
	Offset int64
}

// Ext renders the header.
func (h *ViewMessageRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Int("offset", h.Offset)
}

// SetExt reads the header.
func (h *ViewMessageRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Offset = r.Int64("offset")
	return r.Err()
}

// CreateTopicRequestHeader is UPDATE_AND_CREATE_TOPIC's header.
type CreateTopicRequestHeader struct {
	Topic           string
	DefaultTopic    string // optional, ignored
	ReadQueueNums   int32
	WriteQueueNums  int32
	Perm            int32
	TopicFilterType string // optional, default SINGLE_TAG
	TopicSysFlag    int32  // optional
	Order           bool   // optional
	Attributes      string // optional, RocketMQ 5 "+k=v,..." syntax; kept as given
}

// Ext renders the header.
func (h *CreateTopicRequestHeader) Ext() map[string]string {
	w := ExtWriter{}
	w.Str("topic", h.Topic).OptStr("defaultTopic", h.DefaultTopic).Int("readQueueNums", int64(h.ReadQueueNums)).
		Int("writeQueueNums", int64(h.WriteQueueNums)).Int("perm", int64(h.Perm)).
		OptStr("topicFilterType", h.TopicFilterType).Int("topicSysFlag", int64(h.TopicSysFlag)).Bool("order", h.Order).
		OptStr("attributes", h.Attributes)
	return w
}

// SetExt reads the header.
func (h *CreateTopicRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Topic = r.String("topic")
	h.DefaultTopic = r.OptString("defaultTopic")
	h.ReadQueueNums = r.Int32("readQueueNums")
	h.WriteQueueNums = r.Int32("writeQueueNums")
	h.Perm = r.Int32("perm")
	h.TopicFilterType = r.OptString("topicFilterType")
	h.TopicSysFlag = r.OptInt32("topicSysFlag", 0)
	h.Order = r.OptBool("order", false)
	h.Attributes = r.OptString("attributes")
	return r.Err()
}

// TopicRequestHeader names a topic: the header of DELETE_TOPIC_IN_BROKER and
// GET_TOPIC_STATS_INFO.
type TopicRequestHeader struct {
	Topic string
}

// Ext renders the header.
func (h *TopicRequestHeader) Ext() map[string]string { return ExtWriter{}.Str("topic", h.Topic) }

// SetExt reads the header.
func (h *TopicRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Topic = r.String("topic")
	return r.Err()
}

// ConsumerGroupRequestHeader names a consumer group: the header of
// GET_CONSUMER_LIST_BY_GROUP, GET_CONSUMER_CONNECTION_LIST and
// NOTIFY_CONSUMER_IDS_CHANGED.
type ConsumerGroupRequestHeader struct {
	ConsumerGroup string
}

// Ext renders the header.
func (h *ConsumerGroupRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("consumerGroup", h.ConsumerGroup)
}

// SetExt reads the header.
func (h *ConsumerGroupRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.ConsumerGroup = r.String("consumerGroup")
	return r.Err()
}

// GetConsumeStatsRequestHeader is GET_CONSUME_STATS's header.
type GetConsumeStatsRequestHeader struct {
	ConsumerGroup string
	Topic         string // optional: every topic the group has offsets for
}

// Ext renders the header.
func (h *GetConsumeStatsRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("consumerGroup", h.ConsumerGroup).OptStr("topic", h.Topic)
}

// SetExt reads the header.
func (h *GetConsumeStatsRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.ConsumerGroup = r.String("consumerGroup")
	h.Topic = r.OptString("topic")
	return r.Err()
}

// UnregisterClientRequestHeader is UNREGISTER_CLIENT's header (Java clients
// only; rocketmq-client-go just closes its connections).
type UnregisterClientRequestHeader struct {
	ClientID      string
	ProducerGroup string // optional
	ConsumerGroup string // optional
}

// Ext renders the header.
func (h *UnregisterClientRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("clientID", h.ClientID).OptStr("producerGroup", h.ProducerGroup).OptStr("consumerGroup", h.ConsumerGroup)
}

// SetExt reads the header.
func (h *UnregisterClientRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.ClientID = r.String("clientID")
	h.ProducerGroup = r.OptString("producerGroup")
	h.ConsumerGroup = r.OptString("consumerGroup")
	return r.Err()
}

// HeartbeatResponseExt is the ext a broker answers HEART_BEAT with: the
// client learns the broker takes the v2 heartbeat and that subscriptions
// are applied.
func HeartbeatResponseExt() map[string]string {
	return map[string]string{"IS_SUPPORT_HEART_BEAT_V2": strconv.FormatBool(true), "IS_SUB_CHANGE": strconv.FormatBool(true)}
}
