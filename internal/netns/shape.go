package netns

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Shaping and cuts are applied on the bridge side, on the egress of port idcN
// (the traffic about to enter IDC N), and chosen per source IDC:
//
//	root htb qdisc 1:, unclassified packets in class 1:1 (unshaped)
//	  class 1:(m+1) ← u32 filter "ip src 198.18.m.0/24" at preference 100
//	    netem: the Link from m to N (delay, jitter, loss); only for a
//	    non-zero Link, so unshaped topologies need no netem at all,
//	    and only on a kernel with netem (else delayline_linux.go shapes)
//	  class 1:ff, a pfifo of length 0: every packet sent there is dropped
//	a cut m → N adds "ip src 198.18.m.0/24 flowid 1:ff" at preference m
//
// Lower preferences match first, so a cut overrides the shaping, and healing
// only deletes the cut filters. Dropping here, in the middle of the network,
// means the sender's TCP sees silence exactly as on a real WAN, rather than
// the local error a blackhole route or an egress drop on its own interface
// would report. ARP is not IP and is never cut: a cut is an IP-level
// partition.
//
// Only htb, pfifo, the u32 classifier and (for a non-zero Link) netem are
// needed: no tc actions (some kernels build none) and no firewall. Every
// class is capped at 10 Gbit/s, far above what a test pushes.

const (
	shapePreference = "100"
	dropClass       = "1:ff"
	classRate       = "10gbit"
)

// ErrNoNetem is returned by New when a Link asks for delay, jitter or loss
// and neither the kernel's netem qdisc nor the user-space delay line (which
// needs /dev/net/tun) is available. Cuts work without either.
var ErrNoNetem = errors.New("netns: links cannot be delayed or lossy here (no netem qdisc, no TUN device)")

func srcPrefix(m int) string { return fmt.Sprintf("198.18.%d.0/24", m) }

func port(n int) string { return fmt.Sprintf("idc%d", n) }

// shapePort installs the qdiscs and filters on the port towards IDC n.
func (t *Topology) shapePort(ctx context.Context, n int) error {
	tc := func(args ...string) error {
		return run(ctx, "tc", append([]string{"-n", t.BridgeNamespace()}, args...)...)
	}
	dev := port(n)
	// r2q keeps htb's quantum (rate / r2q) near one MTU at this rate.
	if err := tc("qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1", "r2q", "1000000"); err != nil {
		return err
	}
	for _, class := range []string{"1:1", dropClass} {
		if err := tc("class", "add", "dev", dev, "parent", "1:", "classid", class, "htb", "rate", classRate); err != nil {
			return err
		}
	}
	if err := tc("qdisc", "add", "dev", dev, "parent", dropClass, "handle", "ff:", "pfifo", "limit", "0"); err != nil {
		return err
	}
	for m := 1; m <= t.cfg.IDCs; m++ {
		l := t.link(m, n)
		if m == n || l == (Link{}) || t.shaper != "netem" {
			continue
		}
		class := fmt.Sprintf("1:%x", m+1)
		if err := tc("class", "add", "dev", dev, "parent", "1:", "classid", class, "htb", "rate", classRate); err != nil {
			return err
		}
		netem := append([]string{"qdisc", "add", "dev", dev, "parent", class, "handle", fmt.Sprintf("%x:", m+16), "netem"},
			netemArgs(l)...)
		if err := tc(netem...); err != nil {
			var ce *CommandError
			if errors.As(err, &ce) && strings.Contains(ce.Output, "kind is unknown") {
				return fmt.Errorf("%w: %w", ErrNoNetem, err)
			}
			return err
		}
		if err := tc("filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "pref", shapePreference,
			"u32", "match", "ip", "src", srcPrefix(m), "flowid", class); err != nil {
			return err
		}
	}
	return nil
}

// netemArgs renders a Link. The queue limit is raised from netem's 1,000
// packets so a delayed high-rate flow is not cut short by the shaper itself.
func netemArgs(l Link) []string {
	args := []string{"limit", "100000"}
	if l.Delay > 0 {
		args = append(args, "delay", fmt.Sprintf("%dus", l.Delay.Microseconds()))
		if l.Jitter > 0 {
			args = append(args, fmt.Sprintf("%dus", l.Jitter.Microseconds()))
		}
	}
	if l.LossPercent > 0 {
		args = append(args, "loss", strconv.FormatFloat(l.LossPercent, 'f', -1, 64)+"%")
	}
	return args
}

// CutOneWay drops every packet from IDC from to IDC to; the other direction
// is untouched. TCP connections between the two then stall both ways (their
// acknowledgements or handshakes are lost), while datagrams still flow
// to → from. Cutting an already cut direction does nothing.
func (t *Topology) CutOneWay(ctx context.Context, from, to int) error {
	if err := t.checkPair(from, to); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cutLocked(ctx, from, to)
}

// Cut drops every packet between IDCs a and b, both ways.
func (t *Topology) Cut(ctx context.Context, a, b int) error {
	if err := t.checkPair(a, b); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.cutLocked(ctx, a, b); err != nil {
		return err
	}
	return t.cutLocked(ctx, b, a)
}

// Isolate cuts IDC n from every other IDC, both ways. Processes inside n
// still reach each other: their traffic stays on n's own addresses and never
// crosses the bridge.
func (t *Topology) Isolate(ctx context.Context, n int) error {
	if err := checkIDC(t.cfg, n); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for m := 1; m <= t.cfg.IDCs; m++ {
		if m == n {
			continue
		}
		if err := t.cutLocked(ctx, n, m); err != nil {
			return err
		}
		if err := t.cutLocked(ctx, m, n); err != nil {
			return err
		}
	}
	return nil
}

// Heal removes every cut, service cuts included; the configured shaping
// stays.
func (t *Topology) Heal(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.healServicesLocked(ctx); err != nil {
		return err
	}
	for _, c := range t.cutsLocked() {
		if err := run(ctx, "tc", "-n", t.BridgeNamespace(), "filter", "del", "dev", port(c.B), "parent", "1:",
			"protocol", "ip", "pref", strconv.Itoa(c.A)); err != nil {
			return err
		}
		delete(t.cuts, c)
		t.log.Info("netns: healed", "from", c.A, "to", c.B)
	}
	return nil
}

// Cuts lists the directed cuts in force, Pair{A: from, B: to}, sorted.
func (t *Topology) Cuts() []Pair {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cutsLocked()
}

// cutsLocked lists t.cuts sorted; caller holds mu.
func (t *Topology) cutsLocked() []Pair {
	var cuts []Pair
	for c := range t.cuts {
		cuts = append(cuts, c)
	}
	slices.SortFunc(cuts, func(x, y Pair) int {
		if x.A != y.A {
			return x.A - y.A
		}
		return x.B - y.B
	})
	return cuts
}

// cutLocked installs the filter to the drop class from → to; caller holds mu. The
// preference is the source IDC, unique per port, so Heal can delete it by
// preference alone.
func (t *Topology) cutLocked(ctx context.Context, from, to int) error {
	if t.closed {
		return fmt.Errorf("netns: topology %s is closed", t.runTag)
	}
	if t.cuts[Pair{from, to}] {
		return nil
	}
	if err := run(ctx, "tc", "-n", t.BridgeNamespace(), "filter", "add", "dev", port(to), "parent", "1:",
		"protocol", "ip", "pref", strconv.Itoa(from), "u32", "match", "ip", "src", srcPrefix(from),
		"flowid", dropClass); err != nil {
		return err
	}
	t.cuts[Pair{from, to}] = true
	t.log.Info("netns: cut", "from", from, "to", to)
	return nil
}

func (t *Topology) checkPair(a, b int) error {
	if err := checkIDC(t.cfg, a); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	if err := checkIDC(t.cfg, b); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	if a == b {
		return fmt.Errorf("netns: cannot cut IDC %d from itself (use Isolate)", a)
	}
	return nil
}
