package console

import (
	"strings"
	"testing"
	"time"
)

func TestConsoleRatesAndCounts(t *testing.T) {
	got := parseCounts("idc1=10;idc2=4;=2;garbage;idc3=x")
	if len(got) != 3 || got["idc1"] != 10 || got["idc2"] != 4 || got[""] != 2 {
		t.Fatalf("parseCounts: %v", got)
	}
	r := rates(map[string]int64{"idc1": 4, "idc2": 100}, map[string]int64{"idc1": 10, "idc2": 3, "idc3": 2}, 2)
	// idc2's counter went down (the broker restarted): counted from zero.
	if r["idc1"] != 3 || r["idc2"] != 1.5 || r["idc3"] != 1 {
		t.Fatalf("rates: %v", r)
	}
	if got := idcOfClientID("10.0.0.1@123@idc=idc2"); got != "idc2" {
		t.Fatalf("idcOfClientID: %q", got)
	}
	if got := idcOfClientID("10.0.0.1@idc=fake"); got != "" {
		t.Fatalf("a stock id yielded IDC %q", got)
	}
	if permString(6) != "rw" || permString(4) != "r-" || permString(0) != "--" {
		t.Fatal("permString")
	}
}

// TestConsoleFlowMovesOnTimeline feeds the poller broker rates by hand: a
// move of idc1's producers to idc2 and back is put on the timeline once
// each, and an idle IDC puts nothing there.
func TestConsoleFlowMovesOnTimeline(t *testing.T) {
	p := newPoller(Options{}, nil)
	p.brokers["b1"] = &brokerState{name: "b1", idc: "idc1", up: true}
	p.brokers["b2"] = &brokerState{name: "b2", idc: "idc2", up: true}
	idcs := []IDCView{{Name: "idc1", Brokers: []BrokerView{{Name: "b1"}}}, {Name: "idc2", Brokers: []BrokerView{{Name: "b2"}}}}
	step := func(toIDC1, toIDC2 float64) []FlowView {
		p.brokers["b1"].inRate = map[string]float64{"idc1": toIDC1}
		p.brokers["b2"].inRate = map[string]float64{"idc1": toIDC2}
		return p.flows(&Snapshot{}, idcs)
	}
	step(10, 0)
	step(10, 0)
	if len(p.events) != 0 {
		t.Fatalf("events while steady: %v", p.events)
	}
	fv := step(0, 10)
	if len(p.events) != 1 || p.events[0].Kind != "move" || !strings.Contains(p.events[0].Text, "idc1's producers now send to idc2") {
		t.Fatalf("after the move: %+v", p.events)
	}
	if fv[0].IDC != "idc1" || fv[0].Produce[1].IDC != "idc2" || fv[0].Produce[1].Percent != 100 || fv[0].Produce[1].Home {
		t.Fatalf("flow after the move: %+v", fv[0])
	}
	step(0, 0.1) // below minFlowRate: not news
	step(10, 0)
	if len(p.events) != 2 || p.events[1].Kind != "up" || !strings.Contains(p.events[1].Text, "back on idc1's own brokers") {
		t.Fatalf("after the return: %+v", p.events)
	}
}

// TestConsoleRatesAreSmoothed: a steady 2 msg/s producer whose messages
// fall 1, 3, 2, 1, 3 … into one-second polls shows 2/s once the window
// has filled, not the jumps.
func TestConsoleRatesAreSmoothed(t *testing.T) {
	var st brokerState
	t0 := time.Unix(1000, 0)
	total := int64(0)
	for i, n := range []int64{0, 1, 3, 2, 1, 3, 2, 2, 1, 3, 2} {
		total += n
		st.addSample(t0.Add(time.Duration(i)*time.Second), map[string]int64{"idc1": total}, nil)
		if i >= 6 {
			if r := st.inRate["idc1"]; r < 1.6 || r > 2.4 {
				t.Fatalf("poll %d: rate %.2f, want about 2", i, r)
			}
		}
	}
}

// TestConsoleTakeoversMarkedOnlyWhenRecent: the running total stays on the
// card, but it is a warning only within takeoverRecent of a rise; a total
// the console found on its first look is history.
func TestConsoleTakeoversMarkedOnlyWhenRecent(t *testing.T) {
	var st brokerState
	t0 := time.Unix(1000, 0)
	if st.noteTakeovers(t0, 5) {
		t.Fatal("the first total seen marked as recent")
	}
	if !st.noteTakeovers(t0.Add(time.Second), 6) {
		t.Fatal("a rise not marked")
	}
	if st.noteTakeovers(t0.Add(time.Second+takeoverRecent), 6) {
		t.Fatal("still marked after the recovery")
	}
	if got := brokerLabel("broker-idc2", 1); got != "broker-idc2 replica 1" {
		t.Fatalf("brokerLabel: %q", got)
	}
}
