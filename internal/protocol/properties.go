package protocol

import (
	"strconv"
	"strings"
)

// Message property names (RocketMQ's MessageConst).
const (
	PropertyKeys                 = "KEYS"
	PropertyTags                 = "TAGS"
	PropertyWaitStoreMsgOK       = "WAIT"
	PropertyDelayLevel           = "DELAY"
	PropertyRetryTopic           = "RETRY_TOPIC"
	PropertyRealTopic            = "REAL_TOPIC"
	PropertyRealQueueID          = "REAL_QID"
	PropertyTransactionPrepared  = "TRAN_MSG"
	PropertyProducerGroup        = "PGROUP"
	PropertyMinOffset            = "MIN_OFFSET"
	PropertyMaxOffset            = "MAX_OFFSET"
	PropertyUniqClientMessageID  = "UNIQ_KEY"
	PropertyOriginMessageID      = "ORIGIN_MESSAGE_ID"
	PropertyReconsumeTime        = "RECONSUME_TIME"
	PropertyMaxReconsumeTimes    = "MAX_RECONSUME_TIMES"
	PropertyConsumeStartTime     = "CONSUME_START_TIME"
	PropertyMsgRegion            = "MSG_REGION"
	PropertyTraceSwitch          = "TRACE_ON"
	PropertyCluster              = "CLUSTER"
	PropertyTimerDeliverMS       = "TIMER_DELIVER_MS"
	PropertyDLQOriginTopic       = "DLQ_ORIGIN_TOPIC"
	PropertyDLQOriginMessageID   = "DLQ_ORIGIN_MESSAGE_ID"
	PropertyTransactionID        = "__transactionId__"
	PropertyShardingKey          = "SHARDING_KEY"
	propertyNameValueSeparator   = '\x01'
	propertySeparator            = '\x02'
	propertyNameValueSeparatorSt = "\x01"
	propertySeparatorSt          = "\x02"
)

// systemProperties are the names RocketMQ's clients and brokers set
// themselves, never a user property (what the RocketMQ 5 clients show as
// user properties leaves them out).
var systemProperties = map[string]bool{
	PropertyKeys: true, PropertyTags: true, PropertyWaitStoreMsgOK: true, PropertyDelayLevel: true,
	PropertyRetryTopic: true, PropertyRealTopic: true, PropertyRealQueueID: true, PropertyTransactionPrepared: true,
	PropertyProducerGroup: true, PropertyMinOffset: true, PropertyMaxOffset: true, PropertyUniqClientMessageID: true,
	PropertyOriginMessageID: true, PropertyReconsumeTime: true, PropertyMaxReconsumeTimes: true,
	PropertyConsumeStartTime: true, PropertyMsgRegion: true, PropertyTraceSwitch: true, PropertyCluster: true,
	PropertyTimerDeliverMS: true, PropertyDLQOriginTopic: true, PropertyDLQOriginMessageID: true,
	PropertyTransactionID: true, "__SHARDINGKEY": true, "TRACE_CONTEXT": true, "BORN_HOST": true,
}

// IsSystemProperty reports whether name is a property RocketMQ sets itself.
func IsSystemProperty(name string) bool { return systemProperties[name] }

// ParseProperties decodes a properties string into a map. Items without a
// separator are skipped, as the Java decoder does.
func ParseProperties(s string) map[string]string {
	m := make(map[string]string, 4)
	for len(s) > 0 {
		var item string
		if i := strings.IndexByte(s, propertySeparator); i >= 0 {
			item, s = s[:i], s[i+1:]
		} else {
			item, s = s, ""
		}
		k, v, ok := strings.Cut(item, propertyNameValueSeparatorSt)
		if !ok || k == "" {
			continue
		}
		m[k] = v
	}
	return m
}

// Property returns the value of one property without building a map.
func Property(s, name string) (string, bool) {
	for len(s) > 0 {
		var item string
		if i := strings.IndexByte(s, propertySeparator); i >= 0 {
			item, s = s[:i], s[i+1:]
		} else {
			item, s = s, ""
		}
		if len(item) > len(name) && item[len(name)] == propertyNameValueSeparator && item[:len(name)] == name {
			return item[len(name)+1:], true
		}
	}
	return "", false
}

// EncodeProperties encodes m as a properties string, keys in sorted order so
// the output is deterministic.
func EncodeProperties(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	var b strings.Builder
	for _, k := range sortedKeys(m) {
		b.WriteString(k)
		b.WriteByte(propertyNameValueSeparator)
		b.WriteString(m[k])
		b.WriteByte(propertySeparator)
	}
	return b.String()
}

// AppendProperty appends one property in its wire form to dst: a sender
// that knows its few properties writes them in order (EncodeProperties
// sorts by name) without building a map.
func AppendProperty(dst []byte, name, value string) []byte {
	dst = append(dst, name...)
	dst = append(dst, propertyNameValueSeparator)
	dst = append(dst, value...)
	return append(dst, propertySeparator)
}

// AppendPropertyInt is AppendProperty of a decimal integer.
func AppendPropertyInt(dst []byte, name string, value int64) []byte {
	dst = append(dst, name...)
	dst = append(dst, propertyNameValueSeparator)
	dst = strconv.AppendInt(dst, value, 10)
	return append(dst, propertySeparator)
}

// AppendPropertyWords is AppendProperty of words joined by spaces (the
// KEYS property).
func AppendPropertyWords(dst []byte, name string, words []string) []byte {
	dst = append(dst, name...)
	dst = append(dst, propertyNameValueSeparator)
	for i, w := range words {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, w...)
	}
	return append(dst, propertySeparator)
}

// TagsHashCode is the consume-queue tag code: Java's String.hashCode of the
// tag, which is what the Go and Java clients put in a subscription's codeSet.
func TagsHashCode(tags string) int64 {
	if tags == "" {
		return 0
	}
	var h int32
	for _, r := range utf16Units(tags) {
		h = 31*h + int32(r)
	}
	return int64(h)
}

// utf16Units returns s as UTF-16 code units, the unit Java hashes.
func utf16Units(s string) []uint16 {
	out := make([]uint16, 0, len(s))
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			out = append(out, uint16(0xD800+(r>>10)), uint16(0xDC00+(r&0x3FF)))
			continue
		}
		out = append(out, uint16(r))
	}
	return out
}
