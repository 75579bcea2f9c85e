package e2e

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestE2EDrillController plays the failover controller's scenarios
// (issue 10) on real processes: 3 IDCs, a controller voter in every IDC's
// name server, every broker group spanning the 3 IDCs with sync
// replication and two copies required. It checks every scenario passed,
// nothing acknowledged was lost, no fenced master acknowledged (every
// acknowledgement carries an epoch the ledger checked against the
// controller's history), nothing was acknowledged on one copy with two
// IDCs lost, and the ordered topic kept every key's order through the
// failovers and fail-backs.
func TestE2EDrillController(t *testing.T) {
	if testing.Short() {
		t.Skip("the controller drill takes about a minute")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// A port offset of its own (the other drill tests use 10..849).
	offset := strconv.Itoa(900 + os.Getpid()%400)
	drillArgs := []string{"--idcs", "3", "--replicas", "3",
		"--only", "master-kill,master-partition,controller-idc-lost,two-idcs-lost",
		"--duration", "4s", "--port-offset", offset, "--drain-timeout", "60s"}
	var r struct {
		OK        bool     `json:"ok"`
		Problems  []string `json:"problems"`
		Scenarios []struct {
			Name        string   `json:"name"`
			Group       string   `json:"group"`
			NewMaster   int64    `json:"newMasterMs"`
			ProducerRTO int64    `json:"producerRtoMs"`
			ConsumerRTO int64    `json:"consumerRtoMs"`
			Acked       int      `json:"acked"`
			Lost        int      `json:"lost"`
			FencedAcks  int      `json:"fencedAcks"`
			OneCopyAcks int      `json:"oneCopyAcks"`
			Duplicates  int      `json:"duplicates"`
			Recovered   bool     `json:"recovered"`
			Notes       []string `json:"notes"`
		} `json:"scenarios"`
		Check struct {
			Acked           int `json:"acked"`
			Lost            int `json:"lost"`
			FencedAcks      int `json:"fencedAcks"`
			Unchecked       int `json:"unchecked"`
			OrderedKeys     int `json:"orderedKeys"`
			OrderViolations int `json:"orderViolations"`
		} `json:"check"`
	}
	runErr := runDrill(t, ctx, &r, drillArgs...)
	seen := map[string]bool{}
	for _, s := range r.Scenarios {
		if s.Name == "S1" {
			continue
		}
		seen[s.Name] = true
		if s.Acked == 0 || s.Lost != 0 || s.FencedAcks != 0 || s.OneCopyAcks != 0 || !s.Recovered {
			t.Errorf("%s: acked %d, lost %d, fenced acks %d, one-copy acks %d, passed %v %v",
				s.Name, s.Acked, s.Lost, s.FencedAcks, s.OneCopyAcks, s.Recovered, s.Notes)
		}
		if s.Name == "two-idcs-lost" {
			if s.NewMaster >= 0 {
				t.Errorf("two-idcs-lost: a master was elected %d ms after the loss, without a majority", s.NewMaster)
			}
		} else if s.NewMaster < 0 || s.ProducerRTO < 0 || s.ConsumerRTO < 0 {
			t.Errorf("%s: new master %d ms, producer RTO %d ms, consumer RTO %d ms", s.Name, s.NewMaster, s.ProducerRTO, s.ConsumerRTO)
		}
		t.Logf("%s (%s): new master %d ms, producer RTO %d ms, consumer RTO %d ms, %d duplicates",
			s.Name, s.Group, s.NewMaster, s.ProducerRTO, s.ConsumerRTO, s.Duplicates)
	}
	for _, name := range []string{"master-kill", "master-partition", "controller-idc-lost", "two-idcs-lost"} {
		if !seen[name] {
			t.Errorf("scenario %s missing from the report", name)
		}
	}
	c := r.Check
	if c.Acked == 0 || c.Lost != 0 || c.FencedAcks != 0 || c.Unchecked != 0 || c.OrderedKeys == 0 || c.OrderViolations != 0 {
		t.Errorf("ledger check: %+v", c)
	}
	if !r.OK || runErr != nil {
		t.Errorf("the drill failed (exit: %v): %v", runErr, r.Problems)
	}
}
