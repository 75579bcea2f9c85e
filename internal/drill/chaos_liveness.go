package drill

import (
	"fmt"
	"slices"
	"time"
)

// Liveness of a chaos campaign, from the history: how long each IDC's
// producer went without an acknowledged send while its IDC was not cut
// off (an isolated IDC's producers cannot send by design), and how long
// after the final heal the backlog took to be consumed.

// IDCOutage is an IDC producer's longest time without an acknowledgement
// during the faults.
type IDCOutage struct {
	IDC string `json:"idc"`
	// Longest is the longest gap between two acknowledged sends (from the
	// first fault to the first acknowledgement after the heal), less any
	// time the IDC was isolated; From is when it began, after the first
	// fault.
	Longest Millis `json:"longestMs"`
	From    Millis `json:"fromMs"`
	// Faults are the faults in force at some point of that gap.
	Faults []string `json:"faults,omitempty"`
}

// chaosOutages figures every IDC's longest outage.
func chaosOutages(idcs []string, sends []sendRecord, plan ChaosPlan, began, healed time.Time) []IDCOutage {
	var out []IDCOutage
	for _, idc := range idcs {
		var acks []time.Time
		for _, s := range sends {
			if s.producerIDC == idc && s.err == nil {
				acks = append(acks, s.end)
			}
		}
		slices.SortFunc(acks, time.Time.Compare)
		o := IDCOutage{IDC: idc}
		prev := began
		for _, t := range acks {
			if !t.After(began) {
				continue
			}
			if gap := t.Sub(prev) - isolatedFor(idc, plan, began, prev, t); millis(gap) > o.Longest {
				o.Longest, o.From = millis(gap), millis(prev.Sub(began))
				o.Faults = faultsDuring(plan, began, prev, t)
			}
			prev = t
			if t.After(healed) {
				break
			}
		}
		out = append(out, o)
	}
	return out
}

// eventSpan is when e was in force.
func eventSpan(e ChaosEvent, began time.Time) (time.Time, time.Time) {
	from := began.Add(e.At.Duration())
	return from, from.Add(e.Hold.Duration())
}

// overlap is how long [a1,a2) and [b1,b2) share.
func overlap(a1, a2, b1, b2 time.Time) time.Duration {
	from, to := a1, a2
	if b1.After(from) {
		from = b1
	}
	if b2.Before(to) {
		to = b2
	}
	return max(0, to.Sub(from))
}

// isolatedFor is how long within [from, to) idc was isolated.
func isolatedFor(idc string, plan ChaosPlan, began, from, to time.Time) time.Duration {
	var d time.Duration
	for _, e := range plan.Events {
		if e.Kind == FaultIsolate && e.Target == idc {
			f, t := eventSpan(e, began)
			d += overlap(from, to, f, t)
		}
	}
	return min(d, to.Sub(from))
}

// faultsDuring names the faults in force at some point of [from, to).
func faultsDuring(plan ChaosPlan, began, from, to time.Time) []string {
	var out []string
	for _, e := range plan.Events {
		f, t := eventSpan(e, began)
		if overlap(from, to, f, t) > 0 {
			out = append(out, fmt.Sprintf("%s %s at %s", e.Kind, e.Target, e.At))
		}
	}
	return out
}

// chaosDrain is the time from the heal until the last message
// acknowledged by then was first consumed (0: nothing was waiting).
func chaosDrain(sends []sendRecord, recvs map[string][]recvRecord, healed time.Time) Millis {
	var last time.Time
	for _, s := range sends {
		if s.err != nil || s.end.After(healed) {
			continue
		}
		var first time.Time
		for _, r := range recvs[s.key] {
			if first.IsZero() || r.at.Before(first) {
				first = r.at
			}
		}
		if first.After(last) {
			last = first
		}
	}
	if !last.After(healed) {
		return 0
	}
	return millis(last.Sub(healed))
}
