package protocol_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
)

// benchStoredMessage is a typical stored message: 1 KiB body, the properties
// the Go client sets, IPv4 hosts.
func benchStoredMessage() *protocol.MessageExt {
	return &protocol.MessageExt{
		Topic:           "BenchTopic",
		QueueID:         3,
		QueueOffset:     12345,
		CommitLogOffset: 987654321,
		Body:            []byte(strings.Repeat("b", 1024)),
		BornTimestamp:   1_700_000_000_000,
		BornHost:        netip.MustParseAddrPort("127.0.0.2:40000"),
		StoreTimestamp:  1_700_000_000_123,
		StoreHost:       netip.MustParseAddrPort("127.0.0.1:10911"),
		Properties: protocol.EncodeProperties(map[string]string{
			"TAGS": "TagA", "KEYS": "order-1", "UNIQ_KEY": "7F00000100002A9F0000000000000001", "WAIT": "true",
		}),
	}
}

func BenchmarkStoredMessageEncode(b *testing.B) {
	m := benchStoredMessage()
	buf := make([]byte, 0, m.StoredSize())
	b.SetBytes(int64(m.StoredSize()))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf = protocol.AppendStoredMessage(buf[:0], m)
	}
}

func BenchmarkStoredMessageDecode(b *testing.B) {
	rec := protocol.AppendStoredMessage(nil, benchStoredMessage())
	for _, bc := range []struct {
		name          string
		copyBody, crc bool
	}{{"alias", false, false}, {"aliasCRC", false, true}, {"copyCRC", true, true}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, _, err := protocol.DecodeStoredMessage(rec, bc.copyBody, bc.crc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerifyStoredRecord is the check every read makes per record: a
// v1 record's body CRC (IEEE) against a new record's whole-record CRC32C,
// and the store's encode of each.
func BenchmarkVerifyStoredRecord(b *testing.B) {
	m := benchStoredMessage()
	v1 := protocol.AppendStoredMessage(nil, m)
	rec := protocol.AppendStoredRecord(nil, m)
	protocol.SealStoredRecord(rec)
	for _, bc := range []struct {
		name string
		rec  []byte
	}{{"v1BodyCRC", v1}, {"wholeRecordCRC32C", rec}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.rec)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := protocol.VerifyStoredRecord(bc.rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("encodeRecord", func(b *testing.B) {
		buf := make([]byte, 0, m.RecordSize())
		b.SetBytes(int64(m.RecordSize()))
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			buf = protocol.AppendStoredRecord(buf[:0], m)
			protocol.SealStoredRecord(buf)
		}
	})
}
