package protocol

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// MessageMagicCRC marks zonemq's own stored record: the v1 layout followed
// by a 4-byte CRC32C (Castagnoli) of the whole record, counted in
// TOTALSIZE. RocketMQ's BODYCRC covers only the body, so a damaged topic,
// property, key or queue offset went unnoticed and was served — a flipped
// byte in a topic name delivered the record to another topic's consumers.
// The code is not RocketMQ's, so a RocketMQ tool never mistakes such a
// record for a v1 one; clients never see it: reads for clients strip the
// trailer (StripRecordCRC). ("ZMQC")
const MessageMagicCRC uint32 = 0x5A4D5143

// recordCRCLen is the length of the CRC32C trailer.
const recordCRCLen = 4

// ErrRecordCRC means a record with a whole-record CRC32C is complete and
// well framed but its bytes do not match it: they were damaged after they
// were written.
var ErrRecordCRC = errors.New("protocol: stored record CRC32C mismatch")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// RecordSize returns the size of m as the store writes it: the v1 layout
// plus the CRC32C trailer.
func (m *MessageExt) RecordSize() int { return m.StoredSize() + recordCRCLen }

// AppendStoredRecord appends m as the store writes it (MessageMagicCRC).
// The trailer holds a partial sum until SealStoredRecord completes it, once
// the store has written QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP: so
// the sum over the body is computed outside the store's write lock and only
// those 24 bytes inside it. The caller must have checked Validate.
func AppendStoredRecord(dst []byte, m *MessageExt) []byte {
	start := len(dst)
	dst = AppendStoredMessage(dst, m)
	dst = append(dst, 0, 0, 0, 0)
	rec := dst[start:]
	m.StoreSize = int32(len(rec))
	binary.BigEndian.PutUint32(rec, uint32(len(rec)))
	binary.BigEndian.PutUint32(rec[4:], MessageMagicCRC)
	binary.BigEndian.PutUint32(rec[len(rec)-recordCRCLen:], fixedSum(rec))
	return dst
}

// SealStoredRecord completes the CRC32C of a record from AppendStoredRecord
// after its offsets and store time were written. A record of another magic
// is left alone.
func SealStoredRecord(rec []byte) {
	if len(rec) < storedFixedV4Len+recordCRCLen || binary.BigEndian.Uint32(rec[4:]) != MessageMagicCRC {
		return
	}
	t := rec[len(rec)-recordCRCLen:]
	binary.BigEndian.PutUint32(t, patchedSum(binary.BigEndian.Uint32(t), rec))
}

// RecordCRC returns the CRC32C a MessageMagicCRC record must carry: every
// byte but the trailer, the fields the store fills in last (QUEUEOFFSET,
// PHYSICALOFFSET, STORETIMESTAMP) taken at the end. rec must be at least
// the fixed part plus the trailer long.
func RecordCRC(rec []byte) uint32 { return patchedSum(fixedSum(rec), rec) }

// fixedSum is the CRC32C of the bytes known before the store places the
// record.
func fixedSum(rec []byte) uint32 {
	ts := storeTimestampPos(rec)
	c := crc32.Update(0, castagnoli, rec[:StoredOffsetQueueOffset])
	c = crc32.Update(c, castagnoli, rec[StoredOffsetSysFlag:ts])
	return crc32.Update(c, castagnoli, rec[ts+8:len(rec)-recordCRCLen])
}

// patchedSum continues c with the fields the store fills in under its lock.
func patchedSum(c uint32, rec []byte) uint32 {
	ts := storeTimestampPos(rec)
	c = crc32.Update(c, castagnoli, rec[StoredOffsetQueueOffset:StoredOffsetSysFlag])
	return crc32.Update(c, castagnoli, rec[ts:ts+8])
}

// storeTimestampPos is where STORETIMESTAMP lies: after BORNHOST, whose
// length the sysflag gives.
func storeTimestampPos(rec []byte) int {
	sysFlag := int32(binary.BigEndian.Uint32(rec[StoredOffsetSysFlag:]))
	return StoredOffsetBornTimestamp + 8 + hostLen(sysFlag&SysFlagBornHostV6 != 0)
}

// StripRecordCRC turns a verified MessageMagicCRC record into the v1 record
// RocketMQ clients decode, in place: TOTALSIZE without the trailer, magic
// v1, the trailer cut off (the result's capacity ends at its end). Other
// records are returned as they are.
func StripRecordCRC(rec []byte) []byte {
	if len(rec) < 8 || binary.BigEndian.Uint32(rec[4:]) != MessageMagicCRC {
		return rec
	}
	n := len(rec) - recordCRCLen
	binary.BigEndian.PutUint32(rec, uint32(n))
	binary.BigEndian.PutUint32(rec[4:], MessageMagicV1)
	return rec[:n:n]
}

// IsStoredMagic reports whether magic starts a stored record (not an
// end-of-segment marker, not garbage).
func IsStoredMagic(magic uint32) bool {
	return magic == MessageMagicV1 || magic == MessageMagicV2 || magic == MessageMagicCRC
}
