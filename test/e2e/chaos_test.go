package e2e

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// chaosSeed and the default length of TestE2EChaosFixedSeed: the fixed-seed
// campaign every CI run plays (issue 23). ZONEMQ_CHAOS_DURATION changes
// the length (e.g. 30s while working on something else).
const (
	chaosSeed     = 1
	chaosDuration = 3 * time.Minute
)

// TestE2EChaosFixedSeed plays a seeded chaos campaign on real processes —
// 3 IDCs, every broker group with 3 copies under the controller; random
// kills, SIGSTOPs and clean stops of brokers, name servers with their
// voters, address servers and clients (rocketmq-client-go's and the
// RocketMQ 5 client's among them), damaged replica files and voters' Raft
// logs, brokers' wall clocks stepped, and (with FUSE) an
// IDC's power loss or full disk, one at a time or overlapping — and
// checks the history: no acknowledged message lost, nothing unexpected, no
// fenced ack, a linearizable epoch history, no order break on the
// strict-order keys, identical copies, and every fault was injected. A failure names the
// seed; `zonemq drill --chaos --replay` plays its plan file again.
func TestE2EChaosFixedSeed(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos campaign takes about four minutes")
	}
	d := chaosDuration
	if v := os.Getenv("ZONEMQ_CHAOS_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			t.Fatalf("ZONEMQ_CHAOS_DURATION=%q: want a positive duration", v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Minute)
	defer cancel()
	offset := strconv.Itoa(900 + os.Getpid()%400)
	var r struct {
		OK       bool     `json:"ok"`
		Problems []string `json:"problems"`
		Check    struct {
			Acked           int    `json:"acked"`
			Lost            int    `json:"lost"`
			Duplicates      int    `json:"duplicates"`
			FencedAcks      int    `json:"fencedAcks"`
			OrderViolations int    `json:"orderViolations"`
			Unexpected      int    `json:"unexpected"`
			EpochHistory    string `json:"epochHistory"`
		} `json:"check"`
		Replicas []struct {
			Group      string `json:"group"`
			Compared   int64  `json:"comparedBytes"`
			DivergesAt int64  `json:"divergesAt"`
			Detail     string `json:"detail"`
		} `json:"replicas"`
		Chaos struct {
			Seed     uint64         `json:"seed"`
			PlanFile string         `json:"planFile"`
			Faults   int            `json:"faults"`
			ByKind   map[string]int `json:"byKind"`
		} `json:"chaos"`
	}
	// Every kind that applies on loopback: the process faults, corrupt,
	// clock, and with FUSE (root, /dev/fuse) power and disk-full; the
	// drill says so where FUSE is missing and plays the others. Every
	// workload runs: the SDK's (push, pull, orderly), the stock remoting Go
	// client and the RocketMQ 5 Go client through an access point per IDC.
	runErr := runDrill(t, ctx, &r, "--chaos", "--seed", strconv.Itoa(chaosSeed), "--duration", d.String(),
		"--port-offset", offset, "--drain-timeout", "90s", "--stock-peer", rmqpeer, "--v5-peer", v5peer)
	t.Logf("chaos seed %d: %d faults %v; %d acknowledged, %d lost, %d unexpected, %d duplicates, %d fenced acks, %d order breaks, epoch history %s",
		r.Chaos.Seed, r.Chaos.Faults, r.Chaos.ByKind, r.Check.Acked, r.Check.Lost, r.Check.Unexpected, r.Check.Duplicates,
		r.Check.FencedAcks, r.Check.OrderViolations, r.Check.EpochHistory)
	switch {
	case r.Check.Acked == 0:
		t.Error("the campaign acknowledged no message")
	case r.Chaos.Faults == 0:
		t.Error("the campaign injected no fault")
	}
	if r.Check.Lost != 0 || r.Check.Unexpected != 0 || r.Check.FencedAcks != 0 || r.Check.OrderViolations != 0 {
		t.Errorf("seed %d: %d lost, %d unexpected, %d fenced acks, %d order breaks (replay: zonemq drill --chaos --replay %s)",
			r.Chaos.Seed, r.Check.Lost, r.Check.Unexpected, r.Check.FencedAcks, r.Check.OrderViolations, r.Chaos.PlanFile)
	}
	// The campaign runs 3 IDCs, 3 copies per group, under the controller:
	// its epoch history is checked, and the copies compared.
	if r.Check.EpochHistory != "linearizable" {
		t.Errorf("the controller's epoch history: %q, want linearizable", r.Check.EpochHistory)
	}
	if len(r.Replicas) != 3 {
		t.Errorf("compared %d groups' copies, want 3", len(r.Replicas))
	}
	for _, g := range r.Replicas {
		if g.DivergesAt >= 0 || g.Detail != "" || g.Compared == 0 {
			t.Errorf("%s's copies: %d bytes compared, diverge at %d: %s", g.Group, g.Compared, g.DivergesAt, g.Detail)
		}
	}
	if !r.OK || runErr != nil {
		t.Errorf("the campaign failed (exit: %v): %v", runErr, r.Problems)
	}
}
