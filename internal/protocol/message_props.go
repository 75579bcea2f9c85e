package protocol

import (
	"encoding/binary"
	"fmt"
)

// StoredProperties returns the properties string of the stored record at
// the start of b (any stored magic) without decoding the other fields: for
// the broker's SQL92 filter, which reads the properties of every record it
// examines and nothing else.
func StoredProperties(b []byte) (string, error) {
	if len(b) < 8 {
		return "", ErrShortRecord
	}
	size := int(int32(binary.BigEndian.Uint32(b)))
	magic := binary.BigEndian.Uint32(b[4:])
	if !IsStoredMagic(magic) {
		return "", fmt.Errorf("protocol: bad stored-message magic %#x", magic)
	}
	if size < storedFixedV4Len || size > len(b) {
		return "", fmt.Errorf("protocol: stored-message size %d is invalid for %d bytes", size, len(b))
	}
	if magic == MessageMagicCRC {
		size -= recordCRCLen // the fields end before the CRC32C trailer
	}
	r := reader{b: b[:size], off: StoredOffsetSysFlag}
	sysFlag := int32(r.u32())
	hostLen := func(v6 bool) int {
		if v6 {
			return 16 + 4
		}
		return 4 + 4
	}
	r.bytes(8 + hostLen(sysFlag&SysFlagBornHostV6 != 0))  // born timestamp and host
	r.bytes(8 + hostLen(sysFlag&SysFlagStoreHostV6 != 0)) // store timestamp and host
	r.bytes(4 + 8)                                        // reconsume times, prepared offset
	r.bytes(int(int32(r.u32())))                          // body
	if magic == MessageMagicV2 {
		r.bytes(int(r.u16()))
	} else {
		r.bytes(int(r.u8()))
	}
	props := r.bytes(int(r.u16()))
	if r.err != nil {
		return "", fmt.Errorf("protocol: stored message at size %d: %w", size, r.err)
	}
	return string(props), nil
}
