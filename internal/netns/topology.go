// Package netns builds a small, private multi-IDC network out of Linux
// network namespaces, so tests and the disaster drill can put each IDC
// behind a real link with latency, loss and partitions.
//
// Shape: IDC n is a namespace holding one interface, eth0, with the address
// 198.18.n.1/24 from the RFC 2544 benchmarking block and an on-link route to
// 198.18.0.0/15 (no default route). Every eth0 is a veth whose other end,
// named idcN, is a port of the bridge br0 in a separate bridge namespace.
// Nothing is created in the root namespace, so no packet can leave the
// machine. Link shaping and cuts live on the bridge ports (see shape.go):
// the senders' own TCP stacks see a real network, not a local qdisc drop.
// On a kernel without netem, a user-space delay line in this process
// shapes the links instead (delayline_linux.go).
//
// Every name carries a per-run suffix (the creating process id and a random
// tag); Close removes everything, and Cleanup removes the leftovers of
// earlier runs whose process is gone.
//
// A Topology is safe for concurrent use. It needs root (CAP_NET_ADMIN and
// CAP_SYS_ADMIN) and the ip and tc commands of iproute2.
package netns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// MaxIDCs is the largest number of IDCs a Topology holds. It keeps the tc
// class and filter numbers of shape.go (one per source IDC, below the drop
// class 0xff and the shaping preference 100) apart.
const MaxIDCs = 15

// ErrUnavailable is returned by New when this machine cannot create network
// namespaces (not root, no iproute2, a sandbox that forbids it). Tests skip
// on it.
var ErrUnavailable = errors.New("netns: network namespaces unavailable")

// Link is the shaping of one direction between two IDCs. The zero Link is an
// unshaped link.
type Link struct {
	// Delay is added to every packet in this direction (one way: a round
	// trip between two IDCs costs the Delay of both directions).
	Delay time.Duration
	// Jitter varies Delay uniformly by up to ± Jitter. netem may reorder
	// packets when Jitter is set; TCP copes, at some cost in throughput.
	Jitter time.Duration
	// LossPercent drops this share of packets at random (0–100).
	LossPercent float64
}

// Pair names the two IDCs of a link; order does not matter.
type Pair struct{ A, B int }

// Config describes a Topology.
type Config struct {
	// Prefix starts every name the topology creates; Cleanup removes
	// leftovers by it. Keep it short and specific to one test or tool
	// ("zqnet", "zqdrill"). Required.
	Prefix string
	// IDCs is the number of IDCs, numbered 1..IDCs (at most MaxIDCs).
	IDCs int
	// Default shapes every direction between two different IDCs that Links
	// does not name.
	Default Link
	// Links overrides Default for a pair of IDCs, both directions.
	Links map[Pair]Link
	// Logger receives one line per topology change; nil discards them.
	Logger *slog.Logger
}

// Topology is a running set of IDC namespaces joined by a bridge.
type Topology struct {
	cfg    Config
	log    *slog.Logger
	runTag string // prefix-pid-random: the start of every name
	shaper string // set by build, read-only afterwards

	mu      sync.Mutex
	created []string      // namespaces made so far, for Close
	cuts    map[Pair]bool // directed: A→B dropped; caller holds mu
	delay   *delayLine    // the user-space shaper, if any
	// degraded holds the links Degrade changed (degrade.go).
	degraded atomic.Pointer[degraded]
	// serviceCuts maps each service cut to its filter preference.
	serviceCuts           map[serviceCut]int
	nextServicePreference int
	closed                bool
	closeMu               sync.Once
	closeErr              error
}

// New creates the namespaces, the bridge and the shaping. On any error it
// removes what it had created. It first runs Cleanup(cfg.Prefix).
func New(ctx context.Context, cfg Config) (*Topology, error) {
	if cfg.Prefix == "" {
		return nil, errors.New("netns: Config.Prefix is required")
	}
	if cfg.IDCs < 1 || cfg.IDCs > MaxIDCs {
		return nil, fmt.Errorf("netns: Config.IDCs is %d; want 1..%d", cfg.IDCs, MaxIDCs)
	}
	if err := checkLink(cfg.Default); err != nil {
		return nil, fmt.Errorf("netns: Config.Default: %w", err)
	}
	for p, l := range cfg.Links {
		if err := checkIDC(cfg, p.A); err != nil {
			return nil, fmt.Errorf("netns: Config.Links: %w", err)
		}
		if err := checkIDC(cfg, p.B); err != nil {
			return nil, fmt.Errorf("netns: Config.Links: %w", err)
		}
		if err := checkLink(l); err != nil {
			return nil, fmt.Errorf("netns: Config.Links[%d,%d]: %w", p.A, p.B, err)
		}
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: not running as root", ErrUnavailable)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var random [3]byte
	if _, err := rand.Read(random[:]); err != nil {
		return nil, fmt.Errorf("netns: run tag: %w", err)
	}
	if err := Cleanup(ctx, cfg.Prefix); err != nil {
		log.Warn("netns: removing leftovers failed", "prefix", cfg.Prefix, "err", err)
	}
	t := &Topology{
		cfg:    cfg,
		log:    log.With("netns", cfg.Prefix),
		runTag: fmt.Sprintf("%s-%d-%s", cfg.Prefix, os.Getpid(), hex.EncodeToString(random[:])),
		cuts:   map[Pair]bool{},

		serviceCuts:           map[serviceCut]int{},
		nextServicePreference: firstServicePreference,
	}
	if err := t.build(ctx); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	register(t)
	t.log.Info("netns: topology up", "run", t.runTag, "idcs", cfg.IDCs, "bridge", t.BridgeNamespace())
	return t, nil
}

func checkIDC(cfg Config, n int) error {
	if n < 1 || n > cfg.IDCs {
		return fmt.Errorf("IDC %d is not in 1..%d", n, cfg.IDCs)
	}
	return nil
}

func checkLink(l Link) error {
	if l.Delay < 0 || l.Jitter < 0 {
		return fmt.Errorf("negative delay or jitter (%v, %v)", l.Delay, l.Jitter)
	}
	if l.Jitter > l.Delay {
		return fmt.Errorf("jitter %v exceeds delay %v", l.Jitter, l.Delay)
	}
	if l.LossPercent < 0 || l.LossPercent > 100 {
		return fmt.Errorf("loss %v%% is not in 0..100", l.LossPercent)
	}
	return nil
}

// IDCs reports the number of IDCs.
func (t *Topology) IDCs() int { return t.cfg.IDCs }

// Namespace returns the name of IDC n's namespace, for `ip netns exec`.
func (t *Topology) Namespace(n int) string { return fmt.Sprintf("%s-idc%d", t.runTag, n) }

// BridgeNamespace returns the name of the namespace that holds the bridge.
func (t *Topology) BridgeNamespace() string { return t.runTag + "-br" }

// Names returns every namespace name this topology uses, created or not.
func (t *Topology) Names() []string {
	names := []string{t.BridgeNamespace()}
	for n := 1; n <= t.cfg.IDCs; n++ {
		names = append(names, t.Namespace(n))
	}
	return names
}

// Addr returns IDC n's address, 198.18.n.1.
func Addr(n int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, byte(n), 1}) }

// link returns the shaping of the direction from → to now.
func (t *Topology) link(from, to int) Link {
	if l, ok := t.degradedLink(from, to); ok {
		return l
	}
	return t.builtLink(from, to)
}

// builtLink returns the shaping of the direction from → to as configured.
func (t *Topology) builtLink(from, to int) Link {
	if l, ok := t.cfg.Links[Pair{from, to}]; ok {
		return l
	}
	if l, ok := t.cfg.Links[Pair{to, from}]; ok {
		return l
	}
	return t.cfg.Default
}

// build creates the bridge namespace, then each IDC's namespace and veth.
func (t *Topology) build(ctx context.Context) error {
	br := t.BridgeNamespace()
	if err := t.addNamespace(ctx, br); err != nil {
		return err
	}
	if err := run(ctx, "ip", "-n", br, "link", "add", "br0", "type", "bridge"); err != nil {
		return err
	}
	if err := run(ctx, "ip", "-n", br, "link", "set", "br0", "up"); err != nil {
		return err
	}
	for n := 1; n <= t.cfg.IDCs; n++ {
		if err := t.buildIDC(ctx, n); err != nil {
			return fmt.Errorf("netns: IDC %d: %w", n, err)
		}
	}
	if t.shaped() {
		t.shaper = "netem"
		if !t.netemAvailable(ctx) {
			t.shaper = "user space"
		}
	}
	for n := 1; n <= t.cfg.IDCs; n++ {
		if err := t.shapePort(ctx, n); err != nil {
			return fmt.Errorf("netns: shaping towards IDC %d: %w", n, err)
		}
	}
	if t.shaper == "user space" {
		dl, err := t.startDelayLine(ctx)
		if err != nil {
			return err
		}
		t.mu.Lock()
		t.delay = dl
		t.mu.Unlock()
	}
	return nil
}

// shaped reports whether any link has delay, jitter or loss.
func (t *Topology) shaped() bool {
	for a := 1; a <= t.cfg.IDCs; a++ {
		for b := 1; b <= t.cfg.IDCs; b++ {
			if a != b && t.link(a, b) != (Link{}) {
				return true
			}
		}
	}
	return false
}

// netemAvailable tries a netem qdisc on the bridge itself.
func (t *Topology) netemAvailable(ctx context.Context) bool {
	br := t.BridgeNamespace()
	if err := run(ctx, "tc", "-n", br, "qdisc", "add", "dev", "br0", "root", "netem", "delay", "1ms"); err != nil {
		return false
	}
	return run(ctx, "tc", "-n", br, "qdisc", "del", "dev", "br0", "root") == nil
}

// Shaper says how links are shaped: "netem" (the kernel), "user space" (a
// delay line in this process, for kernels without netem; see
// delayline_linux.go) or "" (no link asks for shaping).
func (t *Topology) Shaper() string { return t.shaper }

func (t *Topology) buildIDC(ctx context.Context, n int) error {
	ns, br, port := t.Namespace(n), t.BridgeNamespace(), fmt.Sprintf("idc%d", n)
	if err := t.addNamespace(ctx, ns); err != nil {
		return err
	}
	// Both ends are created straight inside their namespaces, so not even a
	// transient interface appears in the root namespace.
	steps := [][]string{
		{"ip", "-n", br, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "-n", br, "link", "set", port, "master", "br0", "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "-n", ns, "addr", "add", Addr(n).String() + "/24", "dev", "eth0"},
		{"ip", "-n", ns, "link", "set", "eth0", "up"},
		// On-link: the bridge is one segment, so other IDCs are reached by
		// ARP without a router; there is no default route at all.
		{"ip", "-n", ns, "route", "add", "198.18.0.0/15", "dev", "eth0"},
	}
	for _, s := range steps {
		if err := run(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// addNamespace creates one namespace and records it for Close. The first
// failure to create one is ErrUnavailable: the machine does not allow it.
func (t *Topology) addNamespace(ctx context.Context, name string) error {
	t.mu.Lock()
	first := len(t.created) == 0
	t.mu.Unlock()
	if err := run(ctx, "ip", "netns", "add", name); err != nil {
		if first {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	}
	t.mu.Lock()
	t.created = append(t.created, name)
	t.mu.Unlock()
	return nil
}

// Close removes every namespace the topology created; their veths and the
// bridge go with them. Processes still running inside a namespace keep its
// network alive until they exit, so stop them first. Close is idempotent and
// safe to call from a signal handler's goroutine.
func (t *Topology) Close() error {
	t.closeMu.Do(func() {
		unregister(t)
		t.mu.Lock()
		t.closed = true
		created := t.created
		t.created = nil
		dl := t.delay
		t.delay = nil
		t.mu.Unlock()
		if dl != nil {
			dl.stop()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var errs []error
		// IDCs before the bridge: the reverse of creation.
		for i := len(created) - 1; i >= 0; i-- {
			if err := run(ctx, "ip", "netns", "del", created[i]); err != nil {
				errs = append(errs, err)
			}
		}
		t.closeErr = errors.Join(errs...)
		t.log.Info("netns: topology removed", "run", t.runTag, "err", t.closeErr)
	})
	return t.closeErr
}
