package drill

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/zonemq/zonemq/internal/netns"
	"github.com/zonemq/zonemq/internal/wallclock"
)

// dialFunc opens a connection; the SDK's ClientConfig.Dial has this shape.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// network is where the drill's IDCs live: loopback (topo nil, IDC n on
// 127.0.n.1) or, with --netns, one network namespace per IDC on 198.18.n.1
// behind a shaped link (docs/disaster-recovery.md, "Real network").
//
// Under --netns the drill process itself stays in the machine's namespace:
// every server runs inside its IDC's namespace through `ip netns exec`, and
// every connection the drill opens on an IDC's behalf (its SDK clients, the
// readiness probes) is dialled from inside that namespace. Cutting an IDC off
// therefore cuts off its clients with it, as for real applications, and the
// machine's own namespace gets no address and no route.
type network struct {
	topo *netns.Topology
}

// newNetwork builds the namespaces for opts (nothing on loopback).
func newNetwork(ctx context.Context, opts *Options) (*network, error) {
	if !opts.Netns {
		return &network{}, nil
	}
	if opts.IDCRTT < 0 || opts.IDCLossPercent < 0 || opts.IDCLossPercent > 100 {
		return nil, fmt.Errorf("drill: --idc-rtt must be ≥ 0 and --idc-loss 0..100, got %v and %v",
			opts.IDCRTT, opts.IDCLossPercent)
	}
	// Half the round trip on each direction of every pair of IDCs.
	link := netns.Link{Delay: opts.IDCRTT / 2, LossPercent: opts.IDCLossPercent}
	topo, err := netns.New(ctx, netns.Config{Prefix: "zqdrill", IDCs: opts.IDCs, Default: link, Logger: opts.Logger})
	switch {
	case errors.Is(err, netns.ErrUnavailable):
		return nil, fmt.Errorf("drill: --netns needs root and Linux network namespaces: %w", err)
	case errors.Is(err, netns.ErrNoNetem):
		return nil, fmt.Errorf("drill: --idc-rtt and --idc-loss need the kernel's netem qdisc or /dev/net/tun; "+
			"run with --idc-rtt 0 to drill the partitions without latency: %w", err)
	case err != nil:
		return nil, err
	}
	return &network{topo: topo}, nil
}

// ipOf is IDC n's address.
func (n *network) ipOf(idc int) string {
	if n.topo == nil {
		return loopbackIP(idc)
	}
	return netns.Addr(idc).String()
}

// attach makes the cluster's processes start, and its connections begin,
// inside their IDC's namespace.
func (n *network) attach(c *cluster) {
	if n.topo == nil {
		return
	}
	for k, i := range c.idcs {
		idc := k + 1
		i.dial = n.topo.Dialer(idc)
		for _, p := range i.servers() {
			p.dial = i.dial
			p.command = func(name string, args ...string) *exec.Cmd {
				return n.topo.Command(context.Background(), idc, name, args...)
			}
		}
	}
}

// dialToIDC dials each address from inside the namespace of the IDC that
// holds it, as an operator's tool on that IDC's network would (nil on
// loopback): the drill's view of the controller's voters is never cut off
// by the partitions it plays.
func (n *network) dialToIDC() dialFunc {
	if n.topo == nil {
		return nil
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return nil, err
		}
		idc := netns.IDCOf(ap.Addr())
		if idc < 1 || idc > n.topo.IDCs() {
			return nil, fmt.Errorf("drill: %s is in no IDC of the topology", addr)
		}
		return n.topo.Dialer(idc)(ctx, network, addr)
	}
}

// close removes the namespaces; the cluster's processes are gone by then.
func (n *network) close() {
	if n.topo != nil {
		_ = n.topo.Close()
	}
}

// newCommand is the process to start: the binary itself, or the binary
// inside its IDC's namespace.
func (p *proc) newCommand() *exec.Cmd {
	var cmd *exec.Cmd
	if p.command != nil {
		cmd = p.command(p.binary, p.args...)
	} else {
		cmd = exec.Command(p.binary, p.args...)
	}
	if p.role == roleBroker {
		// A broker's wall clock follows its skew file (clock faults).
		cmd.Env = append(os.Environ(), wallclock.EnvSkewFile+"="+p.clockFile())
	}
	return cmd
}

// clockFile is where a clock fault writes a broker's skew: beside its log.
func (p *proc) clockFile() string { return strings.TrimSuffix(p.logPath, ".log") + ".clock" }

// httpTransport is a transport over dial, or nil (the default transport)
// when dial is nil.
func httpTransport(dial dialFunc) http.RoundTripper {
	if dial == nil {
		return nil
	}
	return &http.Transport{DialContext: dial, DisableKeepAlives: true}
}

// dialTimeout connects to addr through dial, or directly when dial is nil.
func dialTimeout(dial dialFunc, addr string, timeout time.Duration) (net.Conn, error) {
	if dial == nil {
		return net.DialTimeout("tcp", addr, timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return dial(ctx, "tcp", addr)
}
