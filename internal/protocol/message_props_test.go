package protocol_test

import (
	"net/netip"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

func TestStoredPropertiesMatchesDecode(t *testing.T) {
	for _, m := range []*protocol.MessageExt{
		sampleMessage(),
		func() *protocol.MessageExt {
			m := sampleMessage()
			m.BornHost = netip.MustParseAddrPort("[2001:db8::1]:5000")
			m.StoreHost = netip.MustParseAddrPort("[2001:db8::2]:10911")
			m.Properties = ""
			return m
		}(),
	} {
		v1 := protocol.AppendStoredMessage(nil, m)
		for _, rec := range [][]byte{v1, toV2(v1, m)} {
			got, err := protocol.StoredProperties(rec)
			testutil.NoError(t, err, "StoredProperties")
			testutil.Equal(t, got, m.Properties, "properties")
		}
		for n := 0; n < len(v1); n++ {
			if _, err := protocol.StoredProperties(v1[:n]); err == nil {
				t.Fatalf("a record cut to %d of %d bytes was read", n, len(v1))
			}
		}
	}
}

func FuzzStoredProperties(f *testing.F) {
	f.Add(protocol.AppendStoredMessage(nil, sampleMessage()))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := protocol.StoredProperties(b)
		m, _, derr := protocol.DecodeStoredMessage(b, false, false)
		if derr == nil && (err != nil || got != m.Properties) {
			t.Fatalf("StoredProperties = %q, %v; the decoder read %q", got, err, m.Properties)
		}
	})
}
