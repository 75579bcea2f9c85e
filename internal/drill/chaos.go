package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zonemq/zonemq/internal/ledger"
	"github.com/zonemq/zonemq/internal/netns"
)

// The chaos campaign (issue 23, first step): instead of the scripted
// scenarios, a nemesis picks faults at random from a seed — which process,
// which fault, when, for how long, sometimes several at once — and every
// choice is written to a plan file that replays the run exactly. Faults on
// loopback: kill (SIGKILL, restarted after the hold), stop (SIGTERM, the
// same), pause (SIGSTOP, SIGCONT after the hold), of any server (broker
// master or replica, name server with its voter, address server) or
// consumer. The checker is the drill's ledger: lost, duplicates, fenced
// acknowledgements and order, after a final heal and drain.

// Fault kinds: of a process, and (--netns) of the network between IDCs.
const (
	FaultKill    = "kill"
	FaultStop    = "stop"
	FaultPause   = "pause"
	FaultIsolate = "isolate" // an IDC cut from every other, both ways
	FaultOneWay  = "one-way" // packets from one IDC to another dropped
	// FaultBridge cuts the link between two IDCs both ways while the third
	// still sees both: a bridge. (With three IDCs, isolate is the
	// minority/majority split.)
	FaultBridge = "bridge"
	// FaultCorrupt kills a replica broker, damages the newest part of its
	// commit log or of one consume queue (a bit flipped, or the file cut
	// short) and restarts it; or, in controller mode, kills a name server
	// and damages its controller voter's Raft log (raft.db) likewise.
	FaultCorrupt = "corrupt"
	// FaultFlaky degrades the link between two IDCs both ways: delay
	// 10–200 ms with jitter, loss 1–20 % (netem or the delay line).
	FaultFlaky = "flaky"
	// FaultClock steps a broker's wall clock (master or replica: the
	// lease holders) forward or back by 1 s to 15 min, and back after the
	// hold (internal/wallclock: durations stay on the monotonic clock).
	FaultClock = "clock"
)

// AllFaults are the kinds the nemesis knows; network kinds need --netns.
var AllFaults = []string{FaultKill, FaultStop, FaultPause, FaultCorrupt, FaultPower, FaultDiskFull, FaultIsolate, FaultOneWay, FaultFlaky, FaultClock, FaultBridge}

// networkFault reports whether kind acts on the network (--netns only).
func networkFault(kind string) bool {
	return kind == FaultIsolate || kind == FaultOneWay || kind == FaultFlaky || kind == FaultBridge
}

// raftStateLock is held by a corrupt fault on a voter's Raft log, and for
// raftSettle after it: the damaged voter starts empty and votes again only
// once it has caught up with the leader, so a second voter damaged before
// that would leave one voter of three able to vote, and no leader ever (two
// voters of three losing their state at once is a disaster no automatic
// recovery survives: the one left may lack committed entries).
const (
	raftStateLock = "raft-state"
	raftSettle    = 30 * time.Second
)

// corruptSettle keeps corrupt faults on copies of one broker group apart:
// a damaged copy loses records it had acknowledged, and it takes a while to
// copy them back (or its whole log, after a reseed). Damage to a second copy
// of the group meanwhile is two copies' data lost at once, which no group of
// three survives when its third copy is down at that moment: the 60-minute
// campaign of seed 63 lost acknowledged messages so (docs/disaster-recovery.md).
// The guarantee is one copy's data at a time.
const corruptSettle = 60 * time.Second

// copiesLock is the lock a corrupt fault on target holds for its group:
// "idc2/replica-of-broker-idc3" and "idc3/broker" are copies of broker-idc3.
func copiesLock(target string) string {
	idc, proc, _ := strings.Cut(target, "/")
	if group, ok := strings.CutPrefix(proc, "replica-of-"); ok {
		return "copies-of-" + group
	}
	return "copies-of-broker-" + idc
}

// faultLock is what a fault holds while in force: its target, or for the
// network one lock for every cut (a heal removes them all) and one for
// every degraded link (a restore puts them all back).
func faultLock(kind, target string) string {
	switch {
	case kind == FaultFlaky:
		return "links"
	case networkFault(kind):
		return "network"
	}
	return target
}

// ChaosOptions turn the drill into a chaos campaign.
type ChaosOptions struct {
	// Duration is how long faults are injected; the drain follows.
	Duration time.Duration
	// Seed picks the faults; the same seed, cluster shape and duration
	// give the same plan.
	Seed uint64
	// Faults limits the kinds (default AllFaults).
	Faults []string
	// Replay, if set, is a plan file (as written to the work directory's
	// chaos-plan.json) to play instead of a seeded one.
	Replay string
	// Timeline is where the SVG picture of the campaign goes (default:
	// timeline.svg in the work directory).
	Timeline string
}

// ChaosEvent is one fault of a plan.
type ChaosEvent struct {
	At     Millis `json:"atMs"`   // after the faults began
	Hold   Millis `json:"holdMs"` // how long the fault lasts
	Kind   string `json:"kind"`
	Target string `json:"target"` // e.g. idc1/broker, idc2/replica-of-broker-idc1, idc3/consumer
	// Damage (corrupt only) is what is done: "flip" or "truncate", At
	// (0..1) where in the newest damageSpan bytes of the file, and File
	// which file: "commitlog" (the newest segment) or "consumequeue" (the
	// newest file of one queue, Queue 0..1 picking which).
	Damage      string  `json:"damage,omitempty"`
	DamageAt    float64 `json:"damageAt,omitempty"`
	DamageFile  string  `json:"damageFile,omitempty"`
	DamageQueue float64 `json:"damageQueue,omitempty"`
	// Link (flaky only) is the degraded links' shaping.
	Link *FlakyLink `json:"link,omitempty"`
	// Skew (clock only) is how far the broker's wall clock is stepped.
	Skew Millis `json:"skewMs,omitempty"`
}

// FlakyLink is a flaky fault's shaping of a link, each way.
type FlakyLink struct {
	Delay       Millis  `json:"delayMs"`
	Jitter      Millis  `json:"jitterMs"`
	LossPercent float64 `json:"lossPercent"`
}

// ChaosPlan is what a campaign plays and records.
type ChaosPlan struct {
	Seed     uint64       `json:"seed"`
	Duration Millis       `json:"durationMs"`
	Events   []ChaosEvent `json:"events"`
}

// planChaos draws a plan: a fault every 1–4 s on a target not already
// faulted, held 2–8 s, so faults overlap and recur; nothing is held past
// the duration.
//
// targets gives each kind's targets: process names for process faults,
// "idcN" (isolate), "idcA>idcB" (one-way) and "idcA<>idcB" (flaky, bridge)
// for network faults. Network
// faults never overlap each other.
func planChaos(seed uint64, duration time.Duration, kinds []string, targets func(kind string) []string) ChaosPlan {
	rng := rand.New(rand.NewPCG(seed, 0x63686f73))
	plan := ChaosPlan{Seed: seed, Duration: millis(duration)}
	busyUntil := map[string]time.Duration{}
	for at := time.Duration(0); ; {
		at += time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))
		hold := 2*time.Second + time.Duration(rng.Int64N(int64(6*time.Second)))
		if at+hold > duration {
			break
		}
		kind := kinds[rng.IntN(len(kinds))]
		ts := targets(kind)
		if len(ts) == 0 {
			continue
		}
		target := ts[rng.IntN(len(ts))]
		busy := []string{faultLock(kind, target)}
		if kind == FaultPower {
			// The whole IDC: every process in it, and its disk.
			busy = []string{target}
			for _, p := range targets(FaultKill) {
				if strings.HasPrefix(p, target+"/") {
					busy = append(busy, p)
				}
			}
		}
		raft := kind == FaultCorrupt && strings.HasSuffix(target, "/namesrv")
		if raft {
			busy = append(busy, raftStateLock)
		}
		copies := ""
		if kind == FaultCorrupt && !raft {
			copies = copiesLock(target)
			busy = append(busy, copies)
		}
		if len(busy) == 1 && kind == FaultPower || slices.ContainsFunc(busy, func(b string) bool { return busyUntil[b] > at }) {
			continue
		}
		for _, b := range busy {
			busyUntil[b] = at + hold
		}
		if raft {
			busyUntil[raftStateLock] = at + hold + raftSettle
		}
		if copies != "" {
			busyUntil[copies] = at + hold + corruptSettle
		}
		e := ChaosEvent{At: millis(at), Hold: millis(hold), Kind: kind, Target: target}
		switch kind {
		case FaultCorrupt:
			e.Damage, e.DamageAt, e.DamageFile = "flip", rng.Float64(), "commitlog"
			if rng.IntN(2) == 0 {
				e.Damage = "truncate"
			}
			if rng.IntN(3) == 0 {
				e.DamageFile, e.DamageQueue = "consumequeue", rng.Float64()
			}
		case FaultClock:
			// 1 s to 15 min, as likely in every decade, either way.
			e.Skew = Millis(math.Round(1000 * math.Pow(900, rng.Float64())))
			if rng.IntN(2) == 0 {
				e.Skew = -e.Skew
			}
		case FaultFlaky:
			delay := 10 + rng.IntN(191)
			e.Link = &FlakyLink{Delay: Millis(delay), Jitter: Millis(rng.IntN(delay/4 + 1)), LossPercent: float64(1 + rng.IntN(20))}
		}
		plan.Events = append(plan.Events, e)
	}
	return plan
}

// readChaosPlan reads a plan file.
func readChaosPlan(path string) (ChaosPlan, error) {
	var p ChaosPlan
	data, err := os.ReadFile(path)
	if err != nil {
		return p, fmt.Errorf("drill: --replay: %w", err)
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return p, fmt.Errorf("drill: --replay %s: %w", path, err)
	}
	return p, nil
}

// faultable is a process the nemesis may fault: a server or a consumer.
type faultable interface {
	kill() error
	terminate(grace time.Duration) error
	signal(syscall.Signal) error
	start(context.Context) error
}

// chaosTargets are the processes of the cluster by name.
func (d *drill) chaosTargets() map[string]faultable {
	out := map[string]faultable{}
	for _, i := range d.cluster.idcs {
		out[i.name+"/broker"] = i.broker
		out[i.name+"/namesrv"] = i.namesrv
		out[i.name+"/addrsrv"] = i.addrsrv
		if i.proxy != nil {
			out[i.name+"/proxy"] = i.proxy
		}
		for _, r := range i.replicas {
			out[i.name+"/replica-of-"+argAfter(r.args, "--name")] = r
		}
		if c := d.work.consumer(i.name); c != nil {
			out[i.name+"/consumer"] = c
		}
		for _, w := range d.peers {
			if w.idc == i {
				out[w.String()] = w
			}
		}
	}
	return out
}

// playChaos plays plan against targets (the cluster's processes by name)
// and returns when every fault has been undone.
func (d *drill) playChaos(ctx context.Context, plan ChaosPlan, targets map[string]faultable) error {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(plan.Events))
	// One fault at a time per target, whatever the clock says: a graceful
	// stop can outlast its planned hold (SIGTERM waits for the process), and
	// a fault that began on it before the restart would restart it twice.
	// Network faults share one lock (a heal undoes every cut).
	locks := map[string]*sync.Mutex{}
	lockOf := func(e ChaosEvent) *sync.Mutex {
		key := faultLock(e.Kind, e.Target)
		if locks[key] == nil {
			locks[key] = &sync.Mutex{}
		}
		return locks[key]
	}
	for _, e := range plan.Events {
		p, ok := targets[e.Target]
		if !ok && !networkFault(e.Kind) && e.Kind != FaultPower && e.Kind != FaultDiskFull {
			return fmt.Errorf("drill: chaos plan names %s, which this cluster does not have", e.Target)
		}
		if networkFault(e.Kind) && (d.network == nil || d.network.topo == nil) {
			return fmt.Errorf("drill: chaos plan has a %s fault, which needs --netns", e.Kind)
		}
		if err := sleepCtx(ctx, time.Until(start.Add(e.At.Duration()))); err != nil {
			break
		}
		d.progress.setPhase(fmt.Sprintf("chaos %s: %s %s for %v", e.At.Duration().Round(time.Second), e.Kind, e.Target, e.Hold.Duration()))
		mus := []*sync.Mutex{lockOf(e)}
		if e.Kind == FaultPower {
			// The IDC's disk and every process of it, in name order (no
			// two faults can then wait on each other).
			for _, name := range idcProcesses(targets, e.Target) {
				mus = append(mus, lockOf(ChaosEvent{Target: name}))
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, mu := range mus {
				mu.Lock()
				defer mu.Unlock()
			}
			if err := d.fault(ctx, p, e); err != nil {
				errs <- fmt.Errorf("chaos %s %s: %w", e.Kind, e.Target, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	return ctx.Err()
}

// fault applies one fault, holds it, and undoes it.
func (d *drill) fault(ctx context.Context, p faultable, e ChaosEvent) error {
	var undo func(context.Context) error
	switch e.Kind {
	case FaultFlaky:
		topo := d.network.topo
		var a, b int
		if _, err := fmt.Sscanf(e.Target, "idc%d<>idc%d", &a, &b); err != nil {
			return fmt.Errorf("flaky target %q: %w", e.Target, err)
		}
		if e.Link == nil {
			return fmt.Errorf("flaky %s: the plan gives no link shaping", e.Target)
		}
		l := netns.Link{Delay: e.Link.Delay.Duration(), Jitter: e.Link.Jitter.Duration(), LossPercent: e.Link.LossPercent}
		if err := topo.Degrade(ctx, a, b, l); err != nil {
			return err
		}
		if err := topo.Degrade(ctx, b, a, l); err != nil {
			return err
		}
		undo = topo.Restore
	case FaultIsolate, FaultOneWay, FaultBridge:
		topo := d.network.topo
		var a, b int
		var err error
		switch e.Kind {
		case FaultIsolate:
			_, err = fmt.Sscanf(e.Target, "idc%d", &a)
			if err == nil {
				err = topo.Isolate(ctx, a)
			}
		case FaultOneWay:
			_, err = fmt.Sscanf(e.Target, "idc%d>idc%d", &a, &b)
			if err == nil {
				err = topo.CutOneWay(ctx, a, b)
			}
		default:
			_, err = fmt.Sscanf(e.Target, "idc%d<>idc%d", &a, &b)
			if err == nil {
				err = topo.Cut(ctx, a, b)
			}
		}
		if err != nil {
			return err
		}
		undo = topo.Heal
	case FaultKill:
		if err := p.kill(); err != nil {
			return err
		}
		undo = supervised(p.start)
	case FaultPower:
		var err error
		if undo, err = d.powerOff(e); err != nil {
			return err
		}
	case FaultDiskFull:
		disk := d.power[e.Target]
		if disk == nil {
			return fmt.Errorf("no FUSE disk for %s", e.Target)
		}
		disk.SetFull(true)
		undo = func(context.Context) error { disk.SetFull(false); return nil }
	case FaultCorrupt:
		if err := p.kill(); err != nil {
			return err
		}
		b, ok := p.(*proc)
		if !ok {
			return fmt.Errorf("%s has no data to damage", e.Target)
		}
		var what string
		var err error
		if strings.HasSuffix(e.Target, "/namesrv") {
			what, err = damageRaft(argAfter(b.args, "--controller-data"), e)
		} else {
			what, err = damageLog(argAfter(b.args, "--data"), e)
		}
		if err != nil {
			return err
		}
		d.progress.printf("chaos: %s: %s", e.Target, what)
		undo = supervised(p.start)
	case FaultStop:
		if err := p.terminate(15 * time.Second); err != nil {
			return err
		}
		undo = supervised(p.start)
	case FaultPause:
		if err := p.signal(syscall.SIGSTOP); err != nil {
			return err
		}
		undo = func(context.Context) error { return p.signal(syscall.SIGCONT) }
	case FaultClock:
		b, ok := p.(*proc)
		if !ok || b.role != roleBroker {
			return fmt.Errorf("%s has no wall clock to step", e.Target)
		}
		if err := writeSkew(b.clockFile(), e.Skew.Duration()); err != nil {
			return err
		}
		d.progress.printf("chaos: %s: wall clock stepped by %v", e.Target, e.Skew.Duration())
		undo = func(context.Context) error { return writeSkew(b.clockFile(), 0) }
	default:
		return fmt.Errorf("unknown fault %q (known: %v)", e.Kind, AllFaults)
	}
	sleepCtx(ctx, e.Hold.Duration())
	// The heal runs even when ctx ended, so no process stays stopped.
	return undo(context.WithoutCancel(ctx))
}

// writeSkew sets a broker's wall-clock skew (the broker reads the file
// every 100 ms: internal/wallclock), by rename so it never reads half.
func writeSkew(path string, d time.Duration) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(d.String()+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// chaosKinds checks --faults; without a network of namespaces the network
// kinds are left out (by default) or refused (when asked for), and so is
// power without its FUSE disks.
func chaosKinds(faults []string, netns, power bool) ([]string, error) {
	if len(faults) == 0 {
		for _, f := range AllFaults {
			if (netns || !networkFault(f)) && (power || (f != FaultPower && f != FaultDiskFull)) {
				faults = append(faults, f)
			}
		}
		return faults, nil
	}
	for _, f := range faults {
		if !slices.Contains(AllFaults, f) {
			return nil, fmt.Errorf("drill: unknown fault %q (known: %v)", f, AllFaults)
		}
		if networkFault(f) && !netns {
			return nil, fmt.Errorf("drill: fault %q needs --netns", f)
		}
		if (f == FaultPower || f == FaultDiskFull) && !power {
			return nil, fmt.Errorf("drill: fault %q needs FUSE (Linux, /dev/fuse, root)", f)
		}
	}
	return faults, nil
}

// argAfter is the value following flag in args ("" if absent).
func argAfter(args []string, flag string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			return args[i+1]
		}
	}
	return ""
}

// Duration is m as a time.Duration.
func (m Millis) Duration() time.Duration { return time.Duration(m) * time.Millisecond }

// ChaosSummary is a campaign's part of the report.
type ChaosSummary struct {
	Seed     uint64         `json:"seed"`
	PlanFile string         `json:"planFile"`
	Faults   int            `json:"faults"`
	ByKind   map[string]int `json:"byKind"`
	Duration Millis         `json:"durationMs"`

	// Outages is each IDC's producer's longest time without an
	// acknowledgement during the faults; Drain the time from the heal
	// until every message acknowledged by then was consumed
	// (chaos_liveness.go).
	Outages []IDCOutage `json:"outages"`
	Drain   Millis      `json:"drainMs"`
	// Timeline is the SVG picture of the campaign (chaos_timeline.go).
	Timeline string `json:"timeline"`
	// Forced names the groups the drill had to force a master on after the
	// heal, as an operator would (no member could be elected).
	Forced []string `json:"forcedElections,omitempty"`

	// began and healed bound the faults; plan is what was played;
	// timelineText the picture as text, for the text report.
	began, healed time.Time
	plan          ChaosPlan
	timelineText  string
}

// finishChaos adds the campaign's liveness figures and timeline to sum,
// and (when the controller's epoch history breaks) its picture.
func (d *drill) finishChaos(sum *ChaosSummary, sends []sendRecord, recvs map[string][]recvRecord, in ledger.Input, epochs string) error {
	var idcs []string
	for _, i := range d.cluster.idcs {
		idcs = append(idcs, i.name)
	}
	sum.Outages = chaosOutages(idcs, sends, sum.plan, sum.began, sum.healed)
	sum.Drain = chaosDrain(sends, recvs, sum.healed)
	var text strings.Builder
	newTimeline(100, idcs, sends, sum.plan, sum.began, sum.healed).writeText(&text)
	sum.timelineText = text.String()
	sum.Timeline = d.opts.Chaos.Timeline
	if sum.Timeline == "" {
		sum.Timeline = filepath.Join(d.cluster.workDir, "timeline.svg")
	}
	f, err := os.Create(sum.Timeline)
	if err != nil {
		return fmt.Errorf("drill: the timeline: %w", err)
	}
	defer f.Close()
	if err := newTimeline(400, idcs, sends, sum.plan, sum.began, sum.healed).writeSVG(f); err != nil {
		return fmt.Errorf("drill: the timeline: %w", err)
	}
	// The picture of a long campaign would be enormous; it is drawn for a
	// short one, or to show where a history breaks.
	if len(in.History) > 0 && (len(in.Acks) <= maxEpochPicture || epochs == ledger.EpochsNotLinearizable) {
		if h, err := os.Create(filepath.Join(d.cluster.workDir, "epoch-history.html")); err == nil {
			ledger.VisualizeEpochs(in, h)
			h.Close()
		}
	}
	return f.Close()
}

// runChaos draws (or reads) the plan, writes it to the work directory,
// plays it and heals; the S1 window and the drain that follow are the
// drill's as usual.
func (d *drill) runChaos(ctx context.Context) (*ChaosSummary, error) {
	c := d.opts.Chaos
	var plan ChaosPlan
	if c.Replay != "" {
		var err error
		if plan, err = readChaosPlan(c.Replay); err != nil {
			return nil, err
		}
	} else {
		kinds, err := chaosKinds(c.Faults, d.network != nil && d.network.topo != nil, d.power != nil)
		if err != nil {
			return nil, err
		}
		var procs, isolate, oneWay, links []string
		for name := range d.chaosTargets() {
			procs = append(procs, name)
		}
		slices.Sort(procs)
		for _, a := range d.cluster.idcs {
			isolate = append(isolate, a.name)
			for _, b := range d.cluster.idcs {
				if a != b {
					oneWay = append(oneWay, a.name+">"+b.name)
				}
				if a.name < b.name {
					links = append(links, a.name+"<>"+b.name)
				}
			}
		}
		var replicas, brokers []string
		for _, p := range procs {
			if strings.Contains(p, "/replica-of-") || d.ctl != nil && strings.HasSuffix(p, "/namesrv") {
				replicas = append(replicas, p) // a voter's Raft log is a replica's too
			}
			if strings.Contains(p, "/replica-of-") || strings.HasSuffix(p, "/broker") {
				brokers = append(brokers, p)
			}
		}
		plan = planChaos(c.Seed, c.Duration, kinds, func(kind string) []string {
			switch kind {
			case FaultIsolate, FaultPower, FaultDiskFull:
				return isolate
			case FaultOneWay:
				return oneWay
			case FaultCorrupt:
				return replicas
			case FaultClock:
				return brokers
			case FaultFlaky, FaultBridge:
				return links
			}
			return procs
		})
	}
	path := d.cluster.workDir + "/chaos-plan.json"
	data, _ := json.MarshalIndent(plan, "", "  ")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return nil, err
	}
	d.progress.printf("chaos: %d faults over %v from seed %d; plan in %s", len(plan.Events), plan.Duration.Duration(), plan.Seed, path)
	began := time.Now()
	if err := d.playChaos(ctx, plan, d.chaosTargets()); err != nil {
		return nil, err
	}
	sum := &ChaosSummary{Seed: plan.Seed, PlanFile: path, Faults: len(plan.Events), ByKind: map[string]int{}, Duration: plan.Duration,
		began: began, healed: time.Now(), plan: plan}
	if d.ctl != nil {
		// The operator's fail-back: each group's master goes home (id 0,
		// the broker of its own IDC) once that broker is in sync again,
		// so every IDC's producers are local before the healthy window.
		d.progress.setPhase("chaos healed: giving every group back to its home broker")
		for _, i := range d.cluster.idcs {
			group := "broker-" + i.name
			forced, err := d.ctl.failBackOrForce(ctx, group, 0, failbackLimit, true)
			if forced {
				note := fmt.Sprintf("%s: no member could be elected; the home broker, holding the most log, was forced master (the operator's step)", group)
				sum.Forced = append(sum.Forced, note)
				d.progress.printf("chaos: %s", note)
			}
			if err != nil {
				return nil, fmt.Errorf("after the chaos: %w", err)
			}
		}
	}
	for _, e := range plan.Events {
		sum.ByKind[e.Kind]++
	}
	return sum, nil
}

// superviseFor is how long a restart after a fault is retried.
const superviseFor = 2 * time.Minute

// supervised restarts as a service manager would (systemd's
// Restart=on-failure): a process that exits while starting — a broker
// whose disk is still full cannot open its store — is started again every
// second until it stays up, for at most superviseFor.
func supervised(start func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		deadline := time.Now().Add(superviseFor)
		for {
			err := start(ctx)
			if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
				return err
			}
			if err := sleepCtx(ctx, time.Second); err != nil {
				return err
			}
		}
	}
}

// maxEpochPicture bounds the acknowledgements epoch-history.html draws
// when the history is linearizable.
const maxEpochPicture = 20_000
