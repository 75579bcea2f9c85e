package drill

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// The controller scenarios (issue 10), played in controller mode on broker
// groups that span the IDCs (each group's master in its own IDC, its
// replicas in the next ones). The controller, not the drill, elects new
// masters; the drill only fails processes, watches the controller, and
// after each repair gives the group back to its home broker through the
// controller (a planned switch, so nothing acknowledged can be lost).
var controllerScenarios = []string{"master-kill", "master-partition", "controller-idc-lost", "two-idcs-lost"}

// electionLimit bounds the wait for the controller to elect a new master
// (the target is 3 s; this only keeps a broken run from hanging).
const electionLimit = 30 * time.Second

// failbackLimit bounds the wait for a returning broker to catch up and
// take its group back.
const failbackLimit = 90 * time.Second

// controllerSteps returns the controller scenarios.
func (d *drill) controllerSteps() []step {
	home := d.cluster.idcs[0]
	group := "broker-" + home.name
	ctl := d.ctl
	steps := []step{
		{name: "master-kill", failure: "kill", controller: true,
			description: "SIGKILL the master of " + group + " (in " + home.name + "); the controller elects a replica",
			failP: func(ctx context.Context, p *phase) error {
				p.group, p.failedIDC = group, home.name
				p.failAt = time.Now()
				return home.broker.kill()
			},
			restoreP: func(ctx context.Context, p *phase) error {
				if err := home.broker.start(ctx); err != nil {
					return err
				}
				err := ctl.failBack(ctx, group, 0, failbackLimit)
				p.failbackAt = time.Now()
				return err
			}},
		{name: "master-partition", failure: "hang", controller: true,
			description: "SIGSTOP the master of " + group + " until the controller elects another, then SIGCONT it",
			failP: func(ctx context.Context, p *phase) error {
				p.group, p.failedIDC = group, home.name
				epoch, err := d.groupEpoch(ctx, group)
				if err != nil {
					return err
				}
				p.failAt = time.Now()
				if err := home.broker.signal(syscall.SIGSTOP); err != nil {
					return err
				}
				_, werr := ctl.waitEpochAbove(ctx, group, epoch, electionLimit)
				// Resume it whatever happened: it must not acknowledge
				// anything from now on (the ledger checks).
				if err := home.broker.signal(syscall.SIGCONT); err != nil {
					return err
				}
				p.resumedAt = time.Now()
				return werr
			},
			restoreP: func(ctx context.Context, p *phase) error {
				err := ctl.failBack(ctx, group, 0, failbackLimit)
				p.failbackAt = time.Now()
				return err
			}},
		{name: "controller-idc-lost", failure: "kill", controller: true,
			description: "SIGKILL every process of the IDC hosting the controller's Raft leader",
			failP: func(ctx context.Context, p *phase) error {
				leader, err := ctl.leaderIDC(ctx, electionLimit)
				if err != nil {
					return err
				}
				i := d.idc(leader)
				if i == nil {
					return fmt.Errorf("the controller leader %q is no IDC of the drill", leader)
				}
				p.group, p.failedIDC, p.lostIDCs = "broker-"+i.name, i.name, []string{i.name}
				p.description = "SIGKILL every process of " + i.name + ", which hosts the controller's Raft leader"
				return d.loseIDCs(ctx, p, i)
			},
			restoreP: func(ctx context.Context, p *phase) error {
				i := d.idc(p.failedIDC)
				if err := d.restoreIDCs(ctx, i); err != nil {
					return err
				}
				err := ctl.failBack(ctx, p.group, 0, failbackLimit)
				p.failbackAt = time.Now()
				return err
			}},
	}
	if len(d.cluster.idcs) == 3 {
		lost := d.cluster.idcs[1:]
		steps = append(steps, step{name: "two-idcs-lost", failure: "kill", controller: true,
			description: "SIGKILL every process of " + lost[0].name + " and " + lost[1].name + " (2 of 3 IDCs): writes must be refused",
			failP: func(ctx context.Context, p *phase) error {
				p.group, p.failedIDC = "", home.name
				for _, i := range lost {
					p.lostIDCs = append(p.lostIDCs, i.name)
				}
				var err error
				if p.epochsBefore, err = d.epochs(ctx); err != nil {
					return err
				}
				err = d.loseIDCs(ctx, p, lost...)
				p.lostAt = time.Now()
				return err
			},
			restoreP: func(ctx context.Context, p *phase) error {
				// What the surviving voter committed while alone: it must
				// not have changed any group's epoch. (An election it
				// proposed as it lost its majority may still be committed
				// after the repair, when a leader holding it regains one;
				// that is no election without a majority.)
				var err error
				if p.epochsDuring, err = d.epochs(ctx); err != nil {
					return fmt.Errorf("reading the surviving voter's state: %w", err)
				}
				return d.restoreIDCs(ctx, lost...)
			}})
	}
	return steps
}

// epochs is every group's epoch as a voter that answers records it.
func (d *drill) epochs(ctx context.Context) (map[string]int64, error) {
	st, err := d.ctl.status(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, g := range st.Groups {
		out[g.BrokerName] = g.Epoch
	}
	return out, nil
}

// idc returns the IDC named name.
func (d *drill) idc(name string) *idcProcs {
	for _, i := range d.cluster.idcs {
		if i.name == name {
			return i
		}
	}
	return nil
}

// groupEpoch is group's current epoch as the controller records it.
func (d *drill) groupEpoch(ctx context.Context, group string) (int64, error) {
	st, err := d.ctl.status(ctx)
	if err != nil {
		return 0, err
	}
	g := statusGroup(st, group)
	if g == nil {
		return 0, fmt.Errorf("the controller has no group %s", group)
	}
	return g.Epoch, nil
}

// loseIDCs stops the IDCs' consumers, then (from p.failAt on) SIGKILLs
// every server process of theirs (data kept: the IDC comes back as it
// was).
func (d *drill) loseIDCs(ctx context.Context, p *phase, idcs ...*idcProcs) error {
	for _, i := range idcs {
		if err := d.work.consumer(i.name).kill(); err != nil {
			return err
		}
	}
	p.failAt = time.Now()
	for _, i := range idcs {
		for _, p := range i.servers() {
			if err := p.kill(); err != nil {
				return err
			}
		}
	}
	return nil
}

// restoreIDCs starts the IDCs' servers again (name servers, and so the
// controller voters, first), then their consumers.
func (d *drill) restoreIDCs(ctx context.Context, idcs ...*idcProcs) error {
	for _, i := range idcs {
		if err := i.namesrv.start(ctx); err != nil {
			return err
		}
	}
	for _, i := range idcs {
		for _, p := range append([]*proc{i.addrsrv, i.broker}, i.replicas...) {
			if err := p.start(ctx); err != nil {
				return err
			}
		}
	}
	for _, i := range idcs {
		if err := d.work.startConsumer(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

// playController runs a controller step: fail, hold for the phase length,
// repair (which includes the fail-back), hold again. The step's failP sets
// failAt again right before it fails anything (what it looks up first is
// not part of the outage).
func (d *drill) playController(ctx context.Context, s step) (*phase, error) {
	p := &phase{name: s.name, failure: s.failure, description: s.description, controller: true}
	d.progress.setPhase(fmt.Sprintf("%s: %s", s.name, s.description))
	p.failAt = time.Now()
	if err := s.failP(ctx, p); err != nil {
		return nil, fmt.Errorf("%s: failing: %w", s.name, err)
	}
	if err := sleepCtx(ctx, time.Until(p.failAt.Add(d.opts.PhaseLength))); err != nil {
		return nil, err
	}
	// Hold the failure until the group took a write again (a short phase
	// must not end a scenario before the controller could act), at most
	// electionLimit more.
	for deadline := time.Now().Add(electionLimit); p.group != "" && !d.groupAckedSince(p.group, p.failAt) && time.Now().Before(deadline); {
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
	d.progress.setPhase(fmt.Sprintf("after %s: repairing and failing back", s.name))
	p.restoreAt = time.Now()
	if err := s.restoreP(ctx, p); err != nil {
		return nil, fmt.Errorf("%s: repairing: %w", s.name, err)
	}
	if err := sleepCtx(ctx, d.opts.PhaseLength); err != nil {
		return nil, err
	}
	p.endAt = time.Now()
	return p, nil
}

// groupAckedSince reports whether group acknowledged a send started after t.
func (d *drill) groupAckedSince(group string, t time.Time) bool {
	if d.work.ledger.ackedSince(group, t) {
		return true
	}
	acks, _, _ := d.ordered.snapshot()
	for _, a := range acks {
		if a.Group == group && a.SentAt.After(t) {
			return true
		}
	}
	return false
}
