package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zonemq/zonemq/internal/idc"
)

// Default timings. Every one can be changed in the config; docs/client.md
// explains each choice.
const (
	DefaultRequestTimeout          = 1 * time.Second
	DefaultDialTimeout             = 1 * time.Second
	DefaultAddrsrvRefreshInterval  = 5 * time.Second
	DefaultClientHeartbeatInterval = 1 * time.Second
	DefaultRouteRefreshInterval    = 5 * time.Second
)

// ClientConfig is what every zonemq client needs: where to find the name
// servers, its own IDC and its timings. It is embedded in ProducerConfig,
// ConsumerConfig, PullConsumerConfig and client/admin's Config. A
// ClientConfig is read by the constructor and not retained by reference;
// changing it afterwards has no effect.
type ClientConfig struct {
	// AddrsrvURLs are base URLs of address servers, e.g.
	// "http://127.0.1.1:18080". The client asks them (in order, first answer
	// wins) for every IDC's name servers, every AddrsrvRefreshInterval and at
	// once when a name server fails. List your own IDC's address server
	// first. One of AddrsrvURLs and NamesrvAddrs is required.
	AddrsrvURLs []string

	// NamesrvAddrs are name servers ("ip:port") to use as given, their IDC
	// unknown. With AddrsrvURLs set too, they are used only until an address
	// server has answered once.
	NamesrvAddrs []string

	// IDC is the client's own IDC. The client prefers name servers and
	// brokers of this IDC. Empty means unknown: no preference, and the
	// client's consumers count as IDC-less (see docs/client.md).
	IDC string
	// AllowUnknownIDC lets IDC name an IDC the address servers do not list
	// (a client-only IDC: no servers of its own). Otherwise Start refuses
	// such an IDC with ErrUnknownIDC, which lists the known ones, so a typo
	// does not quietly make every IDC "remote".
	AllowUnknownIDC bool

	// InstanceName tells clients of one process apart; it is the middle part
	// of the client id "<ip>@<instance>@idc=<idc>". Empty means
	// "<pid>#<n>", n counting the clients made in this process, so two
	// consumers of one group in one process never share an id.
	InstanceName string

	// LocalIP is the local address outgoing connections are bound to, and the
	// ip part of the client id. Empty means no bind, and the ip is the local
	// address of the client's first connection.
	LocalIP string

	// Dial, if set, opens every TCP connection instead of a net.Dialer (tests
	// count or redirect connections with it). LocalIP is then not applied to
	// connections; Dial is responsible for binding.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// Logger receives the client's log lines; nil discards them.
	Logger *slog.Logger

	// ClusterSecretFile names the cluster secret's file (docs/security.md).
	// Only an operator's tool needs it: switchovers and forced promotions,
	// topic route and KV writes on name servers and controller elections
	// are cluster-member requests, refused without its MAC by a cluster
	// that has a secret. Applications leave it empty.
	ClusterSecretFile string

	// RequestTimeout bounds one request to a name server and a broker's
	// control requests (heartbeat, offsets, consumer list, locks). Zero
	// means DefaultRequestTimeout (1 s). A request that times out closes its
	// connection: the peer is treated as hung.
	RequestTimeout time.Duration

	// DialTimeout bounds opening a connection. Zero means DefaultDialTimeout
	// (1 s).
	DialTimeout time.Duration

	// AddrsrvRefreshInterval is how often the name-server list is re-read
	// from the address server. Zero means DefaultAddrsrvRefreshInterval (5 s).
	AddrsrvRefreshInterval time.Duration

	// ClientHeartbeatInterval is how often the client tells every name
	// server of every IDC that it is alive (zonemq request 9001). Zero means
	// DefaultClientHeartbeatInterval (1 s).
	ClientHeartbeatInterval time.Duration

	// RouteRefreshInterval is how often topic routes are re-read; they are
	// also re-read at once after any send or pull failure. Zero means
	// DefaultRouteRefreshInterval (5 s).
	RouteRefreshInterval time.Duration

	// ZoneMode asks name servers for the brokers of the client's own IDC
	// only (RocketMQ 5's __ZONE_MODE). The default, false, gets every IDC's
	// brokers, which a producer needs to fail over to another IDC inside
	// one send call; see docs/client.md.
	ZoneMode bool

	// AccessKey and SecretKey sign every request with RocketMQ ACL 1.0
	// (AccessKey and Signature ext fields, as rocketmq-client-go's
	// primitive.Credentials does) for servers that run with an ACL file.
	// Both or neither; empty (the default) sends requests unsigned.
	AccessKey string
	SecretKey string

	// TLS, if set, opens every name-server and broker connection with TLS
	// using this config (set RootCAs to trust a private CA). Nil, the
	// default, connects in plain TCP. Servers run with --tls-mode
	// permissive accept both during a migration; see docs/security.md.
	TLS *tls.Config
}

// ConfigError reports an invalid config field.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string { return "zonemq client: config " + e.Field + ": " + e.Reason }

// instanceSeq numbers the clients made in this process for the default
// InstanceName.
var instanceSeq atomic.Int64

// normalize validates c and fills in the defaults.
func (c ClientConfig) normalize() (ClientConfig, error) {
	c.AddrsrvURLs = trimAll(c.AddrsrvURLs)
	c.NamesrvAddrs = splitAddrs(c.NamesrvAddrs)
	if len(c.AddrsrvURLs) == 0 && len(c.NamesrvAddrs) == 0 {
		return c, &ConfigError{"AddrsrvURLs", "one of AddrsrvURLs and NamesrvAddrs is required"}
	}
	for i, u := range c.AddrsrvURLs {
		if !strings.Contains(u, "://") {
			u = "http://" + u
		}
		p, err := url.Parse(u)
		if err != nil || p.Host == "" {
			return c, &ConfigError{"AddrsrvURLs", fmt.Sprintf("%q is not an http URL", c.AddrsrvURLs[i])}
		}
		c.AddrsrvURLs[i] = strings.TrimRight(u, "/")
	}
	for _, a := range c.NamesrvAddrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return c, &ConfigError{"NamesrvAddrs", fmt.Sprintf("%q is not host:port", a)}
		}
	}
	if c.IDC != "" {
		if err := idc.CheckName(c.IDC); err != nil {
			return c, &ConfigError{"IDC", err.Error()}
		}
	}
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return c, &ConfigError{"AccessKey", "AccessKey and SecretKey go together"}
	}
	if c.LocalIP != "" && net.ParseIP(c.LocalIP) == nil {
		return c, &ConfigError{"LocalIP", fmt.Sprintf("%q is not an IP address", c.LocalIP)}
	}
	if strings.ContainsAny(c.InstanceName, "@ ") {
		return c, &ConfigError{"InstanceName", "must not contain '@' or spaces"}
	}
	if c.InstanceName == "" {
		c.InstanceName = strconv.Itoa(os.Getpid()) + "#" + strconv.FormatInt(instanceSeq.Add(1), 10)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.RequestTimeout = orDefault(c.RequestTimeout, DefaultRequestTimeout)
	c.DialTimeout = orDefault(c.DialTimeout, DefaultDialTimeout)
	c.AddrsrvRefreshInterval = orDefault(c.AddrsrvRefreshInterval, DefaultAddrsrvRefreshInterval)
	c.ClientHeartbeatInterval = orDefault(c.ClientHeartbeatInterval, DefaultClientHeartbeatInterval)
	c.RouteRefreshInterval = orDefault(c.RouteRefreshInterval, DefaultRouteRefreshInterval)
	return c, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func orDefaultInt(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

func trimAll(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// splitAddrs accepts both list elements and RocketMQ's "a;b" strings.
func splitAddrs(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' }) {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}
