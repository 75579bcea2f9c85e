package drill

import (
	"fmt"
	"time"
)

// analyze turns the ledger and the played phases into the report's figures.
// s1 is the healthy window before the first failure.
func analyze(sends []sendRecord, recvs map[string][]recvRecord, s1Start, s1End time.Time, phases []*phase) ([]ScenarioResult, Totals) {
	var out []ScenarioResult
	out = append(out, healthyResult(sends, recvs, s1Start, s1End))
	for _, p := range phases {
		if p.network {
			out = append(out, networkPhaseResult(sends, recvs, p))
			continue
		}
		out = append(out, phaseResult(sends, recvs, p))
	}
	var t Totals
	for _, s := range sends {
		t.Sent++
		if s.err != nil {
			t.SendErrors++
			continue
		}
		t.Acked++
		switch n := len(recvs[s.key]); {
		case n == 0:
			t.Lost++
		case n > 1:
			t.Duplicates += n - 1
		}
		if len(recvs[s.key]) > 0 {
			t.Consumed++
		}
	}
	return out, t
}

func within(t, from, to time.Time) bool { return !t.Before(from) && t.Before(to) }

// countWindow fills the counters every scenario shares: sends, acks and
// losses by the time a send ended in [from, to), and duplicates by the time
// the repeated delivery happened in [from, to), so a message stored while
// healthy and delivered again after a later crash counts for the crash.
func countWindow(r *ScenarioResult, sends []sendRecord, recvs map[string][]recvRecord, from, to time.Time) {
	for _, s := range sends {
		if !within(s.end, from, to) {
			continue
		}
		if s.err != nil {
			r.SendErrors++
			continue
		}
		r.Acked++
		if len(recvs[s.key]) == 0 {
			r.Lost++
		}
	}
	for _, rs := range recvs {
		if len(rs) < 2 {
			continue
		}
		first := rs[0].at
		for _, rc := range rs[1:] {
			if rc.at.Before(first) {
				first = rc.at
			}
		}
		skipped := false // the first delivery is not a duplicate
		for _, rc := range rs {
			if !skipped && rc.at.Equal(first) {
				skipped = true
				continue
			}
			if within(rc.at, from, to) {
				r.Duplicates++
			}
		}
	}
}

func healthyResult(sends []sendRecord, recvs map[string][]recvRecord, from, to time.Time) ScenarioResult {
	r := ScenarioResult{Name: "S1", Failure: "none", Description: "all IDCs healthy: traffic must stay in its IDC",
		ProducerRTO: -1, ConsumerTakeover: -1, ConsumersMoved: -1, AddrsrvDrop: -1, FailbackProducer: -1, FailbackConsumer: -1}
	countWindow(&r, sends, recvs, from, to)
	for _, s := range sends {
		if s.err == nil && within(s.end, from, to) && s.brokerIDC != s.producerIDC {
			r.CrossIDC++
		}
	}
	for _, rs := range recvs {
		for _, rc := range rs {
			if within(rc.at, from, to) && rc.consumerIDC != rc.brokerIDC {
				r.CrossIDC++
			}
		}
	}
	r.Recovered = r.Acked > 0 && r.CrossIDC == 0
	if r.Acked == 0 {
		r.Notes = append(r.Notes, "no message was acknowledged while healthy")
	}
	return r
}

func phaseResult(sends []sendRecord, recvs map[string][]recvRecord, p *phase) ScenarioResult {
	r := ScenarioResult{Name: p.name, Failure: p.failure, Description: p.description,
		ProducerRTO: -1, ConsumerTakeover: -1, ConsumersMoved: -1, AddrsrvDrop: -1, FailbackProducer: -1, FailbackConsumer: -1}
	if p.addrsrvDrop != 0 {
		r.AddrsrvDrop = millis(p.addrsrvDrop)
	}
	failed := p.failedIDC
	countWindow(&r, sends, recvs, p.failAt, p.endAt)

	firstAfter := func(from, to time.Time, ok func(sendRecord) bool) time.Duration {
		for _, s := range sends {
			if s.err == nil && within(s.end, from, to) && ok(s) {
				return s.end.Sub(from)
			}
		}
		return -1
	}
	firstRecv := func(from, to time.Time, ok func(recvRecord) bool) time.Duration {
		best := time.Duration(-1)
		for _, rs := range recvs {
			for _, rc := range rs {
				if within(rc.at, from, to) && ok(rc) {
					if d := rc.at.Sub(from); best < 0 || d < best {
						best = d
					}
				}
			}
		}
		return best
	}

	if !p.consumers {
		r.ProducerRTO = millis(firstAfter(p.failAt, p.restoreAt, func(s sendRecord) bool {
			return s.producerIDC == failed && s.brokerIDC != failed
		}))
		// The failed IDC's traffic, redirected to another IDC's broker, is
		// being consumed again: by its own consumers or that IDC's.
		redirected := map[string]bool{}
		for _, s := range sends {
			if s.err == nil && s.producerIDC == failed && s.brokerIDC != failed && within(s.end, p.failAt, p.restoreAt) {
				redirected[s.key] = true
			}
		}
		best := time.Duration(-1)
		for key := range redirected {
			for _, rc := range recvs[key] {
				if d := rc.at.Sub(p.failAt); within(rc.at, p.failAt, p.restoreAt) && (best < 0 || d < best) {
					best = d
				}
			}
		}
		r.ConsumerTakeover = millis(best)
		r.ConsumersMoved = millis(firstRecv(p.failAt, p.restoreAt, func(rc recvRecord) bool {
			return rc.consumerIDC == failed && rc.brokerIDC != failed
		}))
		r.FailbackProducer = millis(firstAfter(p.restoreAt, p.endAt, func(s sendRecord) bool {
			return s.producerIDC == failed && s.brokerIDC == failed
		}))
	} else {
		r.ConsumerTakeover = millis(firstRecv(p.failAt, p.restoreAt, func(rc recvRecord) bool {
			return rc.consumerIDC != failed && rc.brokerIDC == failed
		}))
	}
	r.FailbackConsumer = millis(firstRecv(p.restoreAt, p.endAt, func(rc recvRecord) bool {
		return rc.consumerIDC == failed && rc.brokerIDC == failed
	}))

	// Stranded: acknowledged by the failed IDC's broker before the failure,
	// not yet read when it failed, and delivered only after the repair.
	if !p.consumers {
		for _, s := range sends {
			if s.err != nil || s.brokerIDC != failed || !s.end.Before(p.failAt) {
				continue
			}
			rs := recvs[s.key]
			if len(rs) == 0 {
				continue
			}
			first := rs[0].at
			for _, rc := range rs[1:] {
				if rc.at.Before(first) {
					first = rc.at
				}
			}
			if !first.Before(p.restoreAt) {
				r.Stranded++
			}
		}
	}

	switch {
	case !p.consumers && r.ProducerRTO < 0:
		r.Notes = append(r.Notes, fmt.Sprintf("%s's producer never reached another IDC's broker", failed))
	case p.consumers && r.ConsumerTakeover < 0:
		r.Notes = append(r.Notes, fmt.Sprintf("no other IDC's consumer read %s's broker", failed))
	}
	if r.FailbackConsumer < 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%s's consumer did not read its own broker again after the repair", failed))
	}
	if !p.consumers && r.FailbackProducer < 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%s's producer did not return to its own broker after the repair", failed))
	}
	r.Recovered = len(r.Notes) == 0
	return r
}
