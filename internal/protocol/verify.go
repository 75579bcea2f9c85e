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

// VerifyStoredRecord checks that b is exactly one stored record (v1 or v2
// magic, TOTALSIZE == len(b), the body inside it) whose body matches its
// BODYCRC. It reads only the fields it needs and allocates nothing, so read
// paths can afford it on every record they serve. A CRC mismatch wraps
// ErrBodyCRC.
func VerifyStoredRecord(b []byte) error {
	if len(b) < storedFixedV4Len {
		return ErrShortRecord
	}
	size := int(int32(binary.BigEndian.Uint32(b)))
	magic := binary.BigEndian.Uint32(b[4:])
	if magic != MessageMagicV1 && magic != MessageMagicV2 {
		return fmt.Errorf("protocol: bad stored-message magic %#x", magic)
	}
	if size != len(b) {
		return fmt.Errorf("protocol: stored message declares %d bytes where %d were read", size, len(b))
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
