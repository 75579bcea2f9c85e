package protocol_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// The §5.4 example, observed with the live client.
func TestMsgIDOffsetExample(t *testing.T) {
	host := netip.MustParseAddrPort("127.0.0.1:19911")
	id := protocol.OffsetMessageID(host, 1000)
	testutil.Equal(t, id, "7F00000100004DC700000000000003E8")
	gotHost, off, err := protocol.ParseOffsetMessageID(id)
	testutil.NoError(t, err)
	testutil.Equal(t, gotHost, host)
	testutil.Equal(t, off, int64(1000))
}

func TestMsgIDRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		host    string
		off     int64
		wantLen int
	}{
		{"10.1.2.3:10911", 0, 32},
		{"255.255.255.255:65535", 1<<63 - 1, 32},
		{"[2001:db8::1]:10911", 123456789, 56},
		{"[::1]:1", 1, 56},
	} {
		host := netip.MustParseAddrPort(tc.host)
		id := protocol.OffsetMessageID(host, tc.off)
		testutil.Equal(t, len(id), tc.wantLen, tc.host)
		testutil.Equal(t, id, strings.ToUpper(id), "upper-case hex")
		gotHost, off, err := protocol.ParseOffsetMessageID(id)
		testutil.NoError(t, err, tc.host)
		testutil.Equal(t, gotHost, host)
		testutil.Equal(t, off, tc.off)
		// Lower case parses too (clients are not consistent).
		_, off, err = protocol.ParseOffsetMessageID(strings.ToLower(id))
		testutil.NoError(t, err)
		testutil.Equal(t, off, tc.off)
	}
}

func TestMsgIDHostEdgeCases(t *testing.T) {
	// An IPv4-mapped address gives the IPv4 form.
	mapped := protocol.OffsetMessageID(netip.MustParseAddrPort("[::ffff:127.0.0.1]:19911"), 1000)
	testutil.Equal(t, mapped, "7F00000100004DC700000000000003E8")
	// No host: zeros, not a panic.
	testutil.Equal(t, protocol.OffsetMessageID(netip.AddrPort{}, 1), "0000000000000000000000000000000"+"1")
}

func TestMsgIDParseErrors(t *testing.T) {
	for _, id := range []string{
		"",
		"7F00000100004DC700000000000003E",    // odd length
		"7F00000100004DC700000000000003",     // 15 bytes
		"7F00000100004DC700000000000003E8AA", // 17 bytes
		"7F00000100004DC70000000000000XE8",   // not hex
		"C00002022C180000000096172ff00001AB", // a UNIQ_KEY with junk
		strings.Repeat("A", 54),
		strings.Repeat("A", 58),
	} {
		if _, _, err := protocol.ParseOffsetMessageID(id); err == nil {
			t.Errorf("%q parsed", id)
		}
	}
}
