package admin

import (
	"testing"
	"time"
)

// finishTrace puts a message's publish first even when a delivery carries
// an earlier clock, names the storing broker of the publish and of the
// first delivery (not of a redelivery), and orders messages by their first
// event.
func TestTraceFinishOrderAndBrokers(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	brokers := []BrokerStatus{{Name: "broker-idc2", IDC: "idc2", Addr: "127.0.2.1:10911"}}
	evs := []TraceEvent{
		{Type: TraceConsumeOutcome, MsgID: "A", RequestID: "r1", Time: t0.Add(1 * time.Millisecond), Success: true},
		{Type: TraceConsumeStart, MsgID: "A", RequestID: "r1", Time: t0.Add(1 * time.Millisecond), Group: "g", ClientHost: "10.0.0.1"},
		{Type: TracePublish, MsgID: "A", Time: t0.Add(2 * time.Millisecond), StoreHost: "127.0.2.1:10911", Success: true},
		{Type: TraceConsumeStart, MsgID: "A", RequestID: "r2", Time: t0.Add(5 * time.Millisecond), RetryTimes: 1},
		{Type: TracePublish, MsgID: "B", Time: t0, StoreHost: "127.0.9.9:1", Success: true},
	}
	out := finishTrace(evs, brokers)
	var got []string
	for _, e := range out {
		got = append(got, e.MsgID+":"+e.Type+"@"+e.Broker)
	}
	want := []string{"B:Pub@", "A:Pub@broker-idc2", "A:SubBefore@broker-idc2", "A:SubAfter@broker-idc2", "A:SubBefore@"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if out[3].ClientHost != "10.0.0.1" || out[3].Group != "g" {
		t.Fatalf("the outcome did not get its start's client and group: %+v", out[3])
	}
}
