package protocol

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
)

// OffsetMessageID returns the offset message id of a record stored by
// storeHost at commit-log offset off: upper-case hex of IP, port (int32) and
// offset (int64).
func OffsetMessageID(storeHost netip.AddrPort, off int64) string {
	var b [28]byte
	n := 0
	a := storeHost.Addr().Unmap()
	switch {
	case !a.IsValid(): // no host known: 0.0.0.0 (As4 panics on the zero Addr)
		n += 4
	case a.Is4():
		ip := a.As4()
		n += copy(b[:], ip[:])
	default:
		ip := a.As16()
		n += copy(b[:], ip[:])
	}
	binary.BigEndian.PutUint32(b[n:], uint32(storeHost.Port()))
	n += 4
	binary.BigEndian.PutUint64(b[n:], uint64(off))
	n += 8
	return upperHex(b[:n])
}

// upperHex renders b as upper-case hex with one allocation, the string.
func upperHex(b []byte) string {
	const digits = "0123456789ABCDEF"
	var out [56]byte // two per byte of OffsetMessageID's longest input
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&0x0F]
	}
	return string(out[:2*len(b)])
}

// ParseOffsetMessageID decodes an offset message id into the store host and
// commit-log offset.
func ParseOffsetMessageID(id string) (netip.AddrPort, int64, error) {
	b, err := hex.DecodeString(id)
	if err != nil || (len(b) != 16 && len(b) != 28) {
		return netip.AddrPort{}, 0, fmt.Errorf("protocol: %q is not an offset message id", id)
	}
	var a netip.Addr
	if len(b) == 16 {
		a = netip.AddrFrom4([4]byte(b[:4]))
		b = b[4:]
	} else {
		a = netip.AddrFrom16([16]byte(b[:16]))
		b = b[16:]
	}
	port := binary.BigEndian.Uint32(b)
	off := int64(binary.BigEndian.Uint64(b[4:]))
	return netip.AddrPortFrom(a, uint16(port)), off, nil
}
