package drill

import (
	"fmt"
	"slices"
	"time"
)

// Liveness of a chaos campaign, from the history: how long each IDC's
// producer went without an acknowledged send while it could by design —
// its IDC not cut off, and a majority of the IDCs up (an isolated IDC's
// producers cannot send, and without a majority the controller elects no
// one) — and how long after the final heal the backlog took to be
// consumed.

// IDCOutage is an IDC producer's longest time without an acknowledgement
// during the faults.
type IDCOutage struct {
	IDC string `json:"idc"`
	// Longest is the longest gap between two acknowledged sends (from the
	// first fault to the first acknowledgement after the heal), less any
	// time the IDC was isolated or fewer than a majority of the IDCs were
	// up (excusedSpans); From is when it began, after the first fault.
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
		excused := excusedSpans(idc, idcs, plan, began)
		prev := began
		for _, t := range acks {
			if !t.After(began) {
				continue
			}
			if gap := t.Sub(prev) - excused.within(prev, t); millis(gap) > o.Longest {
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

// span is a stretch of time, [from, to).
type span struct{ from, to time.Time }

// spans are sorted, disjoint stretches of time.
type spans []span

// within is how long of [from, to) ss cover.
func (ss spans) within(from, to time.Time) time.Duration {
	var d time.Duration
	for _, s := range ss {
		if !s.from.Before(to) {
			break
		}
		d += overlap(from, to, s.from, s.to)
	}
	return d
}

// excusedSpans are the stretches of a campaign in which idc's producer
// could not send by design: its IDC isolated, or fewer than a majority of
// the IDCs up, an IDC counting as down while isolated or powered off (its
// clients may still reach other IDCs' brokers when it is powered off
// alone, so that does not excuse it).
func excusedSpans(idc string, idcs []string, plan ChaosPlan, began time.Time) spans {
	var cuts []time.Time
	for _, e := range plan.Events {
		if e.Kind == FaultIsolate || e.Kind == FaultPower {
			f, t := eventSpan(e, began)
			cuts = append(cuts, f, t)
		}
	}
	slices.SortFunc(cuts, time.Time.Compare)
	cuts = slices.Compact(cuts)
	excusedAt := func(at time.Time) bool {
		down := map[string]bool{}
		for _, e := range plan.Events {
			if e.Kind != FaultIsolate && e.Kind != FaultPower {
				continue
			}
			if f, t := eventSpan(e, began); !at.Before(f) && at.Before(t) {
				if e.Kind == FaultIsolate && e.Target == idc {
					return true
				}
				down[e.Target] = true
			}
		}
		return len(idcs)-len(down) <= len(idcs)/2
	}
	var out spans
	for i := 0; i+1 < len(cuts); i++ {
		from, to := cuts[i], cuts[i+1]
		if !excusedAt(from) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].to.Equal(from) {
			out[n-1].to = to
		} else {
			out = append(out, span{from, to})
		}
	}
	return out
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
