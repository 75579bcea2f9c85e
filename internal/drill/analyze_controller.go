package drill

import (
	"context"
	"fmt"
	"time"

	"github.com/zonemq/zonemq/internal/ledger"
)

// checkGrace is how long after its election an epoch counts as in force
// for the fencing check: the controller's history keeps milliseconds, and
// a send may leave just before the election.
const checkGrace = 50 * time.Millisecond

// checkInput is the whole run as the ledger checker reads it: the
// workload's acknowledgements and deliveries, the ordered topic's, and
// (in controller mode) the controller's epoch history.
func (d *drill) checkInput(ctx context.Context, sends []sendRecord, recvs map[string][]recvRecord) (ledger.Input, error) {
	in := ledger.Input{Grace: checkGrace}
	for _, s := range sends {
		if s.err != nil {
			in.Unacked = append(in.Unacked, s.key)
			continue
		}
		in.Acks = append(in.Acks, ledger.Ack{Key: s.key, Group: s.broker, Addr: s.brokerAddr, Queue: s.queue,
			Offset: s.offset, Epoch: s.epoch, SentAt: s.start, AckedAt: s.end})
	}
	for key, rs := range recvs {
		for _, r := range rs {
			in.Consumptions = append(in.Consumptions, ledger.Consumption{Key: key, Consumer: r.consumerIDC, Group: r.broker,
				Queue: r.queue, Offset: r.offset, At: r.at})
		}
	}
	if d.ordered != nil {
		acks, cons, failed := d.ordered.snapshot()
		in.Acks = append(in.Acks, acks...)
		in.Unacked = append(in.Unacked, failed...)
		in.Consumptions = append(in.Consumptions, cons...)
	}
	if d.pull != nil {
		acks, cons, failed := d.pull.snapshot()
		in.Acks = append(in.Acks, acks...)
		in.Unacked = append(in.Unacked, failed...)
		in.Consumptions = append(in.Consumptions, cons...)
	}
	for _, w := range d.peers {
		acks, cons, failed := w.snapshot()
		in.Acks = append(in.Acks, acks...)
		in.Unacked = append(in.Unacked, failed...)
		in.Consumptions = append(in.Consumptions, cons...)
	}
	if d.ctl != nil {
		var err error
		deadline := time.Now().Add(10 * time.Second)
		for {
			in.History, err = d.ctl.history(ctx)
			if err == nil || time.Now().After(deadline) {
				break
			}
			if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
				return in, err
			}
		}
		if err != nil {
			return in, fmt.Errorf("drill: reading the controller's epoch history: %w", err)
		}
	}
	return in, nil
}

// controllerPhaseResult figures a controller scenario from the checker's
// input: when the controller elected (from its history), when the group
// took writes and delivered them again, and what the ledger says of the
// window from the failure to the end of the phase.
func controllerPhaseResult(in ledger.Input, sends []sendRecord, recvs map[string][]recvRecord, p *phase) ScenarioResult {
	r := ScenarioResult{Name: p.name, Failure: p.failure, Description: p.description, Group: p.group,
		ProducerRTO: -1, ConsumerTakeover: -1, ConsumersMoved: -1, AddrsrvDrop: -1, FailbackProducer: -1, FailbackConsumer: -1,
		NewMaster: -1, ConsumerRTO: -1, Failback: -1}
	countWindow(&r, sends, recvs, p.failAt, p.endAt)
	affected := func(group string) bool { return p.group == "" || group == p.group }

	// Time to a new master, from the controller's view: the first
	// election of an affected group after the failure and before the
	// repair. Two IDCs lost: any epoch the surviving voter changed.
	electedAlone := false
	for g, e := range p.epochsDuring {
		if e != p.epochsBefore[g] {
			electedAlone = true
		}
	}
	for _, e := range in.History {
		if p.group != "" && affected(e.Group) && within(e.At, p.failAt, p.restoreAt) {
			if d := e.At.Sub(p.failAt); r.NewMaster < 0 || millis(d) < r.NewMaster {
				r.NewMaster = millis(d)
			}
		}
	}
	if !p.failbackAt.IsZero() {
		r.Failback = millis(p.failbackAt.Sub(p.restoreAt))
	}

	// Producer and consumer RTO for the group: the first send started
	// after the failure that the group acknowledged, and the first
	// delivery of such a message. Two IDCs lost: from the repair.
	from, to := p.failAt, p.restoreAt
	if p.group == "" {
		from, to = p.restoreAt, p.endAt
	}
	first := map[string]time.Time{}
	for _, c := range in.Consumptions {
		if t, ok := first[c.Key]; !ok || c.At.Before(t) {
			first[c.Key] = c.At
		}
	}
	for _, a := range in.Acks {
		if !affected(a.Group) || !a.SentAt.After(from) || !a.AckedAt.Before(to) {
			continue
		}
		if d := millis(a.AckedAt.Sub(from)); r.ProducerRTO < 0 || d < r.ProducerRTO {
			r.ProducerRTO = d
		}
		if t, ok := first[a.Key]; ok {
			if d := millis(t.Sub(from)); d >= 0 && (r.ConsumerRTO < 0 || d < r.ConsumerRTO) {
				r.ConsumerRTO = d
			}
		}
	}
	if p.group == "" {
		// With two IDCs of three lost, every copy but one is gone: a send
		// started after the loss and acknowledged before the repair was
		// acknowledged on one copy.
		for _, a := range in.Acks {
			if a.SentAt.After(p.lostAt) && a.AckedAt.Before(p.restoreAt) {
				r.OneCopyAcks++
				if r.OneCopyAcks <= 3 {
					r.Notes = append(r.Notes, fmt.Sprintf("%s acknowledged by %s (%s) %s after both IDCs were lost",
						a.Key, a.Group, a.Addr, a.AckedAt.Sub(p.lostAt).Round(time.Millisecond)))
				}
			}
		}
	}

	// The ledger over the window: lost and fenced acknowledgements.
	var window ledger.Input
	window.History, window.Grace, window.Consumptions = in.History, in.Grace, in.Consumptions
	for _, a := range in.Acks {
		if within(a.AckedAt, p.failAt, p.endAt) {
			window.Acks = append(window.Acks, a)
		}
	}
	res := ledger.Check(window)
	r.Lost, r.FencedAcks = res.Lost, res.FencedAcks
	r.Notes = append(r.Notes, res.FencedExamples...)
	r.Notes = append(r.Notes, res.LostExamples...)

	if p.group == "" {
		if electedAlone {
			r.Notes = append(r.Notes, fmt.Sprintf("a master was elected without a controller majority (epochs %v, before %v)",
				p.epochsDuring, p.epochsBefore))
		}
		if r.OneCopyAcks > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("%d sends acknowledged with two IDCs of three lost", r.OneCopyAcks))
		}
		if r.ProducerRTO < 0 {
			r.Notes = append(r.Notes, "no write was acknowledged after the repair")
		}
	} else {
		if r.NewMaster < 0 {
			r.Notes = append(r.Notes, "the controller elected no new master for "+p.group)
		}
		if r.ProducerRTO < 0 {
			r.Notes = append(r.Notes, p.group+" acknowledged no write after the failure")
		}
		if r.ConsumerRTO < 0 {
			r.Notes = append(r.Notes, "no write "+p.group+" acknowledged after the failure was consumed before the repair")
		}
	}
	r.Recovered = r.Lost == 0 && r.FencedAcks == 0 && len(r.Notes) == 0
	return r
}
