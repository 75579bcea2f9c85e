package addrsrv

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/zonemq/zonemq/internal/idc"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Namesrv is one configured name server: its remoting address and its IDC.
type Namesrv struct {
	// Addr is "host:port". Prefer an IP literal: the Go RocketMQ client
	// rejects host names in name-server addresses it is given directly.
	Addr string
	// IDC is the name of the IDC the name server runs in.
	IDC string
}

// Options configures an address server. Start from NewOptions.
type Options struct {
	// Listen is the HTTP address to bind (--listen). Stock RocketMQ clients
	// look for their address server on port 8080.
	Listen string
	// IDC is this address server's own IDC (--idc): its name servers are
	// listed first.
	IDC string
	// Namesrvs lists every IDC's name servers (--namesrv), in the order they
	// are listed within each IDC.
	Namesrvs []Namesrv
	// ProbeInterval is how often each name server is probed (--probe-interval).
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe, dial included (--probe-timeout); a name
	// server that has not answered by then counts as failed. 0 means
	// min(ProbeInterval, DefaultProbeTimeout).
	ProbeTimeout time.Duration
	// DownAfter is how many consecutive failed probes mark a name server
	// down (--down-after). One good probe marks it up again.
	DownAfter int
	// PingInterval is how often each listed name server is asked, between
	// probes, on the connection the probes keep open (--ping-interval); 0
	// turns the pings off. SilentAfter is how long a listed name server may
	// answer nothing at all (neither ping nor probe) before it is taken off
	// the list at once, without waiting for DownAfter probes
	// (--silent-after). A slow name server keeps answering some ping every
	// PingInterval, so only one that is hung or cut off goes.
	PingInterval time.Duration
	SilentAfter  time.Duration
	// TLSMode serves HTTPS on Listen: disabled (the default), permissive
	// (HTTPS and HTTP on the same port, for a migration) or enforcing.
	// TLSCertFile and TLSKeyFile (PEM) are then required; they are re-read
	// when they change.
	TLSMode     remoting.TLSMode
	TLSCertFile string
	TLSKeyFile  string
	// ProbeTLS, when set, probes the name servers over TLS (nil: plain).
	ProbeTLS *tls.Config
	// MetricsListen, when set, is the "host:port" serving Prometheus metrics
	// at /metrics (--metrics-listen; port 0 picks one, MetricsAddr reports
	// it). docs/metrics.md lists the metrics.
	MetricsListen string
	// Logger receives state changes; nil discards them.
	Logger *slog.Logger
}

// Defaults (docs/architecture.md §4: probe every 1 s, down after 2 misses).
const (
	DefaultListen        = "0.0.0.0:8080"
	DefaultProbeInterval = time.Second
	// DefaultProbeTimeout bounds one probe. A name server answers a cluster
	// info request in well under a millisecond on a LAN, so 400 ms only
	// fails a process that is hung or unreachable; it keeps "down after 2
	// misses" within 2 s of a hang (see the retry in probeLoop).
	DefaultProbeTimeout = 400 * time.Millisecond
	DefaultDownAfter    = 2
	// DefaultPingInterval and DefaultSilentAfter take a hung name server
	// off the list 0.6–0.8 s after it hangs (docs/addrsrv.md), while one
	// that answers within 0.5 s stays.
	DefaultPingInterval = 100 * time.Millisecond
	DefaultSilentAfter  = 600 * time.Millisecond
)

// NewOptions returns the default options. Listen has a default; IDC and
// Namesrvs must be set.
func NewOptions() Options {
	return Options{
		Listen:        DefaultListen,
		ProbeInterval: DefaultProbeInterval,
		DownAfter:     DefaultDownAfter,
		PingInterval:  DefaultPingInterval,
		SilentAfter:   DefaultSilentAfter,
	}
}

// ErrInvalidOptions matches (errors.Is) every error Validate and
// ParseNamesrvs return, so a caller can tell a configuration mistake (exit
// status 2) from a runtime failure.
var ErrInvalidOptions = errors.New("addrsrv: invalid options")

// OptionError is a configuration mistake. Its message names the flag at
// fault, e.g. "--idc is required".
type OptionError struct{ Msg string }

func (e *OptionError) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrInvalidOptions) true.
func (e *OptionError) Is(target error) bool { return target == ErrInvalidOptions }

func invalid(format string, a ...any) error {
	return &OptionError{Msg: fmt.Sprintf(format, a...)}
}

// Validate checks o and names the flag at fault. It does not change o.
func (o *Options) Validate() error {
	if o.Listen == "" {
		return invalid("--listen is required")
	}
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		return invalid("--listen %q: %v", o.Listen, err)
	}
	if o.IDC == "" {
		return invalid("--idc is required")
	}
	if err := idc.CheckName(o.IDC); err != nil {
		return invalid("--idc: %v", err)
	}
	if len(o.Namesrvs) == 0 {
		return invalid("--namesrv is required: give every IDC's name servers as 'idc1=ADDR,idc2=ADDR'")
	}
	seen := make(map[string]string, len(o.Namesrvs))
	for _, ns := range o.Namesrvs {
		if err := checkNamesrv(ns); err != nil {
			return invalid("--namesrv: %v", err)
		}
		if prev, dup := seen[ns.Addr]; dup {
			return invalid("--namesrv: %s is listed twice (as %s=%s and %s=%s)", ns.Addr, prev, ns.Addr, ns.IDC, ns.Addr)
		}
		seen[ns.Addr] = ns.IDC
	}
	if o.ProbeInterval <= 0 {
		return invalid("--probe-interval must be positive, got %v", o.ProbeInterval)
	}
	if o.ProbeTimeout < 0 {
		return invalid("--probe-timeout must not be negative, got %v", o.ProbeTimeout)
	}
	if o.DownAfter < 1 {
		return invalid("--down-after must be at least 1, got %d", o.DownAfter)
	}
	if o.PingInterval < 0 {
		return invalid("--ping-interval must not be negative (0 turns pings off), got %v", o.PingInterval)
	}
	if o.PingInterval > 0 && o.SilentAfter < 2*o.PingInterval {
		return invalid("--silent-after (%v) must be at least twice --ping-interval (%v)", o.SilentAfter, o.PingInterval)
	}
	return nil
}

// probeTimeout is ProbeTimeout with its default applied.
func (o *Options) probeTimeout() time.Duration {
	if o.ProbeTimeout > 0 {
		return o.ProbeTimeout
	}
	return min(o.ProbeInterval, DefaultProbeTimeout)
}

func checkNamesrv(ns Namesrv) error {
	if err := idc.CheckName(ns.IDC); err != nil {
		return fmt.Errorf("%s=%s: %v", ns.IDC, ns.Addr, err)
	}
	host, port, err := net.SplitHostPort(ns.Addr)
	if err != nil {
		return fmt.Errorf("%s=%s: address must be host:port: %v", ns.IDC, ns.Addr, err)
	}
	if host == "" || strings.ContainsAny(host, ";,= \t") {
		return fmt.Errorf("%s=%s: bad host %q", ns.IDC, ns.Addr, host)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%s=%s: bad port %q", ns.IDC, ns.Addr, port)
	}
	return nil
}

// ParseNamesrvs reads the --namesrv syntax: comma-separated IDC=ADDR items,
// e.g. "idc1=127.0.1.1:9876,idc1=127.0.1.2:9876,idc2=127.0.2.1:9876".
// Blanks around items are ignored. It checks each item's syntax; Validate
// checks the list as a whole.
func ParseNamesrvs(s string) ([]Namesrv, error) {
	var out []Namesrv
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			if strings.TrimSpace(s) == "" {
				return nil, invalid("--namesrv: empty list")
			}
			return nil, invalid("--namesrv: item %d of %q is empty", i+1, s)
		}
		name, addr, ok := strings.Cut(item, "=")
		if !ok {
			return nil, invalid("--namesrv: item %q: want IDC=HOST:PORT", item)
		}
		ns := Namesrv{IDC: strings.TrimSpace(name), Addr: strings.TrimSpace(addr)}
		if err := checkNamesrv(ns); err != nil {
			return nil, invalid("--namesrv: %v", err)
		}
		out = append(out, ns)
	}
	return out, nil
}

// FormatNamesrvs is the inverse of ParseNamesrvs.
func FormatNamesrvs(list []Namesrv) string {
	parts := make([]string, len(list))
	for i, ns := range list {
		parts[i] = ns.IDC + "=" + ns.Addr
	}
	return strings.Join(parts, ",")
}
