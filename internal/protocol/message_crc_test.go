package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/zonemq/zonemq/internal/testutil"
)

// sealedRecord encodes m as the store does: AppendStoredRecord, then the
// offsets and store time patched in, then SealStoredRecord.
func sealedRecord(m *MessageExt, queueOffset, phys, storeTime int64) []byte {
	rec := AppendStoredRecord(nil, m)
	binary.BigEndian.PutUint64(rec[StoredOffsetQueueOffset:], uint64(queueOffset))
	binary.BigEndian.PutUint64(rec[StoredOffsetCommitLogOffset:], uint64(phys))
	binary.BigEndian.PutUint64(rec[storeTimestampPos(rec):], uint64(storeTime))
	SealStoredRecord(rec)
	return rec
}

func crcTestMessage(v6 bool) *MessageExt {
	m := &MessageExt{Topic: "OrderTopic", QueueID: 3, Flag: 7, BornTimestamp: 1_700_000_000_000,
		BornHost:   netip.MustParseAddrPort("10.1.2.3:4000"),
		StoreHost:  netip.MustParseAddrPort("10.1.2.4:10911"),
		Body:       []byte("a body of some length"),
		Properties: EncodeProperties(map[string]string{"KEYS": "order-1", "TAGS": "paid"})}
	if v6 {
		m.BornHost = netip.MustParseAddrPort("[2001:db8::1]:4000")
	}
	return m
}

// A sealed record verifies and decodes, and stripping its trailer yields
// exactly the v1 record RocketMQ clients decode.
func TestStoredRecordCRCRoundTrip(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		m := crcTestMessage(v6)
		rec := sealedRecord(m, 42, 8192, 1_700_000_000_123)
		testutil.Equal(t, len(rec), m.RecordSize())
		testutil.Equal(t, binary.BigEndian.Uint32(rec[4:]), MessageMagicCRC)
		testutil.NoError(t, VerifyStoredRecord(rec))
		got, n, err := DecodeStoredMessage(rec, false, true)
		testutil.NoError(t, err)
		testutil.Equal(t, n, len(rec))
		testutil.Equal(t, got.Topic, m.Topic)
		testutil.Equal(t, got.Properties, m.Properties)
		testutil.Equal(t, got.QueueOffset, int64(42))
		testutil.Equal(t, got.CommitLogOffset, int64(8192))
		testutil.Equal(t, got.StoreTimestamp, int64(1_700_000_000_123))
		props, err := StoredProperties(rec)
		testutil.NoError(t, err)
		testutil.Equal(t, props, m.Properties)

		v1 := StripRecordCRC(bytes.Clone(rec))
		want := AppendStoredMessage(nil, got)
		testutil.True(t, bytes.Equal(v1, want), "the stripped record is the v1 encoding of the same message")
		testutil.Equal(t, cap(v1), len(v1))
		testutil.NoError(t, VerifyStoredRecord(v1))
	}
}

// Every single damaged byte of a sealed record — topic, properties, keys,
// flags, offsets, store time, body, lengths, trailer — fails verification
// and a verifying decode. (BODYCRC covered only the body.)
func TestStoredRecordCRCCoversEveryByte(t *testing.T) {
	rec := sealedRecord(crcTestMessage(false), 5, 4096, 1_700_000_000_000)
	for i := range rec {
		for _, x := range []byte{0x01, 0x20, 0xFF} {
			b := bytes.Clone(rec)
			b[i] ^= x
			if err := VerifyStoredRecord(b); err == nil {
				t.Fatalf("byte %d ^ %#x passes VerifyStoredRecord", i, x)
			}
			if _, _, err := DecodeStoredMessage(b, false, true); err == nil {
				t.Fatalf("byte %d ^ %#x passes a verifying decode", i, x)
			}
		}
	}
	// A flipped topic byte that still spells a valid topic is a checksum
	// failure, which recovery treats as a complete damaged record.
	b := bytes.Clone(rec)
	b[bytes.Index(b, []byte("OrderTopic"))+2] ^= 0x20
	err := VerifyStoredRecord(b)
	testutil.True(t, errors.Is(err, ErrRecordCRC), err)
	_, _, err = DecodeStoredMessage(b, false, true)
	testutil.True(t, errors.Is(err, ErrRecordCRC), err)
}

// A record whose offsets were patched after it was sealed does not verify:
// the store must seal after placing it.
func TestStoredRecordCRCCoversPlacement(t *testing.T) {
	rec := sealedRecord(crcTestMessage(false), 5, 4096, 1_700_000_000_000)
	binary.BigEndian.PutUint64(rec[StoredOffsetQueueOffset:], 6)
	testutil.True(t, errors.Is(VerifyStoredRecord(rec), ErrRecordCRC), "queue offset changed after sealing")
	unsealed := AppendStoredRecord(nil, crcTestMessage(false))
	binary.BigEndian.PutUint64(unsealed[StoredOffsetCommitLogOffset:], 4096)
	testutil.True(t, errors.Is(VerifyStoredRecord(unsealed), ErrRecordCRC), "never sealed")
}
