package drill

import (
	"context"
	"fmt"
	"net/netip"
	"time"
)

// netnsSteps are the scenarios only a real network can play (--netns), all
// on idc1 and all healed by removing the cuts:
//
//   - idc-isolated: idc1 cut from every other IDC both ways; its servers and
//     clients still reach each other inside it.
//   - one-way: packets idc1 → idc2 dropped, idc2 → idc1 delivered.
//   - ns-split: idc1's name server reachable from idc1 only.
func (d *drill) netnsSteps() []step {
	if d.network == nil || d.network.topo == nil {
		return nil
	}
	topo := d.network.topo
	i := d.cluster.idcs[0]
	heal := func(ctx context.Context) error { return topo.Heal(ctx) }
	return []step{
		{name: "idc-isolated", failure: "cut", network: true,
			description: "cut " + i.name + " from every other IDC both ways; its own clients stay inside it",
			fail:        func(ctx context.Context) error { return topo.Isolate(ctx, 1) }, restore: heal},
		{name: "one-way", failure: "cut", network: true,
			description: "drop every packet " + i.name + " → " + d.cluster.idcs[1].name + "; the other way is delivered",
			fail:        func(ctx context.Context) error { return topo.CutOneWay(ctx, 1, 2) }, restore: heal},
		{name: "ns-split", failure: "cut", network: true,
			description: i.name + "'s name server reachable from " + i.name + " only",
			fail: func(ctx context.Context) error {
				ns, err := netip.ParseAddrPort(i.namesrv.addr)
				if err != nil {
					return err
				}
				for m := 2; m <= len(d.cluster.idcs); m++ {
					if err := topo.CutService(ctx, m, ns); err != nil {
						return err
					}
				}
				return nil
			}, restore: heal},
	}
}

// startLockAudit starts the lock audit under --netns (nothing on loopback,
// where the network scenarios do not run).
func (d *drill) startLockAudit(ctx context.Context) error {
	if d.network == nil || d.network.topo == nil {
		return nil
	}
	a, err := startLockAudit(ctx, d.cluster, d.opts.Logger)
	if err != nil {
		return err
	}
	d.audit = a
	return nil
}

// judgeLocks adds to every scenario's result what the lock audit saw from
// its failure to its end (results[0] is S1, then one per phase); a queue
// with two owners at once fails the scenario.
func (d *drill) judgeLocks(results []ScenarioResult, phases []*phase) {
	if d.audit == nil || len(results) != len(phases)+1 {
		return
	}
	for k, p := range phases {
		s := d.audit.summary(p.failAt, p.endAt)
		r := &results[k+1]
		r.Locks = &s
		r.Notes = append(r.Notes, s.String())
		if s.Conflicts > 0 {
			r.Recovered = false
		}
	}
}

// networkPhaseResult judges a network scenario. Nothing has crashed, so the
// question is not where traffic moved but whether every IDC kept working on
// its side of the cut and nothing acknowledged was lost:
//
//   - ProducerRTO is the longest stretch, from the cut to the heal, in which
//     the failed IDC's producer had nothing acknowledged (it keeps sending
//     locally, or it fails: then SendErrors counts the failures and a note
//     quotes the first);
//   - FailbackProducer / FailbackConsumer are as for the other scenarios:
//     from the heal to the failed IDC's first local send and receive;
//   - it passes when every IDC's producer had messages acknowledged after
//     the heal and the failed IDC's consumer read its own broker again
//     (and, as every scenario under --netns, when no broker lock table
//     showed a queue with two owners at once: judgeLocks).
//
// Lost and duplicates are counted as everywhere (countWindow).
func networkPhaseResult(sends []sendRecord, recvs map[string][]recvRecord, p *phase) ScenarioResult {
	r := ScenarioResult{Name: p.name, Failure: p.failure, Description: p.description,
		ProducerRTO: -1, ConsumerTakeover: -1, ConsumersMoved: -1, AddrsrvDrop: -1, FailbackProducer: -1, FailbackConsumer: -1}
	failed := p.failedIDC
	countWindow(&r, sends, recvs, p.failAt, p.endAt)

	last, gap := p.failAt, time.Duration(0)
	var firstErr error
	ackedAfterHeal := map[string]bool{}
	for _, s := range sends {
		if s.err == nil && within(s.end, p.restoreAt, p.endAt) {
			ackedAfterHeal[s.producerIDC] = true
		}
		if s.producerIDC != failed || !within(s.end, p.failAt, p.restoreAt) {
			continue
		}
		if s.err != nil {
			if firstErr == nil {
				firstErr = s.err
			}
			continue
		}
		gap = max(gap, s.end.Sub(last))
		last = s.end
	}
	gap = max(gap, p.restoreAt.Sub(last))
	r.ProducerRTO = millis(gap)
	if firstErr != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("%s's producer, while cut: %v", failed, firstErr))
	}
	for _, s := range sends {
		if s.err == nil && s.producerIDC == failed && s.brokerIDC == failed && within(s.end, p.restoreAt, p.endAt) {
			r.FailbackProducer = millis(s.end.Sub(p.restoreAt))
			break
		}
	}
	best := time.Duration(-1)
	for _, rs := range recvs {
		for _, rc := range rs {
			if within(rc.at, p.restoreAt, p.endAt) && rc.consumerIDC == failed && rc.brokerIDC == failed {
				if d := rc.at.Sub(p.restoreAt); best < 0 || d < best {
					best = d
				}
			}
		}
	}
	r.FailbackConsumer = millis(best)

	r.Recovered = r.FailbackConsumer >= 0 && r.FailbackProducer >= 0

	for _, s := range sends {
		if !ackedAfterHeal[s.producerIDC] {
			r.Recovered = false
			r.Notes = append(r.Notes, s.producerIDC+"'s producer had nothing acknowledged after the heal")
			ackedAfterHeal[s.producerIDC] = true // one note per IDC
		}
	}
	if r.FailbackConsumer < 0 {
		r.Notes = append(r.Notes, failed+"'s consumer did not read its own broker after the heal")
	}
	if r.FailbackProducer < 0 {
		r.Notes = append(r.Notes, failed+"'s producer did not send to its own broker after the heal")
	}
	return r
}
