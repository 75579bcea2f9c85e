package drill

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestChaosPlanIsSeededAndReplayable: one seed gives one plan; another
// seed another; faults on one target never overlap, none outlasts the
// campaign; a written plan reads back the same.
func TestChaosPlanIsSeededAndReplayable(t *testing.T) {
	targets := func(kind string) []string {
		switch kind {
		case FaultIsolate, FaultPower:
			return []string{"idc1", "idc2"}
		case FaultOneWay:
			return []string{"idc1>idc2", "idc2>idc1"}
		case FaultFlaky, FaultBridge:
			return []string{"idc1<>idc2"}
		case FaultCorrupt:
			return []string{"idc1/replica-of-broker-idc2", "idc2/replica-of-broker-idc1"}
		}
		return []string{"idc1/broker", "idc1/namesrv", "idc2/broker", "idc2/consumer"}
	}
	a := planChaos(7, 5*time.Minute, AllFaults, targets)
	b := planChaos(7, 5*time.Minute, AllFaults, targets)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("one seed gave two plans")
	}
	if reflect.DeepEqual(a.Events, planChaos(8, 5*time.Minute, AllFaults, targets).Events) {
		t.Fatal("two seeds gave one plan")
	}
	if len(a.Events) < 10 {
		t.Fatalf("%d faults in 5 minutes", len(a.Events))
	}
	end := map[string]Millis{}
	kinds := map[string]int{}
	for _, e := range a.Events {
		keys := []string{faultLock(e.Kind, e.Target)} // one cut at a time: a heal removes them all
		if e.Kind == FaultPower {
			keys = []string{e.Target, e.Target + "/broker", e.Target + "/namesrv"} // the IDC's disk and processes
			if e.Target == "idc2" {
				keys = append(keys, "idc2/consumer")
			}
		}
		for _, key := range keys {
			if e.At < end[key] {
				t.Fatalf("faults overlap on %s at %v", key, e.At)
			}
			end[key] = e.At + e.Hold
		}
		if e.At+e.Hold > a.Duration {
			t.Fatalf("a fault outlasts the campaign: %+v", e)
		}
		kinds[e.Kind]++
	}
	if len(kinds) != len(AllFaults) {
		t.Fatalf("fault kinds drawn: %v", kinds)
	}
	path := filepath.Join(t.TempDir(), "chaos-plan.json")
	data, _ := json.Marshal(a)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := readChaosPlan(path)
	if err != nil || !reflect.DeepEqual(back, a) {
		t.Fatalf("replayed plan differs: %v", err)
	}
	if _, err := chaosKinds([]string{"kill", "meteor"}, true, false); err == nil {
		t.Fatal("an unknown fault kind was accepted")
	}
	if _, err := chaosKinds([]string{"isolate"}, false, false); err == nil {
		t.Fatal("a network fault was accepted without --netns")
	}
	if k, _ := chaosKinds(nil, false, false); slices.ContainsFunc(k, networkFault) || slices.Contains(k, FaultPower) {
		t.Fatalf("default kinds on loopback: %v", k)
	}
}

// fakeProc is a process for playChaos: it refuses to start twice, as the
// drill's real processes do, and its SIGTERM takes slow to return.
type fakeProc struct {
	mu      sync.Mutex
	running bool
	slow    time.Duration
	starts  int // also the process generation: a signal reaches the one it was sent to
}

func (f *fakeProc) kill() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running = false
	return nil
}

func (f *fakeProc) terminate(time.Duration) error {
	f.mu.Lock()
	gen := f.starts
	f.mu.Unlock()
	time.Sleep(f.slow) // a graceful stop outlasting its planned hold
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.starts == gen {
		f.running = false
	}
	return nil
}

func (f *fakeProc) signal(syscall.Signal) error { return nil }

func (f *fakeProc) start(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running {
		return errors.New("already running")
	}
	f.running = true
	f.starts++
	return nil
}

// The replay of seed 1's 3-minute campaign (TestE2EChaosFixedSeed) failed
// with "idc1/broker is already running": a graceful stop outlasted its
// hold, a kill planned on the same broker after it began meanwhile, and
// both restarted it. Faults on one target now run one after the other.
func TestChaosFaultsOnOneTargetDoNotInterleave(t *testing.T) {
	p := &fakeProc{running: true, slow: 300 * time.Millisecond}
	d := &drill{progress: &progress{}}
	plan := ChaosPlan{Seed: 1, Duration: 2000, Events: []ChaosEvent{
		{At: 0, Hold: 100, Kind: FaultStop, Target: "idc1/broker"},
		{At: 150, Hold: 100, Kind: FaultKill, Target: "idc1/broker"},
	}}
	if err := d.playChaos(context.Background(), plan, map[string]faultable{"idc1/broker": p}); err != nil {
		t.Fatal(err)
	}
	if !p.running || p.starts != 2 {
		t.Fatalf("running %v after %d restarts, want running after 2", p.running, p.starts)
	}
}

// The drill forces a group's master after the heal only onto a live broker
// whose log is at least every member's: nothing any copy holds is lost.
func TestForcedHandBackOnlyToTheLongestLog(t *testing.T) {
	g := &protocol.ControllerGroup{Members: []protocol.ControllerMember{
		{ID: 0, LogEnd: 17858426, Alive: true},
		{ID: 1, LogEnd: 0, Alive: true},
		{ID: 2, LogEnd: 17797553, Alive: true},
	}}
	if !holdsMost(g, 0) {
		t.Fatal("the home broker holds the most log but may not be forced")
	}
	if holdsMost(g, 2) {
		t.Fatal("a broker with less log than another may be forced")
	}
	g.Members[0].Alive = false
	if holdsMost(g, 0) {
		t.Fatal("a broker the leader does not see alive may be forced")
	}
	if holdsMost(g, 7) {
		t.Fatal("a broker that is no member may be forced")
	}
}

// A producer's outage leaves out the time it could not send by design —
// its IDC isolated, or a majority of the IDCs down (powered off or
// isolated) — and counts the rest, an IDC powered off alone included.
func TestChaosOutagesLeaveOutIsolationAndALostMajority(t *testing.T) {
	began := time.Unix(1_000_000, 0)
	sec := func(n int) time.Time { return began.Add(time.Duration(n) * time.Second) }
	ev := func(at, hold int, kind, target string) ChaosEvent {
		return ChaosEvent{At: Millis(at * 1000), Hold: Millis(hold * 1000), Kind: kind, Target: target}
	}
	plan := ChaosPlan{Events: []ChaosEvent{
		ev(10, 30, FaultIsolate, "idc1"),  // idc1 cut off: 10–40 s
		ev(100, 30, FaultPower, "idc2"),   // idc2 off 100–130 s ...
		ev(110, 10, FaultIsolate, "idc3"), // ... and idc3 cut 110–120 s: no majority
		ev(200, 40, FaultPower, "idc1"),   // idc1 off alone: its producer could still send
		ev(300, 5, FaultKill, "idc1/broker"),
	}}
	var sends []sendRecord
	ack := func(idc string, at ...int) {
		for _, n := range at {
			sends = append(sends, sendRecord{producerIDC: idc, end: sec(n)})
		}
	}
	ack("idc1", 5, 50, 95, 135, 195, 250, 400)
	ack("idc2", 5, 30, 55, 80, 95, 135)
	for n := 160; n <= 400; n += 20 {
		ack("idc2", n)
	}
	outs := chaosOutages([]string{"idc1", "idc2", "idc3"}, sends, plan, began, sec(400))
	// idc1: 5→50 is 45 s less 30 s isolated (15 s); 95→135 is 40 s less
	// 10 s without a majority (30 s); 195→250 is 55 s, all counted;
	// 250→400 is 150 s.
	testutil.Equal(t, outs[0].Longest, Millis(150_000), "idc1's longest")
	testutil.Equal(t, outs[0].From, Millis(250_000), "idc1's from")
	// idc2: every gap is 25 s or less but 95→135: 40 s, less 10 s
	// without a majority.
	testutil.Equal(t, outs[1].Longest, Millis(30_000), "idc2's longest")
	testutil.Equal(t, outs[1].From, Millis(95_000), "idc2's from")
	ex := excusedSpans("idc1", []string{"idc1", "idc2", "idc3"}, plan, began)
	testutil.Equal(t, ex.within(sec(0), sec(400)), 40*time.Second, "idc1 excused: 30 s cut off, 10 s without a majority")
	testutil.Equal(t, ex.within(sec(195), sec(250)), time.Duration(0), "an IDC powered off alone excuses nothing")
	ex2 := excusedSpans("idc2", []string{"idc1", "idc2", "idc3"}, plan, began)
	testutil.Equal(t, ex2.within(sec(95), sec(135)), 10*time.Second, "idc2 excused only while a majority was down")
}
