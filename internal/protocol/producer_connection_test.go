package protocol

import "testing"

func TestProtocolProducerGroupHeaderRoundTrip(t *testing.T) {
	in := ProducerGroupRequestHeader{ProducerGroup: "pg"}
	var out ProducerGroupRequestHeader
	if err := out.SetExt(in.Ext()); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("round trip: got %+v, want %+v", out, in)
	}
	if err := out.SetExt(map[string]string{}); err == nil {
		t.Fatal("a header without producerGroup was accepted")
	}
}
