package drill

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// phase is one scenario as it was played: what failed, when, and when it was
// brought back.
type phase struct {
	name        string // S1, S2, S3, S4
	failure     string // "none", "kill", "hang", "stop"
	description string
	failedIDC   string
	consumers   bool // the failure is of consumers (S4), not servers
	network     bool // a network scenario (--netns), judged by networkPhaseResult

	failAt, restoreAt, endAt time.Time
	addrsrvDrop              time.Duration // S3: how long until the address server stopped listing the dead name server

	// Controller scenarios: the group whose master fails ("" for all),
	// the IDCs lost, when the last of them was gone (two-idcs-lost), when a
	// hung master was resumed and when the fail-back completed.
	controller                    bool
	group                         string
	lostIDCs                      []string
	lostAt, resumedAt, failbackAt time.Time
	// two-idcs-lost: every group's epoch before the loss and in the
	// surviving voter's state at its end.
	epochsBefore, epochsDuring map[string]int64
}

// step is a scenario to play: a failure and its repair.
type step struct {
	name, failure, description string
	consumers, network         bool
	fail, restore              func(ctx context.Context) error
	watchNamesrv               bool
	// controller steps (scenario_controller.go) fail and repair with the
	// phase at hand, to record what they chose and when.
	controller      bool
	failP, restoreP func(ctx context.Context, p *phase) error
}

// steps returns the scenarios of docs/architecture.md §3, each failure of
// idc1 followed by its repair (S5). A scenario is one row here: its failure
// and its repair; play and analyze need nothing else.
func (d *drill) steps() []step {
	i := d.cluster.idcs[0]
	consumer := d.work.consumer(i.name)
	kill := func(ps ...*proc) func(context.Context) error {
		return func(context.Context) error {
			for _, p := range ps {
				if err := p.kill(); err != nil {
					return err
				}
			}
			return nil
		}
	}
	restart := func(ps ...*proc) func(context.Context) error {
		return func(ctx context.Context) error {
			for _, p := range ps {
				if err := p.start(ctx); err != nil {
					return err
				}
			}
			return nil
		}
	}
	sig := func(s syscall.Signal, ps ...*proc) func(context.Context) error {
		return func(context.Context) error {
			for _, p := range ps {
				if err := p.signal(s); err != nil {
					return err
				}
			}
			return nil
		}
	}
	steps := []step{
		{name: "S2", failure: "kill", description: "SIGKILL every broker of " + i.name,
			fail: kill(i.broker), restore: restart(i.broker)},
		{name: "S2", failure: "hang", description: "SIGSTOP every broker of " + i.name,
			fail: sig(syscall.SIGSTOP, i.broker), restore: sig(syscall.SIGCONT, i.broker)},
		{name: "S3", failure: "kill", description: "SIGKILL every broker and name server of " + i.name,
			fail: kill(i.broker, i.namesrv), restore: restart(i.namesrv, i.broker), watchNamesrv: true},
		{name: "S3", failure: "hang", description: "SIGSTOP every broker and name server of " + i.name,
			fail: sig(syscall.SIGSTOP, i.broker, i.namesrv), restore: sig(syscall.SIGCONT, i.namesrv, i.broker), watchNamesrv: true},
		{name: "S4", failure: "stop", description: "SIGTERM every consumer of " + i.name + " (clean shutdown)", consumers: true,
			fail:    func(ctx context.Context) error { return d.work.stopConsumer(ctx, i.name) },
			restore: func(ctx context.Context) error { return d.work.startConsumer(ctx, i) }},
		{name: "S4", failure: "kill", description: "SIGKILL every consumer of " + i.name, consumers: true,
			fail: func(context.Context) error { return consumer.kill() }, restore: consumer.start},
		{name: "S4", failure: "hang", description: "SIGSTOP every consumer of " + i.name, consumers: true,
			fail:    func(context.Context) error { return consumer.signal(syscall.SIGSTOP) },
			restore: func(context.Context) error { return consumer.signal(syscall.SIGCONT) }},
	}
	if d.opts.Replicas > 1 {
		steps = append(steps, d.idcLostStep())
	}
	if d.opts.Controller {
		// The controller elected replicas in other IDCs while idc1's
		// brokers were down; the repair also gives idc1's group back.
		for n := range steps {
			if s := &steps[n]; !s.consumers && s.name != "idc-lost" {
				s.restore = d.thenFailBack(s.restore)
			}
		}
		steps = append(steps, d.controllerSteps()...)
	}
	steps = append(steps, d.netnsSteps()...)
	return steps
}

// thenFailBack follows a repair with the fail-back of every group to its
// home broker (controller mode).
func (d *drill) thenFailBack(restore func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := restore(ctx); err != nil {
			return err
		}
		for _, i := range d.cluster.idcs {
			if err := d.ctl.failBack(ctx, "broker-"+i.name, 0, failbackLimit); err != nil {
				return err
			}
		}
		return nil
	}
}

// play runs one step: fail, hold for the phase length, repair, hold again.
func (d *drill) play(ctx context.Context, s step) (*phase, error) {
	if s.controller {
		return d.playController(ctx, s)
	}
	i := d.cluster.idcs[0]
	p := &phase{name: s.name, failure: s.failure, description: s.description, failedIDC: i.name, consumers: s.consumers, network: s.network}
	d.progress.setPhase(fmt.Sprintf("%s %s: %s", s.name, s.failure, s.description))
	p.failAt = time.Now()
	if err := s.fail(ctx); err != nil {
		return nil, fmt.Errorf("%s %s: failing: %w", s.name, s.failure, err)
	}
	var dropped chan time.Duration
	if s.watchNamesrv {
		dropped = make(chan time.Duration, 1)
		go func() {
			dropped <- watchAddrsrvDrop(ctx, i.addrsrvURL(), i.namesrv.addr, p.failAt, d.opts.PhaseLength, i.dial)
		}()
	}
	if err := sleepCtx(ctx, d.opts.PhaseLength); err != nil {
		return nil, err
	}
	if dropped != nil {
		p.addrsrvDrop = <-dropped
	}
	d.progress.setPhase(fmt.Sprintf("S5 after %s %s: bringing %s back", s.name, s.failure, i.name))
	p.restoreAt = time.Now()
	if err := s.restore(ctx); err != nil {
		return nil, fmt.Errorf("%s %s: repairing: %w", s.name, s.failure, err)
	}
	if err := sleepCtx(ctx, d.opts.PhaseLength); err != nil {
		return nil, err
	}
	p.endAt = time.Now()
	return p, nil
}

// watchAddrsrvDrop polls the address server until it stops listing addr, and
// returns how long after failAt that was (-1 if not within limit).
func watchAddrsrvDrop(ctx context.Context, base, addr string, failAt time.Time, limit time.Duration, dial dialFunc) time.Duration {
	c := http.Client{Timeout: 500 * time.Millisecond, Transport: httpTransport(dial)}
	end := failAt.Add(limit)
	for time.Now().Before(end) {
		resp, err := c.Get(base + "/rocketmq/nsaddr")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && !strings.Contains(string(body), addr) {
				return time.Since(failAt)
			}
		}
		if sleepCtx(ctx, 50*time.Millisecond) != nil {
			break
		}
	}
	return -1
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
