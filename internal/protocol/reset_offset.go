package protocol

import (
	"bytes"
	"encoding/json"
)

// ResetOffsetLatest is the ResetOffsetRequestHeader timestamp meaning "each
// queue's max offset" (skip everything stored), as RocketMQ's broker reads
// -1. Timestamp 0 is every queue's first stored message.
const ResetOffsetLatest = -1

// ResetOffsetRequestHeader is the header of INVOKE_BROKER_TO_RESET_OFFSET
// (an admin asks a broker to reset a group's offsets of a topic, `mqadmin
// resetOffsetByTime`) and of RESET_CONSUMER_CLIENT_OFFSET (the broker then
// tells each connected consumer of the group, which restarts its queues of
// the topic from the offsets in the body).
type ResetOffsetRequestHeader struct {
	Topic string
	Group string
	// Timestamp is in Unix milliseconds: each queue moves to its first
	// message stored at or after it; ResetOffsetLatest moves to the end.
	Timestamp int64
	// IsForce also moves offsets forward; without it a queue only moves
	// back (RocketMQ's meaning).
	IsForce bool
}

// Ext renders the header.
func (h *ResetOffsetRequestHeader) Ext() map[string]string {
	w := ExtWriter{}
	w.Str("topic", h.Topic).Str("group", h.Group).Int("timestamp", h.Timestamp).Bool("isForce", h.IsForce)
	return w
}

// SetExt reads the header.
func (h *ResetOffsetRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Topic = r.String("topic")
	h.Group = r.String("group")
	h.Timestamp = r.Int64("timestamp")
	h.IsForce = r.OptBool("isForce", false)
	return r.Err()
}

// ResetOffsetBody is the body of RESET_CONSUMER_CLIENT_OFFSET and of
// INVOKE_BROKER_TO_RESET_OFFSET's answer: the new offset of each queue.
type ResetOffsetBody struct {
	OffsetTable map[MessageQueue]int64
}

// Encode writes the table in fastjson's object-keyed form, as a Java broker
// does: `{"offsetTable":{{"brokerName":…,"queueId":0,"topic":…}:12}}`.
// rocketmq-client-go parses exactly this shape (no spaces), so it must not
// change.
func (b *ResetOffsetBody) Encode() []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"offsetTable":`)
	writeQueueKeyedMap(&buf, b.OffsetTable)
	buf.WriteString(`}`)
	return buf.Bytes()
}

// DecodeResetOffsetBody parses Encode's output, and also the gson form
// (`{"offsetTable":[[{queue},12],…]}`) some brokers send.
func DecodeResetOffsetBody(data []byte) (*ResetOffsetBody, error) {
	b := &ResetOffsetBody{OffsetTable: map[MessageQueue]int64{}}
	var gson struct {
		OffsetTable [][2]json.RawMessage `json:"offsetTable"`
	}
	if json.Unmarshal(data, &gson) == nil {
		for _, pair := range gson.OffsetTable {
			var q MessageQueue
			var off int64
			if err := json.Unmarshal(pair[0], &q); err != nil {
				return nil, err
			}
			if err := json.Unmarshal(pair[1], &off); err != nil {
				return nil, err
			}
			b.OffsetTable[q] = off
		}
		return b, nil
	}
	var top map[string]json.RawMessage
	if err := decodeQueueKeyedTop(data, &top); err != nil {
		return nil, err
	}
	if err := readQueueKeyedMap(top["offsetTable"], b.OffsetTable); err != nil {
		return nil, err
	}
	return b, nil
}
