package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// ErrBodyCRC means a stored record is complete and well framed but its body
// does not match its BODYCRC: the bytes were damaged after they were written.
var ErrBodyCRC = errors.New("protocol: stored message body CRC mismatch")

// VerifyStoredRecord checks that b is exactly one stored record (v1, v2 or
// MessageMagicCRC magic, TOTALSIZE == len(b), the body inside it). A record
// with the CRC32C trailer must also have its fields fill it exactly and
// match its CRC32C, which covers every byte (a mismatch wraps ErrRecordCRC);
// an older record has only its body checked against BODYCRC (a mismatch
// wraps ErrBodyCRC). It reads only the fields it needs and allocates
// nothing, so read paths can afford it on every record they serve.
func VerifyStoredRecord(b []byte) error {
	if len(b) < storedFixedV4Len {
		return ErrShortRecord
	}
	size := int(int32(binary.BigEndian.Uint32(b)))
	magic := binary.BigEndian.Uint32(b[4:])
	if !IsStoredMagic(magic) {
		return fmt.Errorf("protocol: bad stored-message magic %#x", magic)
	}
	if size != len(b) {
		return fmt.Errorf("protocol: stored message declares %d bytes where %d were read", size, len(b))
	}
	if magic == MessageMagicCRC {
		return verifyRecordCRC(b)
	}
	sysFlag := int32(binary.BigEndian.Uint32(b[StoredOffsetSysFlag:]))
	pos := StoredOffsetBornTimestamp + 8 + hostLen(sysFlag&SysFlagBornHostV6 != 0) +
		8 + hostLen(sysFlag&SysFlagStoreHostV6 != 0) + 4 + 8
	if pos+4 > size {
		return ErrShortRecord
	}
	bodyLen := int(int32(binary.BigEndian.Uint32(b[pos:])))
	pos += 4
	if bodyLen < 0 || pos+bodyLen > size {
		return fmt.Errorf("protocol: stored message body of %d bytes does not fit its %d-byte record", bodyLen, size)
	}
	want := binary.BigEndian.Uint32(b[8:])
	if crc32.ChecksumIEEE(b[pos:pos+bodyLen])&0x7FFFFFFF != want {
		return fmt.Errorf("%w at commit-log offset %d", ErrBodyCRC, int64(binary.BigEndian.Uint64(b[StoredOffsetCommitLogOffset:])))
	}
	return nil
}

// hostLen is the stored length of a host: IPv4 or IPv6 address plus port.
func hostLen(v6 bool) int {
	if v6 {
		return 16 + 4
	}
	return 4 + 4
}

// verifyRecordCRC checks a MessageMagicCRC record of len(b) bytes: its
// variable fields end exactly at the trailer and its CRC32C matches. The
// body CRC is not checked again: the CRC32C covers the body and BODYCRC.
func verifyRecordCRC(b []byte) error {
	size := len(b)
	if size < storedFixedV4Len+recordCRCLen {
		return ErrShortRecord
	}
	end := size - recordCRCLen
	sysFlag := int32(binary.BigEndian.Uint32(b[StoredOffsetSysFlag:]))
	pos := StoredOffsetBornTimestamp + 8 + hostLen(sysFlag&SysFlagBornHostV6 != 0) +
		8 + hostLen(sysFlag&SysFlagStoreHostV6 != 0) + 4 + 8
	fits := false
	if pos+4 <= end {
		pos += 4 + int(int32(binary.BigEndian.Uint32(b[pos:]))) // body
		if pos >= StoredOffsetBornTimestamp && pos+1 <= end {
			pos += 1 + int(b[pos]) // topic
			if pos+2 <= end {
				pos += 2 + int(binary.BigEndian.Uint16(b[pos:])) // properties
				fits = pos == end
			}
		}
	}
	if !fits || RecordCRC(b) != binary.BigEndian.Uint32(b[end:]) {
		return fmt.Errorf("%w at commit-log offset %d", ErrRecordCRC, int64(binary.BigEndian.Uint64(b[StoredOffsetCommitLogOffset:])))
	}
	return nil
}
