package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
)

// Stored-message magic codes (RocketMQ's MessageDecoder).
const (
	MessageMagicV1   uint32 = 0xDAA320A7
	MessageMagicV2   uint32 = 0xDAA320AB
	BlankMagicCode   uint32 = 0xCBD43194
	storedFixedV4Len        = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2 // 91
)

// Message system flags (MessageSysFlag).
const (
	SysFlagCompressed         int32 = 0x1
	SysFlagMultiTags          int32 = 0x2
	SysFlagTransactionPrep    int32 = 0x4
	SysFlagTransactionCommit  int32 = 0x8
	SysFlagTransactionRollbck int32 = 0xC
	SysFlagBornHostV6         int32 = 0x10
	SysFlagStoreHostV6        int32 = 0x20
	SysFlagTransactionMask    int32 = 0xC
)

// MessageExt is one message as stored in the commit log and as carried in a
// pull response body. The store assigns QueueOffset, CommitLogOffset,
// StoreTimestamp, BodyCRC and StoreSize on append.
type MessageExt struct {
	StoreSize                 int32
	BodyCRC                   uint32
	QueueID                   int32
	Flag                      int32
	QueueOffset               int64
	CommitLogOffset           int64
	SysFlag                   int32
	BornTimestamp             int64
	BornHost                  netip.AddrPort
	StoreTimestamp            int64
	StoreHost                 netip.AddrPort
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
	Body                      []byte
	Topic                     string
	// Properties is the raw properties string (key 0x01 value 0x02 ...);
	// use ParseProperties / the Property helpers to read it.
	Properties string
}

// ErrShortRecord means the bytes end before the record does.
var ErrShortRecord = errors.New("protocol: stored message truncated")

// StoredSize returns the encoded size of m (v1 layout).
func (m *MessageExt) StoredSize() int {
	n := storedFixedV4Len + len(m.Body) + len(m.Topic) + len(m.Properties)
	if m.BornHost.Addr().Is6() && !m.BornHost.Addr().Is4In6() {
		n += 12
	}
	if m.StoreHost.Addr().Is6() && !m.StoreHost.Addr().Is4In6() {
		n += 12
	}
	return n
}

// Validate checks the limits the v1 encoding imposes.
func (m *MessageExt) Validate() error {
	if len(m.Topic) == 0 || len(m.Topic) > MaxTopicLength {
		return fmt.Errorf("topic length %d outside 1..%d", len(m.Topic), MaxTopicLength)
	}
	if len(m.Properties) > MaxPropertiesLength {
		return fmt.Errorf("properties of %d bytes exceed %d", len(m.Properties), MaxPropertiesLength)
	}
	return nil
}

func appendHost(dst []byte, ap netip.AddrPort) []byte {
	a := ap.Addr().Unmap()
	switch {
	case !a.IsValid(): // no host known: 0.0.0.0 (As4 panics on the zero Addr)
		dst = append(dst, 0, 0, 0, 0)
	case a.Is4():
		b := a.As4()
		dst = append(dst, b[:]...)
	default:
		b := a.As16()
		dst = append(dst, b[:]...)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(ap.Port()))
}

func hostIsV6(ap netip.AddrPort) bool {
	a := ap.Addr().Unmap()
	return a.IsValid() && !a.Is4()
}

// AppendStoredMessage appends m in the v1 stored format. The IPv6 sysflag
// bits and StoreSize are set from the hosts; BodyCRC is computed from Body.
// The caller must have checked Validate.
func AppendStoredMessage(dst []byte, m *MessageExt) []byte {
	m.SysFlag &^= SysFlagBornHostV6 | SysFlagStoreHostV6
	if hostIsV6(m.BornHost) {
		m.SysFlag |= SysFlagBornHostV6
	}
	if hostIsV6(m.StoreHost) {
		m.SysFlag |= SysFlagStoreHostV6
	}
	m.StoreSize = int32(m.StoredSize())
	m.BodyCRC = crc32.ChecksumIEEE(m.Body) & 0x7FFFFFFF
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.StoreSize))
	dst = binary.BigEndian.AppendUint32(dst, MessageMagicV1)
	dst = binary.BigEndian.AppendUint32(dst, m.BodyCRC)
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.QueueID))
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.Flag))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.QueueOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.CommitLogOffset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.SysFlag))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.BornTimestamp))
	dst = appendHost(dst, m.BornHost)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.StoreTimestamp))
	dst = appendHost(dst, m.StoreHost)
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.ReconsumeTimes))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.PreparedTransactionOffset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(m.Body)))
	dst = append(dst, m.Body...)
	dst = append(dst, byte(len(m.Topic)))
	dst = append(dst, m.Topic...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(m.Properties)))
	dst = append(dst, m.Properties...)
	return dst
}

// Offsets of fields inside a stored record that the store patches or reads
// without a full decode.
const (
	StoredOffsetQueueOffset     = 20
	StoredOffsetCommitLogOffset = 28
	StoredOffsetSysFlag         = 36
	StoredOffsetBornTimestamp   = 40
)

// DecodeStoredMessage decodes the record at the start of b (v1, v2 or
// MessageMagicCRC magic) and returns it with its length. Body aliases b
// unless copyBody is set. When verifyCRC is set the record's CRC32C is
// verified (MessageMagicCRC), else its body CRC.
func DecodeStoredMessage(b []byte, copyBody, verifyCRC bool) (*MessageExt, int, error) {
	m := &MessageExt{}
	n, err := DecodeStoredMessageInto(m, b, copyBody, verifyCRC)
	if err != nil {
		return nil, 0, err
	}
	return m, n, nil
}

// DecodeStoredMessageInto is DecodeStoredMessage decoding into *m (every
// field set), so a caller decoding many records can reuse one MessageExt:
// a topic equal to m's previous Topic reuses that string.
func DecodeStoredMessageInto(m *MessageExt, b []byte, copyBody, verifyCRC bool) (int, error) {
	prevTopic := m.Topic
	if len(b) < 8 {
		return 0, ErrShortRecord
	}
	size := int(int32(binary.BigEndian.Uint32(b)))
	magic := binary.BigEndian.Uint32(b[4:])
	if !IsStoredMagic(magic) {
		return 0, fmt.Errorf("protocol: bad stored-message magic %#x", magic)
	}
	if size < storedFixedV4Len || size > len(b) {
		if size > len(b) && size >= storedFixedV4Len {
			return 0, ErrShortRecord
		}
		return 0, fmt.Errorf("protocol: stored-message size %d is invalid", size)
	}
	fields := size // where the fields end: before the CRC32C trailer, if any
	if magic == MessageMagicCRC {
		if size < storedFixedV4Len+recordCRCLen {
			return 0, fmt.Errorf("protocol: stored-message size %d is invalid", size)
		}
		fields -= recordCRCLen
	}
	r := reader{b: b[:fields], off: 8}
	*m = MessageExt{StoreSize: int32(size)}
	m.BodyCRC = r.u32()
	m.QueueID = int32(r.u32())
	m.Flag = int32(r.u32())
	m.QueueOffset = int64(r.u64())
	m.CommitLogOffset = int64(r.u64())
	m.SysFlag = int32(r.u32())
	m.BornTimestamp = int64(r.u64())
	m.BornHost = r.host(m.SysFlag&SysFlagBornHostV6 != 0)
	m.StoreTimestamp = int64(r.u64())
	m.StoreHost = r.host(m.SysFlag&SysFlagStoreHostV6 != 0)
	m.ReconsumeTimes = int32(r.u32())
	m.PreparedTransactionOffset = int64(r.u64())
	bodyLen := int(int32(r.u32()))
	body := r.bytes(bodyLen)
	var topicLen int
	if magic == MessageMagicV2 {
		topicLen = int(r.u16())
	} else {
		topicLen = int(r.u8())
	}
	if topic := r.bytes(topicLen); string(topic) == prevTopic {
		m.Topic = prevTopic
	} else {
		m.Topic = string(topic)
	}
	propLen := int(r.u16())
	m.Properties = string(r.bytes(propLen))
	if r.err != nil {
		return 0, fmt.Errorf("protocol: stored message at size %d: %w", size, r.err)
	}
	if r.off != fields {
		return 0, fmt.Errorf("protocol: stored message declares %d bytes but its fields take %d", size, r.off+size-fields)
	}
	switch {
	case !verifyCRC:
	case magic == MessageMagicCRC:
		if RecordCRC(b[:size]) != binary.BigEndian.Uint32(b[fields:]) {
			return 0, fmt.Errorf("%w at commit-log offset %d", ErrRecordCRC, m.CommitLogOffset)
		}
	case crc32.ChecksumIEEE(body)&0x7FFFFFFF != m.BodyCRC:
		return 0, fmt.Errorf("%w at commit-log offset %d", ErrBodyCRC, m.CommitLogOffset)
	}
	if copyBody {
		m.Body = append([]byte(nil), body...)
	} else {
		m.Body = body
	}
	return size, nil
}

type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) need(n int) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || r.off+n > len(r.b) {
		r.err = ErrShortRecord
		return false
	}
	return true
}

func (r *reader) u8() uint8 {
	if !r.need(1) {
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) u16() uint16 {
	if !r.need(2) {
		return 0
	}
	v := binary.BigEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}

func (r *reader) u32() uint32 {
	if !r.need(4) {
		return 0
	}
	v := binary.BigEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) u64() uint64 {
	if !r.need(8) {
		return 0
	}
	v := binary.BigEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

func (r *reader) bytes(n int) []byte {
	if !r.need(n) {
		return nil
	}
	v := r.b[r.off : r.off+n]
	r.off += n
	return v
}

func (r *reader) host(v6 bool) netip.AddrPort {
	var a netip.Addr
	if v6 {
		b := r.bytes(16)
		if b == nil {
			return netip.AddrPort{}
		}
		a = netip.AddrFrom16([16]byte(b))
	} else {
		b := r.bytes(4)
		if b == nil {
			return netip.AddrPort{}
		}
		a = netip.AddrFrom4([4]byte(b))
	}
	port := r.u32()
	return netip.AddrPortFrom(a, uint16(port))
}
