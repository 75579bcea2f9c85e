package e2e

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// drillReport is the part of `zonemq drill --output json` the test checks.
type drillReport struct {
	OK        bool     `json:"ok"`
	Problems  []string `json:"problems"`
	Scenarios []struct {
		Name      string   `json:"name"`
		Failure   string   `json:"failure"`
		Acked     int      `json:"acked"`
		Lost      int      `json:"lost"`
		CrossIDC  int      `json:"crossIdc"`
		Recovered bool     `json:"recovered"`
		Notes     []string `json:"notes"`
		// Locks is the lock audit of --netns runs (nil otherwise).
		Locks *struct {
			Rounds    int `json:"rounds"`
			Conflicts int `json:"conflicts"`
		} `json:"locks"`
	} `json:"scenarios"`
	Totals struct {
		Acked int `json:"acked"`
		Lost  int `json:"lost"`
	} `json:"totals"`
}

// TestE2EDrillShort plays every scenario (S1; S2 and S3 as crash and as
// hang; S4 as clean stop, crash and hang of idc1's consumer processes; S5
// after each) on real processes, in a short mode, and
// checks that no acknowledged message was lost, every scenario recovered and
// S1 stayed inside its IDC.
func TestE2EDrillShort(t *testing.T) {
	if testing.Short() {
		t.Skip("the drill takes about three minutes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	// A port offset of its own, so two test runs on one machine never share
	// the drill's well-known ports.
	offset := strconv.Itoa(10 + os.Getpid()%400)
	drillArgs := []string{"--idcs", "2", "--duration", "5s",
		"--port-offset", offset, "--drain-timeout", "60s"}
	var r drillReport
	runErr := runDrill(t, ctx, &r, drillArgs...)
	if r.Totals.Acked == 0 {
		t.Fatal("the drill acknowledged no message")
	}
	if r.Totals.Lost != 0 {
		t.Errorf("%d acknowledged messages lost", r.Totals.Lost)
	}
	// Every scenario in the report must pass; these must be there. Scenarios
	// added later are checked by the same loop without being listed here.
	want := map[string]bool{"S1/none": false, "S2/kill": false, "S2/hang": false, "S3/kill": false, "S3/hang": false,
		"S4/stop": false, "S4/kill": false, "S4/hang": false}
	for _, s := range r.Scenarios {
		key := s.Name + "/" + s.Failure
		want[key] = true
		if s.Lost != 0 {
			t.Errorf("%s: %d acknowledged messages lost", key, s.Lost)
		}
		if !s.Recovered {
			t.Errorf("%s did not recover: %v", key, s.Notes)
		}
		if s.Name == "S1" && s.CrossIDC != 0 {
			t.Errorf("S1: %d messages crossed IDCs while all were healthy", s.CrossIDC)
		}
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("scenario %s missing from the report", k)
		}
	}
	if !r.OK || runErr != nil {
		t.Errorf("drill failed (exit: %v): %v", runErr, r.Problems)
	}
}

// TestE2EDrillIDCLost plays the idc-lost scenario with every broker group
// replicated synchronously into the other IDC: every process of idc1 is
// SIGKILLed and its data deleted; nothing acknowledged may be lost or
// stranded (the replicas serve it), and idc1 must recover on empty disks.
func TestE2EDrillIDCLost(t *testing.T) {
	if testing.Short() {
		t.Skip("the drill takes about half a minute")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	offset := strconv.Itoa(450 + os.Getpid()%400)
	drillArgs := []string{"--idcs", "2", "--replicas", "2", "--only", "idc-lost",
		"--duration", "4s", "--port-offset", offset, "--drain-timeout", "60s"}
	var r struct {
		OK        bool     `json:"ok"`
		Problems  []string `json:"problems"`
		Scenarios []struct {
			Name      string   `json:"name"`
			Acked     int      `json:"acked"`
			Lost      int      `json:"lost"`
			Stranded  int      `json:"stranded"`
			Recovered bool     `json:"recovered"`
			Notes     []string `json:"notes"`
		} `json:"scenarios"`
	}
	runErr := runDrill(t, ctx, &r, drillArgs...)
	found := false
	for _, s := range r.Scenarios {
		if s.Name != "idc-lost" {
			continue
		}
		found = true
		if s.Acked == 0 || s.Lost != 0 || s.Stranded != 0 || !s.Recovered {
			t.Errorf("idc-lost: acked %d, lost %d, stranded %d, recovered %v %v", s.Acked, s.Lost, s.Stranded, s.Recovered, s.Notes)
		}
	}
	if !found {
		t.Fatal("the drill report has no idc-lost scenario")
	}
	if !r.OK || runErr != nil {
		t.Errorf("the drill failed (exit: %v): %v", runErr, r.Problems)
	}
}
