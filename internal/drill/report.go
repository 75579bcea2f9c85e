package drill

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zonemq/zonemq/internal/ledger"
)

// Millis is a duration in milliseconds; -1 means "not observed".
type Millis int64

func millis(d time.Duration) Millis {
	if d < 0 {
		return -1
	}
	return Millis(d / time.Millisecond)
}

func (m Millis) String() string {
	if m < 0 {
		return "—"
	}
	return fmt.Sprintf("%.2fs", float64(m)/1000)
}

// ScenarioResult holds the figures of one scenario.
type ScenarioResult struct {
	Name        string `json:"name"`
	Failure     string `json:"failure"`
	Description string `json:"description"`
	// ProducerRTO: from the failure to the first message of the failed
	// IDC's producers acknowledged by another IDC's broker.
	ProducerRTO Millis `json:"producerRtoMs"`
	// ConsumerTakeover: from the failure to the first message consumed the
	// new way. S2/S3: a message the failed IDC's producer sent to another
	// IDC's broker after the failure is consumed (by any IDC's consumer).
	// S4: another IDC's consumer reads the failed IDC's broker.
	ConsumerTakeover Millis `json:"consumerTakeoverMs"`
	// ConsumersMoved: S2/S3 only, from the failure until the failed IDC's
	// own consumers read another IDC's broker (they join its queues once
	// the routes show their IDC without a live broker).
	ConsumersMoved Millis `json:"consumersMovedMs"`
	// AddrsrvDrop: S3 only, from the failure until the failed IDC's address
	// server stopped listing its name server.
	AddrsrvDrop Millis `json:"addrsrvDropMs"`
	// FailbackProducer / FailbackConsumer: from the repair to the first
	// message the failed IDC's producer / consumer carried locally again.
	FailbackProducer Millis `json:"failbackProducerMs"`
	FailbackConsumer Millis `json:"failbackConsumerMs"`
	// Controller scenarios only (zero elsewhere). Group is the broker
	// group whose master failed (empty: every group). NewMaster: from the
	// failure to the controller's election of a new master (its epoch
	// history; -1 when none, as two-idcs-lost requires). ProducerRTO is
	// then the group's: from the failure to the first acknowledgement by
	// the group of a send started after it; ConsumerRTO to the first
	// delivery of such a message. Failback: from the repair until the
	// group's home broker was master again. FencedAcks: acknowledgements
	// the ledger checker proves a fenced master gave (target 0).
	// OneCopyAcks (two-idcs-lost): sends acknowledged while two IDCs of
	// three were lost (target 0).
	Group       string `json:"group,omitempty"`
	NewMaster   Millis `json:"newMasterMs,omitempty"`
	ConsumerRTO Millis `json:"consumerRtoMs,omitempty"`
	Failback    Millis `json:"failbackMs,omitempty"`
	FencedAcks  int    `json:"fencedAcks"`
	OneCopyAcks int    `json:"oneCopyAcks"`

	SendErrors int      `json:"sendErrors"`
	Acked      int      `json:"acked"`
	Lost       int      `json:"lost"`
	Stranded   int      `json:"stranded"`
	Duplicates int      `json:"duplicates"`
	CrossIDC   int      `json:"crossIdc"`
	Recovered  bool     `json:"recovered"`
	Notes      []string `json:"notes,omitempty"`
	// Locks, under --netns, is the orderly group's queue ownership as every
	// broker's lock table showed it from the failure to the phase's end
	// (lockaudit.go).
	Locks *LockAudit `json:"locks,omitempty"`
}

// Totals sums the whole run.
type Totals struct {
	Sent       int `json:"sent"`
	Acked      int `json:"acked"`
	SendErrors int `json:"sendErrors"`
	Consumed   int `json:"consumedKeys"`
	Lost       int `json:"lost"`
	Duplicates int `json:"duplicates"`
}

// Report is the drill's result.
type Report struct {
	IDCs        int              `json:"idcs"`
	PhaseMillis Millis           `json:"phaseMs"`
	StartedAt   time.Time        `json:"startedAt"`
	Elapsed     Millis           `json:"elapsedMs"`
	Scenarios   []ScenarioResult `json:"scenarios"`
	Totals      Totals           `json:"totals"`
	// Check is the ledger checker's verdict over the whole run, the
	// ordered topic included (internal/ledger).
	Check *ledger.Result `json:"check,omitempty"`
	// Chaos summarises a chaos campaign's faults (nil for the scenarios);
	// the S1 row then covers the healthy window after the heal.
	Chaos *ChaosSummary `json:"chaos,omitempty"`
	// Replicas compares each group's copies of the commit log after a
	// chaos campaign (--replicas 2 or more), their brokers stopped.
	Replicas []GroupCopies `json:"replicas,omitempty"`
	// Workloads are each application's acknowledged sends and the
	// distinct keys delivered to it (the checker's input, by workload).
	Workloads []WorkloadCount `json:"workloads,omitempty"`
	OK        bool            `json:"ok"`
	Problems  []string        `json:"problems,omitempty"`
}

// WriteJSON writes the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeControllerTable writes the controller scenarios' figures.
func (r *Report) writeControllerTable(w io.Writer) {
	var rows []ScenarioResult
	for _, s := range r.Scenarios {
		if s.Group != "" || s.NewMaster != 0 {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tgroup\tnew master\tproducer RTO\tconsumer RTO\tfail-back\tsend errors\tacked\tlost\tfenced acks\tone-copy acks\tdup\tpassed\t")
	for _, s := range rows {
		group := s.Group
		if group == "" {
			group = "all"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t\n", s.Name, group, s.NewMaster, s.ProducerRTO,
			s.ConsumerRTO, s.Failback, s.SendErrors, s.Acked, s.Lost, s.FencedAcks, s.OneCopyAcks, s.Duplicates, s.Recovered)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nnew master: from the failure to the controller's election (its epoch history); RTOs: the group's first")
	fmt.Fprintln(w, "acknowledged write sent after the failure and its first delivery (two-idcs-lost: after the repair)")
}

// WriteText writes the report as a readable table.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "zonemq drill: %d IDCs, %s per phase, %s in all\n\n", r.IDCs, r.PhaseMillis, r.Elapsed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tfailure\tproducer RTO\ttakeover\tconsumers moved\tns delisted\tfail-back p/c\tsend errors\tacked\tlost\tstranded\tdup\tcross-IDC\trecovered\t")
	for _, s := range r.Scenarios {
		if s.Group != "" || s.NewMaster != 0 {
			continue // the controller table below
		}
		fb := "—"
		if s.Name != "S1" {
			fb = s.FailbackProducer.String() + "/" + s.FailbackConsumer.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t\n",
			s.Name, s.Failure, s.ProducerRTO, s.ConsumerTakeover, s.ConsumersMoved, s.AddrsrvDrop, fb,
			s.SendErrors, s.Acked, s.Lost, s.Stranded, s.Duplicates, s.CrossIDC, s.Recovered)
	}
	tw.Flush()
	fmt.Fprintln(w, "\ntimes from the failure (fail-back: from the repair); acked/lost by the time a send ended, dup by the time")
	fmt.Fprintln(w, "the repeated delivery happened; docs/disaster-recovery.md explains every column")
	r.writeControllerTable(w)
	if c := r.Check; c != nil {
		fmt.Fprintf(w, "\nledger check: %d acknowledged, %d consumed, %d lost, %d unexpected (%d stored twice), %d duplicates %v, "+
			"%d acknowledged by a fenced master (%d not checkable), %d order keys with %d out-of-order deliveries\n",
			c.Acked, c.Consumed, c.Lost, c.Unexpected, c.StoredTwice, c.Duplicates, c.DuplicateCauses, c.FencedAcks, c.Unchecked,
			c.OrderedKeys, c.OrderViolations)
		if c.EpochHistory != "" {
			fmt.Fprintf(w, "controller epoch history as a register: %s\n", c.EpochHistory)
		}
		for _, ex := range slices.Concat(c.LostExamples, c.UnexpectedExamples, c.FencedExamples, c.OrderExamples) {
			fmt.Fprintf(w, "  %s\n", ex)
		}
	}
	if len(r.Workloads) > 0 {
		fmt.Fprintf(w, "workloads (acknowledged / keys delivered):")
		for _, wl := range r.Workloads {
			fmt.Fprintf(w, " %s %d/%d", wl.Name, wl.Acked, wl.Delivered)
		}
		fmt.Fprintln(w)
	}
	r.writeChaos(w)
	t := r.Totals
	fmt.Fprintf(w, "\ntotals: %d sent, %d acknowledged, %d send errors, %d consumed, %d lost, %d duplicates\n",
		t.Sent, t.Acked, t.SendErrors, t.Consumed, t.Lost, t.Duplicates)
	for _, s := range r.Scenarios {
		for _, n := range s.Notes {
			fmt.Fprintf(w, "note %s %s: %s\n", s.Name, s.Failure, n)
		}
	}
	if r.OK {
		fmt.Fprintln(w, "result: OK (no acknowledged message lost, every scenario recovered, S1 stayed local)")
	} else {
		fmt.Fprintf(w, "result: FAILED: %s\n", strings.Join(r.Problems, "; "))
	}
	return nil
}

// writeChaos writes a campaign's faults, liveness, copies and timeline.
func (r *Report) writeChaos(w io.Writer) {
	c := r.Chaos
	if c == nil {
		return
	}
	fmt.Fprintf(w, "\nchaos: seed %d, %d faults %v over %s (plan: %s)\n", c.Seed, c.Faults, c.ByKind, c.Duration, c.PlanFile)
	for _, o := range c.Outages {
		fmt.Fprintf(w, "  %s producer: longest without an acknowledgement %s (not counting its IDC cut off or a majority of IDCs down), from %s (faults then: %s)\n",
			o.IDC, o.Longest, o.From, strings.Join(o.Faults, "; "))
	}
	fmt.Fprintf(w, "  backlog consumed %s after the heal\n", c.Drain)
	for _, f := range c.Forced {
		fmt.Fprintf(w, "  operator step: %s\n", f)
	}
	for _, g := range r.Replicas {
		state := "identical"
		if g.DivergesAt >= 0 || g.Detail != "" {
			state = "NOT identical: " + g.Detail
		}
		fmt.Fprintf(w, "  %s: %d copies, %d bytes compared, %s\n", g.Group, len(g.Copies), g.Compared, state)
	}
	if c.timelineText != "" {
		fmt.Fprintln(w)
		io.WriteString(w, c.timelineText)
	}
	fmt.Fprintf(w, "  picture: %s\n", c.Timeline)
}

// WorkloadCount is what one workload sent and got.
type WorkloadCount struct {
	Name      string `json:"name"`
	Acked     int    `json:"acked"`
	Delivered int    `json:"delivered"`
}

// countWorkload counts acks and the distinct keys delivered.
func countWorkload(name string, acks []ledger.Ack, recvs []ledger.Consumption) WorkloadCount {
	keys := make(map[string]bool, len(recvs))
	for _, c := range recvs {
		keys[c.Key] = true
	}
	return WorkloadCount{Name: name, Acked: len(acks), Delivered: len(keys)}
}
