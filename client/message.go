package client

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// Message is a message to send.
type Message struct {
	// Topic is where the message goes: 1–127 characters from
	// [%|a-zA-Z0-9_-].
	Topic string
	// Tags is the message's tag, which consumers filter on ("" = none).
	Tags string
	// Keys index the message (RocketMQ's KEYS property).
	Keys []string
	// Body is the payload; it must not be empty. Bodies of CompressThreshold
	// bytes or more travel zlib-compressed and are decompressed on receipt.
	// A received (uncompressed) Body shares the buffer of the pull answer
	// that carried it, with the other messages of that batch: copy it to
	// keep a few bytes of it for long.
	Body []byte
	// Properties are user properties. Names must not contain the bytes 0x01
	// or 0x02, and must not be RocketMQ's system names (KEYS, TAGS, ...).
	Properties map[string]string
	// DelayLevel, if positive, delays delivery by the broker's delay level
	// (RocketMQ: 1 = 1 s, 2 = 5 s, 3 = 10 s, ...).
	DelayLevel int
	// DeliverAt, if set, holds the message on the broker until that time
	// (RocketMQ 5's timer messages, the TIMER_DELIVER_MS property, rounded
	// up to the millisecond). A time already passed delivers at once; brokers refuse
	// one further ahead than their --timer-max-delay (72 h by default). It
	// cannot be combined with DelayLevel or used in a batch.
	DeliverAt time.Time
	// Flag is RocketMQ's user flag, carried as is.
	Flag int32
	// ID, if set, is the message's client id (RocketMQ's UNIQ_KEY, what
	// SendResult.MsgID and consumers' MsgID show) instead of one the
	// producer makes: 1–128 printable ASCII characters without spaces or
	// commas. The gRPC access point keeps the id a RocketMQ 5 client gave
	// its message this way.
	ID string
	// Resent marks a send of a message (ID set) that an earlier send may
	// have stored already — its answer was lost, say. The broker then
	// answers with that copy, when it has one, instead of storing a second
	// (the SDK marks its own retries so; the access point marks a RocketMQ
	// 5 client's). Only for single sends; a batch ignores it.
	Resent bool
}

// MessageExt is a message as a consumer receives it.
type MessageExt struct {
	Message
	// MsgID is the client-assigned unique id (UNIQ_KEY), or OffsetMsgID if
	// the sender set none.
	MsgID string
	// OffsetMsgID is the broker's id: store host and commit-log offset.
	OffsetMsgID string
	// QueueID and QueueOffset place the message in its queue.
	QueueID     int
	QueueOffset int64
	// BrokerName, BrokerAddr and IDC are the broker the message was read
	// from (for a redelivered message: the broker of its retry queue).
	BrokerName string
	BrokerAddr string
	IDC        string
	// StoreTimestamp and BornTimestamp are when the broker stored the
	// message and when the producer made it.
	StoreTimestamp time.Time
	BornTimestamp  time.Time
	// BornHost and StoreHost are "ip:port" of the producer and the broker.
	BornHost  string
	StoreHost string
	// ReconsumeTimes counts earlier deliveries that asked for a retry.
	ReconsumeTimes int
	// CommitLogOffset is the message's position in the broker's commit log.
	CommitLogOffset int64
	// SysFlag is RocketMQ's message system flag, as stored.
	SysFlag int32
}

// MessageQueue names one queue of a topic on one broker.
type MessageQueue struct {
	Topic      string
	BrokerName string
	QueueID    int
}

// String renders the queue as "topic@broker#id".
func (q MessageQueue) String() string {
	return fmt.Sprintf("%s@%s#%d", q.Topic, q.BrokerName, q.QueueID)
}

func (q MessageQueue) internal() protocol.MessageQueue {
	return protocol.MessageQueue{Topic: q.Topic, BrokerName: q.BrokerName, QueueID: q.QueueID}
}

// systemProperties are property names the client sets itself; a user
// property of the same name is refused.
var systemProperties = map[string]bool{
	protocol.PropertyKeys: true, protocol.PropertyTags: true, protocol.PropertyDelayLevel: true,
	protocol.PropertyUniqClientMessageID: true, protocol.PropertyRetryTopic: true, protocol.PropertyReconsumeTime: true,
	protocol.PropertyMaxReconsumeTimes: true, protocol.PropertyOriginMessageID: true, protocol.PropertyRealTopic: true,
	protocol.PropertyRealQueueID: true, protocol.PropertyTransactionPrepared: true, protocol.PropertyProducerGroup: true,
}

// validate checks what the broker would refuse, so a bad message fails at
// once instead of after a round trip per broker.
func (m *Message) validate(maxSize int) error {
	if m == nil {
		return fmt.Errorf("%w: nil message", ErrInvalidMessage)
	}
	if err := protocol.ValidateTopic(m.Topic); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidMessage, err)
	}
	if protocol.IsSystemTopic(m.Topic) {
		return fmt.Errorf("%w: topic %s is reserved for the broker", ErrInvalidMessage, m.Topic)
	}
	if len(m.Body) == 0 {
		return fmt.Errorf("%w: empty body", ErrInvalidMessage)
	}
	if len(m.Body) > maxSize {
		return fmt.Errorf("%w: body of %d bytes exceeds %d", ErrInvalidMessage, len(m.Body), maxSize)
	}
	if m.DelayLevel < 0 {
		return fmt.Errorf("%w: negative delay level", ErrInvalidMessage)
	}
	if m.DelayLevel > 0 && !m.DeliverAt.IsZero() {
		return fmt.Errorf("%w: DelayLevel and DeliverAt are both set", ErrInvalidMessage)
	}
	for k, v := range m.Properties {
		if k == "" || strings.ContainsAny(k, "\x01\x02") || strings.ContainsAny(v, "\x01\x02") {
			return fmt.Errorf("%w: property %q contains a separator byte", ErrInvalidMessage, k)
		}
		if systemProperties[k] {
			return fmt.Errorf("%w: property %s is reserved", ErrInvalidMessage, k)
		}
	}
	for _, k := range m.Keys {
		if strings.ContainsAny(k, " \x01\x02") {
			return fmt.Errorf("%w: key %q contains a space or separator byte", ErrInvalidMessage, k)
		}
	}
	if strings.ContainsAny(m.Tags, "\x01\x02") || strings.Contains(m.Tags, "||") {
		return fmt.Errorf("%w: tag %q contains a separator", ErrInvalidMessage, m.Tags)
	}
	if m.ID != "" && !validMessageID(m.ID) {
		return fmt.Errorf("%w: id %q: want 1-128 printable ASCII characters, no space or comma", ErrInvalidMessage, m.ID)
	}
	return nil
}

// validMessageID reports whether id can be a Message.ID.
func validMessageID(id string) bool {
	if len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == ',' {
			return false
		}
	}
	return true
}

// wireProperties renders the properties the message travels with: the user
// properties plus TAGS, KEYS, DELAY, TIMER_DELIVER_MS and the given
// UNIQ_KEY.
func (m *Message) wireProperties(uniqKey string) map[string]string {
	p := make(map[string]string, len(m.Properties)+4)
	for k, v := range m.Properties {
		p[k] = v
	}
	if m.Tags != "" {
		p[protocol.PropertyTags] = m.Tags
	}
	if len(m.Keys) > 0 {
		p[protocol.PropertyKeys] = strings.Join(m.Keys, " ")
	}
	if m.DelayLevel > 0 {
		p[protocol.PropertyDelayLevel] = fmt.Sprint(m.DelayLevel)
	}
	if !m.DeliverAt.IsZero() {
		p[protocol.PropertyTimerDeliverMS] = strconv.FormatInt(deliverAtMillis(m.DeliverAt), 10)
	}
	if uniqKey != "" {
		p[protocol.PropertyUniqClientMessageID] = uniqKey
	}
	return p
}

// encodeProperties is wireProperties in its wire form. A message without
// user properties (the usual case) is written straight from its fields, in
// the order EncodeProperties gives (sorted by name), with no map: one
// allocation, the string.
func (m *Message) encodeProperties(uniqKey string) string {
	if len(m.Properties) > 0 {
		return protocol.EncodeProperties(m.wireProperties(uniqKey))
	}
	var buf [256]byte
	b := buf[:0]
	if m.DelayLevel > 0 {
		b = protocol.AppendPropertyInt(b, protocol.PropertyDelayLevel, int64(m.DelayLevel))
	}
	if len(m.Keys) > 0 {
		b = protocol.AppendPropertyWords(b, protocol.PropertyKeys, m.Keys)
	}
	if m.Tags != "" {
		b = protocol.AppendProperty(b, protocol.PropertyTags, m.Tags)
	}
	if !m.DeliverAt.IsZero() {
		b = protocol.AppendPropertyInt(b, protocol.PropertyTimerDeliverMS, deliverAtMillis(m.DeliverAt))
	}
	if uniqKey != "" {
		b = protocol.AppendProperty(b, protocol.PropertyUniqClientMessageID, uniqKey)
	}
	return string(b)
}

// deliverAtMillis is t in Unix milliseconds, rounded up: the broker
// delivers at the millisecond, never before.
func deliverAtMillis(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
}

// zlibWriters reuses compressors: a new zlib writer allocates ~800 KB of
// tables, which made a send of a 4 KiB body ~4x slower than one of 4095 B.
var zlibWriters = sync.Pool{New: func() any {
	w, _ := zlib.NewWriterLevel(nil, 5)
	return w
}}

// compressBody zlib-compresses body as rocketmq-client-go does (level 5).
// It reports false when compression does not make the body smaller; the
// body then travels as it is.
func compressBody(body []byte) ([]byte, bool, error) {
	var buf bytes.Buffer
	buf.Grow(len(body) / 2)
	w := zlibWriters.Get().(*zlib.Writer)
	defer zlibWriters.Put(w)
	w.Reset(&buf)
	if _, err := w.Write(body); err != nil {
		return nil, false, err
	}
	if err := w.Close(); err != nil {
		return nil, false, err
	}
	if buf.Len() >= len(body) {
		return nil, false, nil
	}
	return buf.Bytes(), true, nil
}

// decompressBody inflates a zlib body, refusing to grow past limit bytes.
func decompressBody(body []byte, limit int) ([]byte, error) {
	r, err := zlib.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > limit {
		return nil, fmt.Errorf("decompressed body exceeds %d bytes", limit)
	}
	return out, nil
}

// decodeMessages decodes a pull response body into messages stamped with
// the broker they came from. It allocates per batch what the batch's
// messages share: the MessageExt values (one slice), and the strings of
// hosts seen before in the batch; bodies alias body.
func decodeMessages(body []byte, b *brokerInfo) ([]*MessageExt, error) {
	n := countRecords(body)
	out := make([]*MessageExt, 0, n)
	slab := make([]MessageExt, n)
	var (
		m     protocol.MessageExt // reused: its fields are copied out
		hosts hostStrings
	)
	for i := 0; len(body) > 0; i++ {
		size, err := protocol.DecodeStoredMessageInto(&m, body, false, false)
		if err != nil {
			return out, err
		}
		body = body[size:]
		var ext *MessageExt
		if i < len(slab) {
			ext = &slab[i]
		} else {
			ext = new(MessageExt) // a record countRecords did not see: decoding fails below
		}
		if err := fillFromStored(ext, &m, b, &hosts); err != nil {
			return out, err
		}
		out = append(out, ext)
	}
	return out, nil
}

// countRecords counts the stored records in body by their size fields,
// stopping at the first that does not fit (decoding reports it).
func countRecords(body []byte) int {
	n := 0
	for len(body) >= 4 {
		size := int(int32(binary.BigEndian.Uint32(body)))
		if size <= 0 || size > len(body) {
			break
		}
		body = body[size:]
		n++
	}
	return n
}

// hostStrings renders the born and store hosts of a batch's messages once
// each: a batch mostly comes from one broker and few producers.
type hostStrings struct {
	addrs [4]netip.AddrPort
	strs  [4]string
	n     int
}

func (h *hostStrings) String(a netip.AddrPort) string {
	for i := range h.n {
		if h.addrs[i] == a {
			return h.strs[i]
		}
	}
	s := a.String()
	if h.n < len(h.addrs) {
		h.addrs[h.n], h.strs[h.n] = a, s
		h.n++
	}
	return s
}

// fillFromStored sets *ext from a decoded stored record.
func fillFromStored(ext *MessageExt, m *protocol.MessageExt, b *brokerInfo, hosts *hostStrings) error {
	body := m.Body
	if m.SysFlag&protocol.SysFlagCompressed != 0 {
		var err error
		if body, err = decompressBody(body, 4*protocol.DefaultMaxMessageSize); err != nil {
			return fmt.Errorf("zonemq client: message at %s#%d offset %d: body: %w", m.Topic, m.QueueID, m.QueueOffset, err)
		}
	}
	props := protocol.ParseProperties(m.Properties)
	*ext = MessageExt{
		Message: Message{
			Topic:      m.Topic,
			Tags:       props[protocol.PropertyTags],
			Body:       body,
			Properties: props,
			Flag:       m.Flag,
		},
		OffsetMsgID:     protocol.OffsetMessageID(m.StoreHost, m.CommitLogOffset),
		QueueID:         int(m.QueueID),
		QueueOffset:     m.QueueOffset,
		StoreTimestamp:  time.UnixMilli(m.StoreTimestamp),
		BornTimestamp:   time.UnixMilli(m.BornTimestamp),
		BornHost:        hosts.String(m.BornHost),
		StoreHost:       hosts.String(m.StoreHost),
		ReconsumeTimes:  int(m.ReconsumeTimes),
		CommitLogOffset: m.CommitLogOffset,
		SysFlag:         m.SysFlag,
	}
	if k := props[protocol.PropertyKeys]; k != "" {
		ext.Keys = strings.Fields(k)
	}
	ext.MsgID = props[protocol.PropertyUniqClientMessageID]
	if ext.MsgID == "" {
		ext.MsgID = ext.OffsetMsgID
	}
	if b != nil {
		ext.BrokerName, ext.BrokerAddr, ext.IDC = b.name, b.readAddr(), b.idc
	}
	return nil
}
