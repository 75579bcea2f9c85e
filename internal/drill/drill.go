// Package drill is zonemq's disaster drill: it starts a real multi-IDC
// cluster as separate processes of the zonemq binary, runs producers and
// consumers in every IDC through the SDK, plays the failure scenarios of
// docs/architecture.md §3 one after another (as crashes and as hangs), and
// measures what each cost: recovery times, send errors, lost, stranded and
// duplicated messages, and traffic that crossed IDCs while all were healthy.
package drill

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/ledger"
	"github.com/zonemq/zonemq/internal/member"
)

// Options configures a drill.
type Options struct {
	// Binary is the zonemq executable to start the servers from; required.
	Binary string
	// IDCs is how many IDCs to run (2 or more). Zero means 2.
	IDCs int
	// PhaseLength is how long each failure is held and how long the
	// cluster runs after each repair. Zero means 10 s.
	PhaseLength time.Duration
	// SendInterval paces each IDC's producer. Zero means 10 ms.
	SendInterval time.Duration
	// DrainTimeout bounds the wait, after the last scenario, for every
	// acknowledged message to be consumed. Zero means 60 s.
	DrainTimeout time.Duration
	// WorkDir holds data and logs; empty means a temporary folder removed
	// afterwards (kept when the drill fails, for the logs).
	WorkDir string
	// PortOffset shifts every well-known drill port (to run two at once).
	PortOffset int
	// Only, if set, plays just the scenarios named (as in the report: S2,
	// S3, S4, idc-lost), after the healthy S1 window.
	Only []string
	// Replicas is how many copies each IDC's broker group keeps, the master
	// counted; with 2 or more every group replicates synchronously into the
	// next IDCs and the drill adds the idc-lost scenario. Zero means 1.
	Replicas int
	// Controller runs a failover-controller voter in every IDC's name
	// server and makes the brokers report to it; the controller elects a
	// group's new master. It adds the controller scenarios (master-kill,
	// master-partition, controller-idc-lost, and two-idcs-lost with 3
	// IDCs) and needs 3 IDCs or more and Replicas 2 or more. Naming a
	// controller scenario in Only turns it on.
	Controller bool
	// MinInSync is the brokers' --min-insync-replicas in controller mode;
	// zero means 2 when Replicas is 3 or more (a send needs two copies,
	// so losing two IDCs refuses writes rather than keep one copy).
	MinInSync int
	// Netns runs every IDC in its own network namespace behind a shaped
	// link (netns.go) and adds the network scenarios; it needs root.
	Netns bool
	// IDCRTT is the round trip between two IDCs under Netns (the CLI's
	// default is 10 ms); zero means none.
	IDCRTT time.Duration
	// IDCLossPercent drops this share of packets between IDCs under Netns.
	IDCLossPercent float64
	// Progress, if set, receives progress lines while the drill runs;
	// Terminal makes them one refreshing line.
	Progress io.Writer
	Terminal bool
	// Logger receives the SDK's log lines; nil discards them.
	Logger *slog.Logger
	// Chaos, if set, plays a seeded random fault campaign instead of the
	// scenarios (chaos.go).
	Chaos *ChaosOptions
	// StockPeer, if set, is test/rmqpeer built: the stock remoting Go
	// client (rocketmq-client-go) runs as one more workload (stock.go).
	StockPeer string
	// V5Peer, if set, is test/v5peer built: every IDC runs an access
	// point and the RocketMQ 5 Go client runs as one more workload.
	V5Peer string
	// PullConsumer adds the SDK pull consumer's workload to a chaos
	// campaign (pull.go); the CLI sets it unless --pull-consumer=false.
	PullConsumer bool
}

type drill struct {
	opts     Options
	cluster  *cluster
	network  *network // nil-safe: loopback when not --netns
	work     *workload
	audit    *lockAudit // --netns: queue locks read from every broker (lockaudit.go)
	ordered  *orderedWork
	pull     *pullWork       // Options.PullConsumer only
	peers    []*peerWork     // the official clients: Options.StockPeer, V5Peer
	ctl      *controllerView // controller mode only
	power    powerDisks      // chaos with power faults only (chaos_power.go)
	progress *progress
}

// Run plays the drill and returns its report. An error means the drill
// itself could not run (a process did not start); a report whose OK is false
// means zonemq did not pass it.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.Binary == "" {
		return nil, errors.New("drill: no zonemq binary given")
	}
	if opts.IDCs == 0 {
		opts.IDCs = 2
	}
	if opts.IDCs < 2 || opts.IDCs > 9 {
		return nil, fmt.Errorf("drill: --idcs must be 2..9, got %d", opts.IDCs)
	}
	if opts.PhaseLength <= 0 {
		opts.PhaseLength = 10 * time.Second
	}
	if opts.SendInterval <= 0 {
		opts.SendInterval = 10 * time.Millisecond
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 60 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	workDir, cleanup := opts.WorkDir, func(bool) {}
	if workDir == "" {
		dir, err := os.MkdirTemp("", "zonemq-drill-")
		if err != nil {
			return nil, err
		}
		workDir = dir
		cleanup = func(ok bool) {
			if ok {
				os.RemoveAll(dir)
			}
		}
	}
	if opts.Replicas == 0 {
		opts.Replicas = 1
	}
	if opts.Replicas < 1 || opts.Replicas > opts.IDCs {
		return nil, fmt.Errorf("drill: --replicas must be 1..--idcs (%d), got %d", opts.IDCs, opts.Replicas)
	}
	for _, name := range opts.Only {
		opts.Controller = opts.Controller || slices.Contains(controllerScenarios, name)
	}
	if opts.Controller {
		if opts.IDCs < 3 || opts.Replicas < 2 {
			return nil, fmt.Errorf("drill: the controller scenarios need --idcs 3 or more (one voter per IDC) and --replicas 2 or more, got %d and %d",
				opts.IDCs, opts.Replicas)
		}
		if opts.MinInSync == 0 && opts.Replicas >= 3 {
			opts.MinInSync = 2
		}
	}
	network, err := newNetwork(ctx, &opts)
	if err != nil {
		return nil, err
	}
	defer network.close()
	cl, err := newCluster(opts.Binary, workDir, clusterLayout{idcs: opts.IDCs, replicas: opts.Replicas, portOffset: opts.PortOffset,
		controller: opts.Controller, minInSync: opts.MinInSync, proxies: opts.V5Peer != ""}, network.ipOf)
	if err != nil {
		return nil, err
	}
	network.attach(cl)
	d := &drill{opts: opts, cluster: cl, network: network, progress: newProgress(opts.Progress, opts.Terminal)}
	if opts.Chaos != nil && planWantsPower(opts.Chaos) {
		explicit := slices.Contains(opts.Chaos.Faults, FaultPower) || slices.Contains(opts.Chaos.Faults, FaultDiskFull)
		disks, err := mountPowerDisks(cl)
		switch {
		case err == nil:
			d.power = disks
			defer disks.unmount()
		case explicit || opts.Chaos.Replay != "":
			return nil, fmt.Errorf("drill: power faults: %w", err)
		default:
			d.progress.printf("chaos: power faults left out: %v", err)
		}
	}
	if opts.Controller {
		secret, err := member.LoadSecret(cl.secretFile)
		if err != nil {
			return nil, err
		}
		d.ctl = newControllerView(cl.controllerAddrs, secret, network.dialToIDC())
		defer d.ctl.close()
	}
	defer d.progress.stop()
	report, err := d.run(ctx)
	ok := err == nil && report != nil && report.OK
	if !ok {
		d.progress.printf("drill data and logs kept in %s", workDir)
	}
	cleanup(ok)
	return report, err
}

func (d *drill) run(ctx context.Context) (*Report, error) {
	start := time.Now()
	d.progress.setPhase("starting " + fmt.Sprint(d.opts.IDCs) + " IDCs (address server, name server, broker each)")
	defer d.cluster.close()
	if err := d.cluster.start(ctx); err != nil {
		return nil, err
	}
	if d.ctl != nil {
		if _, err := d.ctl.leaderIDC(ctx, 30*time.Second); err != nil {
			return nil, fmt.Errorf("drill: %w (logs in %s)", err, d.cluster.workDir)
		}
	}
	d.work = newWorkload(d.cluster, d.opts.SendInterval, d.opts.Logger)
	d.progress.ledger = d.work.ledger
	closeCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	defer d.work.close(closeCtx)
	if err := d.work.start(ctx); err != nil {
		return nil, err
	}
	if err := d.startLockAudit(ctx); err != nil {
		return nil, err
	}
	defer d.audit.close(closeCtx)
	ordered, err := startOrdered(ctx, d.cluster, d.opts.SendInterval, d.opts.Logger)
	if err != nil {
		return nil, err
	}
	d.ordered = ordered
	defer ordered.close(closeCtx)
	if d.opts.Chaos != nil && d.opts.PullConsumer {
		if d.pull, err = startPull(ctx, d.cluster, 2*d.opts.SendInterval, d.opts.Logger); err != nil {
			return nil, err
		}
		defer d.pull.close(closeCtx)
	}
	var specs []peerSpec
	if d.opts.StockPeer != "" {
		specs = append(specs, stockSpec(d.opts.StockPeer))
	}
	if d.opts.V5Peer != "" {
		specs = append(specs, v5Spec(d.opts.V5Peer, d.cluster))
	}
	for _, spec := range specs {
		cfg := orderedClientConfig(d.cluster, d.opts.Logger)
		cfg.ClusterSecretFile = d.cluster.secretFile
		w, err := startPeer(ctx, d.cluster, spec, 2*d.opts.SendInterval, cfg)
		if err != nil {
			return nil, err
		}
		d.peers = append(d.peers, w)
		defer w.close(closeCtx)
	}
	// Warm up: every consumer has taken its queues and messages flow before
	// the healthy window is measured.
	d.progress.setPhase("warming up")
	if err := d.waitFlowing(ctx, 30*time.Second); err != nil {
		return nil, err
	}

	var chaos *ChaosSummary
	if d.opts.Chaos != nil {
		if chaos, err = d.runChaos(ctx); err != nil {
			return nil, err
		}
		// Healed: traffic returns home before the healthy window is
		// measured (a fail-back takes a moment after the last repair).
		d.progress.setPhase("chaos healed: waiting for every IDC's traffic to be local again")
		if err := d.waitFlowing(ctx, 60*time.Second); err != nil {
			return nil, fmt.Errorf("after the chaos: %w", err)
		}
		if err := d.waitConsumersLocal(ctx, 60*time.Second); err != nil {
			return nil, fmt.Errorf("after the chaos: %w", err)
		}
	}
	d.progress.setPhase("S1: all IDCs healthy")
	s1Start := time.Now()
	if err := sleepCtx(ctx, d.opts.PhaseLength); err != nil {
		return nil, err
	}
	s1End := time.Now()

	var phases []*phase
	for _, s := range d.steps() {
		if chaos != nil {
			break // the campaign replaced the scenarios
		}
		if len(d.opts.Only) > 0 && !slices.Contains(d.opts.Only, s.name) {
			continue
		}
		p, err := d.play(ctx, s)
		if err != nil {
			return nil, err
		}
		phases = append(phases, p)
	}

	d.progress.setPhase("draining: waiting for every acknowledged message to be consumed")
	d.work.stopSending()
	d.ordered.stopSending()
	d.pull.stopSending()
	for _, w := range d.peers {
		w.stopSending()
	}
	unconsumed := func() int {
		n := d.work.ledger.unconsumed() + d.ordered.unconsumed() + d.pull.unconsumed()
		for _, w := range d.peers {
			n += w.unconsumed()
		}
		return n
	}
	deadline := time.Now().Add(d.opts.DrainTimeout)
	for unconsumed() > 0 && time.Now().Before(deadline) {
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
	// Let late duplicates show before counting.
	sleepCtx(ctx, 2*time.Second)

	sends, recvs := d.work.ledger.snapshot()
	d.writeLedger(sends, recvs, start)
	in, err := d.checkInput(ctx, sends, recvs)
	if err != nil {
		return nil, err
	}
	check := ledger.Check(in)
	results, totals := analyze(sends, recvs, s1Start, s1End, phases)
	for n, p := range phases {
		if p.controller {
			results[n+1] = controllerPhaseResult(in, sends, recvs, p)
		}
	}
	d.judgeLocks(results, phases)
	r := &Report{
		IDCs: d.opts.IDCs, PhaseMillis: millis(d.opts.PhaseLength), StartedAt: start,
		Elapsed: millis(time.Since(start)), Scenarios: results, Totals: totals, Check: &check, OK: true, Chaos: chaos,
		Workloads: d.workloadCounts(sends, recvs),
	}
	if chaos != nil {
		if err := d.finishChaos(chaos, sends, recvs, in, check.EpochHistory); err != nil {
			r.Problems = append(r.Problems, err.Error())
		}
		if d.opts.Replicas > 1 {
			d.progress.setPhase("comparing every group's copies of the commit log")
			r.Replicas = d.compareReplicas()
			for _, g := range r.Replicas {
				if g.DivergesAt >= 0 || g.Detail != "" {
					r.Problems = append(r.Problems, fmt.Sprintf("replica divergence in %s: %s", g.Group, g.Detail))
				}
			}
		}
	}
	if !check.OK() {
		r.Problems = append(r.Problems, fmt.Sprintf("ledger check: %d lost, %d unexpected, %d acknowledged by a fenced master, %d out of order, epoch history %s",
			check.Lost, check.Unexpected, check.FencedAcks, check.OrderViolations, cmp.Or(check.EpochHistory, "not checked")))
	}
	if totals.Lost > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d acknowledged messages lost", totals.Lost))
	}
	for _, s := range results {
		if !s.Recovered {
			r.Problems = append(r.Problems, fmt.Sprintf("%s (%s) did not pass", s.Name, s.Failure))
		}
	}
	r.OK = len(r.Problems) == 0
	return r, nil
}

// waitConsumersLocal waits until every IDC's consumer has read only from
// its own IDC's brokers for the last second (and read something): the
// queues it held elsewhere during a failure went back.
func (d *drill) waitConsumersLocal(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		_, recvs := d.work.ledger.snapshot()
		since := time.Now().Add(-time.Second)
		local, away := map[string]bool{}, map[string]bool{}
		for _, rs := range recvs {
			for _, rc := range rs {
				if rc.at.Before(since) {
					continue
				}
				if rc.consumerIDC == rc.brokerIDC {
					local[rc.consumerIDC] = true
				} else {
					away[rc.consumerIDC] = true
				}
			}
		}
		if len(local) == len(d.cluster.idcs) && len(away) == 0 {
			return nil
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("drill: consumers still read from other IDCs %s after the last repair (logs in %s)", limit, d.cluster.workDir)
}

// waitFlowing waits until every IDC's consumer has read a message of its own
// IDC's producer from its own IDC's broker.
func (d *drill) waitFlowing(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		_, recvs := d.work.ledger.snapshot()
		seen := map[string]bool{}
		for _, rs := range recvs {
			for _, rc := range rs {
				if rc.consumerIDC == rc.brokerIDC {
					seen[rc.consumerIDC] = true
				}
			}
		}
		peersFlowing := true
		for _, w := range d.peers {
			peersFlowing = peersFlowing && w.flowing()
		}
		if len(seen) == len(d.cluster.idcs) && d.producersLocal() && peersFlowing {
			return nil
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("drill: messages did not flow in every IDC within %s (logs in %s)", limit, d.cluster.workDir)
}

// settledSends is how many of each IDC's latest sends must have been
// acknowledged by its own IDC before the healthy window starts.
const settledSends = 20

// producersLocal reports whether each IDC's latest settledSends sends
// were all acknowledged by its own IDC's broker: every master took its
// lease (controller mode) and no producer still avoids a broker it saw
// refuse a send during start-up.
func (d *drill) producersLocal() bool {
	sends, _ := d.work.ledger.snapshot()
	local := map[string]int{}
	done := map[string]bool{}
	for n := len(sends) - 1; n >= 0 && len(done) < len(d.cluster.idcs); n-- {
		s := sends[n]
		if done[s.producerIDC] {
			continue
		}
		if s.err != nil || s.brokerIDC != s.producerIDC {
			return false
		}
		if local[s.producerIDC]++; local[s.producerIDC] >= settledSends {
			done[s.producerIDC] = true
		}
	}
	return len(done) == len(d.cluster.idcs)
}

// progress shows which scenario runs, the elapsed time and the message
// counts, on one refreshing line on a terminal or a line per phase otherwise.
type progress struct {
	w        io.Writer
	terminal bool
	ledger   *book
	start    time.Time

	mu    sync.Mutex
	phase string
	done  chan struct{}
	wg    sync.WaitGroup
}

func newProgress(w io.Writer, terminal bool) *progress {
	p := &progress{w: w, terminal: terminal, start: time.Now(), done: make(chan struct{})}
	if w != nil && terminal {
		p.wg.Add(1)
		go p.loop()
	}
	return p
}

func (p *progress) setPhase(s string) {
	p.mu.Lock()
	p.phase = s
	p.mu.Unlock()
	if p.w != nil && !p.terminal {
		fmt.Fprintf(p.w, "[%6.1fs] %s\n", time.Since(p.start).Seconds(), s)
	}
}

func (p *progress) printf(format string, a ...any) {
	if p.w == nil {
		return
	}
	if p.terminal {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, format+"\n", a...)
}

func (p *progress) loop() {
	defer p.wg.Done()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			fmt.Fprint(p.w, "\r\033[K")
			return
		case <-t.C:
		}
		p.mu.Lock()
		phase := p.phase
		p.mu.Unlock()
		var acked, got, errs int64
		if p.ledger != nil {
			acked, got, errs = p.ledger.acked.Load(), p.ledger.got.Load(), p.ledger.errs.Load()
		}
		fmt.Fprintf(p.w, "\r\033[K[%6.1fs] %s | acked %d, consumed %d, send errors %d",
			time.Since(p.start).Seconds(), phase, acked, got, errs)
	}
}

func (p *progress) stop() {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	p.wg.Wait()
}

// writeLedger leaves the duplicated and unconsumed messages in the work
// folder (ledger.txt), for finding out why.
func (d *drill) writeLedger(sends []sendRecord, recvs map[string][]recvRecord, start time.Time) {
	f, err := os.Create(filepath.Join(d.cluster.workDir, "ledger.txt"))
	if err != nil {
		return
	}
	defer f.Close()
	ms := func(t time.Time) float64 { return t.Sub(start).Seconds() }
	for _, s := range sends {
		rs := recvs[s.key]
		if s.err != nil || len(rs) == 1 {
			continue
		}
		fmt.Fprintf(f, "%s acked %.3fs by %s (%s):", s.key, ms(s.end), s.broker, s.brokerIDC)
		if len(rs) == 0 {
			fmt.Fprint(f, " never consumed")
		}
		for _, r := range rs {
			fmt.Fprintf(f, " [%.3fs %s consumer from %s]", ms(r.at), r.consumerIDC, r.broker)
		}
		fmt.Fprintln(f)
	}
}

// workloadCounts is the report's row per workload.
func (d *drill) workloadCounts(sends []sendRecord, recvs map[string][]recvRecord) []WorkloadCount {
	sdk := WorkloadCount{Name: "sdk"}
	for _, s := range sends {
		if s.err == nil {
			sdk.Acked++
		}
	}
	sdk.Delivered = len(recvs)
	out := []WorkloadCount{sdk}
	if d.ordered != nil {
		acks, cons, _ := d.ordered.snapshot()
		out = append(out, countWorkload("ordered", acks, cons))
	}
	if d.pull != nil {
		acks, cons, _ := d.pull.snapshot()
		out = append(out, countWorkload("pull", acks, cons))
	}
	for _, w := range d.peers {
		acks, cons, _ := w.snapshot()
		out = append(out, countWorkload(strings.TrimPrefix(w.spec.target, "/"), acks, cons))
	}
	return out
}
