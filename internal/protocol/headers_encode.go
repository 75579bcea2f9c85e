package protocol

import "github.com/zonemq/zonemq/internal/remoting"

// The send and pull paths' headers written straight into frames (remoting.ExtHeader):
// the same fields as their Ext methods, without a map. Keep each in step
// with its Ext: TestHeadersEncodeExtMatchExt compares them.

// EncodeExt writes the header as Ext does.
func (h *SendMessageRequestHeader) EncodeExt(e *remoting.ExtEncoder) {
	h.encodeExt(e, false)
}

// EncodeExt writes the header with the short keys a–n, as Ext does.
func (h *SendMessageRequestHeaderV2) EncodeExt(e *remoting.ExtEncoder) {
	h.encodeExt(e, true)
}

// encodeExt writes the fields under their long or short (sendV2Keys) keys.
func (h *SendMessageRequestHeader) encodeExt(e *remoting.ExtEncoder, short bool) {
	col := 1
	if short {
		col = 0
	}
	key := func(i int) string { return sendV2Keys[i][col] }
	e.Str(key(0), h.ProducerGroup)
	e.Str(key(1), h.Topic)
	e.Str(key(2), h.DefaultTopic)
	e.Int(key(3), int64(h.DefaultTopicQueueNums))
	e.Int(key(4), int64(h.QueueID))
	e.Int(key(5), int64(h.SysFlag))
	e.Int(key(6), h.BornTimestamp)
	e.Int(key(7), int64(h.Flag))
	e.Str(key(8), h.Properties)
	e.Int(key(9), int64(h.ReconsumeTimes))
	e.Bool(key(10), h.UnitMode)
	if h.HasMaxReconsumeTimes() {
		e.Int(key(11), int64(h.MaxReconsumeTimes))
	}
	e.Bool(key(12), h.Batch)
	e.OptStr(key(13), h.BrokerName)
	if h.Retry {
		e.Bool(ExtSendRetry, true)
	}
}

// EncodeExt writes the header as Ext does.
func (h *SendMessageResponseHeader) EncodeExt(e *remoting.ExtEncoder) {
	e.Str("msgId", h.MsgID)
	e.Int("queueId", int64(h.QueueID))
	e.Int("queueOffset", h.QueueOffset)
	e.OptStr("transactionId", h.TransactionID)
	e.Str(PropertyMsgRegion, h.MsgRegion)
	e.Bool(PropertyTraceSwitch, h.TraceOn)
	if h.BrokerEpoch != 0 {
		e.Int(ExtBrokerEpoch, h.BrokerEpoch)
	}
}

// EncodeExt writes the header as Ext does.
func (h *PullMessageRequestHeader) EncodeExt(e *remoting.ExtEncoder) {
	e.Str("consumerGroup", h.ConsumerGroup)
	e.Str("topic", h.Topic)
	e.Int("queueId", int64(h.QueueID))
	e.Int("queueOffset", h.QueueOffset)
	e.Int("maxMsgNums", int64(h.MaxMsgNums))
	e.Int("sysFlag", int64(h.SysFlag))
	e.Int("commitOffset", h.CommitOffset)
	e.Int("suspendTimeoutMillis", h.SuspendTimeoutMillis)
	e.Str("subscription", h.Subscription)
	e.Int("subVersion", h.SubVersion)
	e.OptStr("expressionType", h.ExpressionType)
	e.OptStr("bname", h.BrokerName)
	if h.MaxMsgBytes != 0 {
		e.Int("maxMsgBytes", int64(h.MaxMsgBytes))
	}
}

// EncodeExt writes the header as Ext does.
func (h *PullMessageResponseHeader) EncodeExt(e *remoting.ExtEncoder) {
	e.Int("suggestWhichBrokerId", h.SuggestWhichBrokerID)
	e.Int("nextBeginOffset", h.NextBeginOffset)
	e.Int("minOffset", h.MinOffset)
	e.Int("maxOffset", h.MaxOffset)
}
