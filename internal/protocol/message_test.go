package protocol_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

func sampleMessage() *protocol.MessageExt {
	return &protocol.MessageExt{
		QueueID:                   3,
		Flag:                      7,
		QueueOffset:               1000,
		CommitLogOffset:           123456789,
		SysFlag:                   protocol.SysFlagMultiTags | protocol.SysFlagTransactionPrep,
		BornTimestamp:             1796009302583,
		BornHost:                  netip.MustParseAddrPort("192.0.2.2:52000"),
		StoreTimestamp:            1796009302590,
		StoreHost:                 netip.MustParseAddrPort("127.0.0.1:19911"),
		ReconsumeTimes:            2,
		PreparedTransactionOffset: 55,
		Body:                      []byte("hello, zonemq"),
		Topic:                     "TopicTest",
		Properties:                "KEYS\x01k1 k2\x02TAGS\x01TagA\x02UNIQ_KEY\x01C00002022C180000000096172ff00001\x02",
	}
}

func TestStoredMessageRoundTrip(t *testing.T) {
	v4 := netip.MustParseAddrPort("10.1.2.3:10911")
	v6 := netip.MustParseAddrPort("[2001:db8::1]:10911")
	for _, tc := range []struct {
		name            string
		born, store     netip.AddrPort
		wantFlag, extra int
	}{
		{"IPv4 hosts", v4, v4, 0, 0},
		{"IPv6 born host", v6, v4, int(protocol.SysFlagBornHostV6), 12},
		{"IPv6 store host", v4, v6, int(protocol.SysFlagStoreHostV6), 12},
		{"IPv6 hosts", v6, v6, int(protocol.SysFlagBornHostV6 | protocol.SysFlagStoreHostV6), 24},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := sampleMessage()
			m.BornHost, m.StoreHost = tc.born, tc.store
			// Stale IPv6 bits are recomputed from the hosts.
			m.SysFlag |= protocol.SysFlagBornHostV6 | protocol.SysFlagStoreHostV6
			testutil.NoError(t, m.Validate())
			b := protocol.AppendStoredMessage(nil, m)
			want := 91 + len(m.Body) + len(m.Topic) + len(m.Properties) + tc.extra
			testutil.Equal(t, len(b), want)
			testutil.Equal(t, int(m.StoreSize), want)
			testutil.Equal(t, m.StoredSize(), want)
			testutil.Equal(t, int(m.SysFlag)&int(protocol.SysFlagBornHostV6|protocol.SysFlagStoreHostV6), tc.wantFlag)
			testutil.Equal(t, m.BodyCRC, crc32.ChecksumIEEE(m.Body)&0x7FFFFFFF)

			got, n, err := protocol.DecodeStoredMessage(b, true, true)
			testutil.NoError(t, err)
			testutil.Equal(t, n, len(b))
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("decoded\n%+v\nwant\n%+v", got, m)
			}
		})
	}
}

// The §5.1 example checked against the live client: body 11 bytes, topic
// 10, properties 63 → TOTALSIZE 175.
func TestStoredMessageSizeExample(t *testing.T) {
	m := sampleMessage()
	m.Body = []byte("hello-probe")
	m.Topic = "ProbeTopic"
	m.Properties = "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01C00002022C180000000096172ff00001\x02"
	testutil.Equal(t, len(m.Body), 11)
	testutil.Equal(t, len(m.Topic), 10)
	testutil.Equal(t, len(m.Properties), 63)
	b := protocol.AppendStoredMessage(nil, m)
	testutil.Equal(t, len(b), 175)
	testutil.True(t, bytes.Equal(b[:8], []byte{0, 0, 0, 0xAF, 0xDA, 0xA3, 0x20, 0xA7}), "TOTALSIZE 0xAF then the v1 magic")
}

// The layout offsets the store patches in place.
func TestStoredMessageFieldOffsets(t *testing.T) {
	m := sampleMessage()
	b := protocol.AppendStoredMessage(nil, m)
	testutil.Equal(t, int64(binary.BigEndian.Uint64(b[protocol.StoredOffsetQueueOffset:])), m.QueueOffset)
	testutil.Equal(t, int64(binary.BigEndian.Uint64(b[protocol.StoredOffsetCommitLogOffset:])), m.CommitLogOffset)
	testutil.Equal(t, int32(binary.BigEndian.Uint32(b[protocol.StoredOffsetSysFlag:])), m.SysFlag)
	testutil.Equal(t, int64(binary.BigEndian.Uint64(b[protocol.StoredOffsetBornTimestamp:])), m.BornTimestamp)

	binary.BigEndian.PutUint64(b[protocol.StoredOffsetQueueOffset:], 77)
	binary.BigEndian.PutUint64(b[protocol.StoredOffsetCommitLogOffset:], 88)
	got, _, err := protocol.DecodeStoredMessage(b, false, true)
	testutil.NoError(t, err)
	testutil.Equal(t, got.QueueOffset, int64(77))
	testutil.Equal(t, got.CommitLogOffset, int64(88))
}

func TestStoredMessageHostEdgeCases(t *testing.T) {
	m := sampleMessage()
	// An IPv4-mapped IPv6 address is stored as IPv4.
	m.BornHost = netip.MustParseAddrPort("[::ffff:10.0.0.9]:1234")
	// The zero AddrPort is stored as 0.0.0.0:0.
	m.StoreHost = netip.AddrPort{}
	b := protocol.AppendStoredMessage(nil, m)
	testutil.Equal(t, len(b), 91+len(m.Body)+len(m.Topic)+len(m.Properties))
	testutil.Equal(t, m.SysFlag&(protocol.SysFlagBornHostV6|protocol.SysFlagStoreHostV6), int32(0))
	got, _, err := protocol.DecodeStoredMessage(b, false, false)
	testutil.NoError(t, err)
	testutil.Equal(t, got.BornHost, netip.MustParseAddrPort("10.0.0.9:1234"))
	testutil.Equal(t, got.StoreHost, netip.MustParseAddrPort("0.0.0.0:0"))
}

// toV2 rewrites a v1 record as v2: the magic changes and the topic length
// takes two bytes.
func toV2(v1 []byte, m *protocol.MessageExt) []byte {
	topicAt := len(v1) - 2 - len(m.Properties) - len(m.Topic) - 1
	out := append([]byte(nil), v1[:topicAt]...)
	out = binary.BigEndian.AppendUint16(out, uint16(len(m.Topic)))
	out = append(out, v1[topicAt+1:]...)
	binary.BigEndian.PutUint32(out, uint32(len(out)))
	binary.BigEndian.PutUint32(out[4:], protocol.MessageMagicV2)
	return out
}

func TestStoredMessageDecodeV2(t *testing.T) {
	for _, topic := range []string{"TopicTest", strings.Repeat("t", 200)} {
		m := sampleMessage()
		m.Topic = topic
		v2 := toV2(protocol.AppendStoredMessage(nil, m), m)
		got, n, err := protocol.DecodeStoredMessage(v2, true, true)
		testutil.NoError(t, err, len(topic))
		testutil.Equal(t, n, len(v2))
		testutil.Equal(t, got.Topic, topic)
		testutil.Equal(t, got.Properties, m.Properties)
		testutil.Equal(t, string(got.Body), string(m.Body))
		testutil.Equal(t, int(got.StoreSize), len(v2))
	}
}

func TestStoredMessageCRC(t *testing.T) {
	m := sampleMessage()
	b := protocol.AppendStoredMessage(nil, m)
	bodyAt := 88 // IPv4 hosts: the body length field ends at 88
	testutil.Equal(t, string(b[bodyAt:bodyAt+len(m.Body)]), string(m.Body))
	b[bodyAt] ^= 0xFF
	_, _, err := protocol.DecodeStoredMessage(b, false, true)
	testutil.True(t, err != nil && strings.Contains(err.Error(), "CRC"), "CRC mismatch detected")
	// Without verification the record still decodes (the Go client never
	// checks the CRC either).
	got, _, err := protocol.DecodeStoredMessage(b, false, false)
	testutil.NoError(t, err)
	testutil.Equal(t, got.Body[0], m.Body[0]^0xFF)
}

func TestStoredMessageBodyAliasing(t *testing.T) {
	b := protocol.AppendStoredMessage(nil, sampleMessage())
	aliased, _, err := protocol.DecodeStoredMessage(b, false, true)
	testutil.NoError(t, err)
	copied, _, err := protocol.DecodeStoredMessage(b, true, true)
	testutil.NoError(t, err)
	for i := range b {
		b[i] = 0
	}
	testutil.Equal(t, aliased.Body[0], byte(0), "aliased body sees the buffer")
	testutil.Equal(t, string(copied.Body), "hello, zonemq")
}

func TestStoredMessageTruncated(t *testing.T) {
	b := protocol.AppendStoredMessage(nil, sampleMessage())
	for n := 0; n < len(b); n++ {
		_, _, err := protocol.DecodeStoredMessage(b[:n], false, false)
		if err == nil {
			t.Fatalf("a %d-byte prefix of a %d-byte record decoded", n, len(b))
		}
		if n >= 8 && !errors.Is(err, protocol.ErrShortRecord) {
			t.Fatalf("prefix %d: %v, want ErrShortRecord", n, err)
		}
	}
}

func TestStoredMessageSizeMismatch(t *testing.T) {
	m := sampleMessage()
	b := protocol.AppendStoredMessage(nil, m)
	for name, mutate := range map[string]func([]byte) []byte{
		"size smaller than the fields": func(b []byte) []byte {
			binary.BigEndian.PutUint32(b, uint32(len(b)-1))
			return b
		},
		"size larger than the fields": func(b []byte) []byte {
			binary.BigEndian.PutUint32(b, uint32(len(b)+1))
			return append(b, 0)
		},
		"size below the fixed part": func(b []byte) []byte {
			binary.BigEndian.PutUint32(b, 40)
			return b
		},
		"negative size": func(b []byte) []byte {
			binary.BigEndian.PutUint32(b, 0xFFFFFFF0)
			return b
		},
		"body length beyond the record": func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[84:], 1<<30)
			return b
		},
		"negative body length": func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[84:], 0xFFFFFFFF)
			return b
		},
		"bad magic": func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[4:], 0x12345678)
			return b
		},
		"blank magic": func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[4:], protocol.BlankMagicCode)
			return b
		},
	} {
		t.Run(name, func(t *testing.T) {
			bad := mutate(append([]byte(nil), b...))
			if _, _, err := protocol.DecodeStoredMessage(bad, true, true); err == nil {
				t.Fatal("decoded")
			}
		})
	}
}

// A pull body is records back to back.
func TestStoredMessageConcatenated(t *testing.T) {
	var body []byte
	var want []*protocol.MessageExt
	for i := range 5 {
		m := sampleMessage()
		m.QueueOffset = int64(i)
		m.Body = bytes.Repeat([]byte{byte('a' + i)}, i*10)
		if i == 3 {
			m.StoreHost = netip.MustParseAddrPort("[::1]:10911")
		}
		body = protocol.AppendStoredMessage(body, m)
		want = append(want, m)
	}
	for i := 0; len(body) > 0; i++ {
		got, n, err := protocol.DecodeStoredMessage(body, true, true)
		testutil.NoError(t, err, i)
		testutil.Equal(t, got.QueueOffset, want[i].QueueOffset)
		testutil.Equal(t, string(got.Body), string(want[i].Body))
		testutil.Equal(t, got.StoreHost, want[i].StoreHost)
		body = body[n:]
	}
}

func TestStoredMessageValidate(t *testing.T) {
	m := sampleMessage()
	testutil.NoError(t, m.Validate())
	m.Topic = ""
	testutil.True(t, m.Validate() != nil, "empty topic")
	m.Topic = strings.Repeat("t", protocol.MaxTopicLength)
	testutil.NoError(t, m.Validate(), "127-character topic")
	m.Topic += "t"
	testutil.True(t, m.Validate() != nil, "128-character topic")
	m.Topic = "T"
	m.Properties = strings.Repeat("p", protocol.MaxPropertiesLength)
	testutil.NoError(t, m.Validate(), "32767 bytes of properties")
	m.Properties += "p"
	testutil.True(t, m.Validate() != nil, "32768 bytes of properties")
}
