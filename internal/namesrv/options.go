package namesrv

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zonemq/zonemq/internal/member"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Defaults of Options (see NewOptions).
const (
	DefaultListen       = "127.0.0.1:9876"
	DefaultBrokerExpiry = 3 * time.Second
	DefaultScanInterval = time.Second
	DefaultClientExpiry = 3 * time.Second
)

// Options configures a Server. NewOptions returns the defaults; New
// validates.
type Options struct {
	// Listen is the TCP address to serve on. Default 127.0.0.1:9876
	// (RocketMQ binds 0.0.0.0:9876; zonemq stays on loopback unless told).
	Listen string
	// IDC is this name server's own IDC; it tags every log line. Required.
	IDC string
	// BrokerExpiry drops a broker that sent no registration or heartbeat
	// for this long (a broker's heartbeatTimeoutMillis overrides it).
	// Default 3 s.
	BrokerExpiry time.Duration
	// ScanInterval is how often brokers and clients are checked for
	// expiry. Default 1 s.
	ScanInterval time.Duration
	// ClientExpiry drops a client that sent no heartbeat (code 9001) for
	// this long. Default 3 s.
	ClientExpiry time.Duration
	// KVConfigPath is the JSON file the KV config is kept in (loaded at
	// start, rewritten atomically on each change). Empty keeps the KV
	// config in memory only. Default $HOME/zonemq/namesrv/kvConfig.json.
	KVConfigPath string
	// MaxFrameSize caps an incoming frame in bytes; 0 means the remoting
	// default (16 MiB, RocketMQ's).
	MaxFrameSize int
	// MaxTopicsPerBroker caps the topics one registration may carry;
	// MaxTopicEntries the (broker, topic) pairs all registered brokers
	// hold together. A registration over either is refused with a remark
	// naming the limit, and the routes stay as they were (a flood of
	// 600 k-topic registrations took a name server to 2.28 GB and
	// dropped every broker). 0 means the defaults below.
	MaxTopicsPerBroker int
	MaxTopicEntries    int
	// ClaimHold keeps a broker slot for the data directory that last
	// registered it, this long after it was last seen (instances.go);
	// 0 means DefaultClaimHold, negative turns the check off.
	ClaimHold time.Duration
	// ClusterSecret authenticates cluster members to each other
	// (internal/member, docs/security.md): with it, every member request
	// must carry a valid member MAC. nil turns member authentication off,
	// which only loopback listeners or an explicit --insecure allow.
	ClusterSecret *member.Secret
	// ACLFile is a plain_acl.yml (RocketMQ ACL 1.0, docs/security.md); every
	// request is then checked against it, and it is re-read when it changes.
	// Empty (the default) turns the ACL off.
	ACLFile string
	// ACLReloadInterval is how often ACLFile is checked for changes; 0 means
	// 1 s.
	ACLReloadInterval time.Duration
	// TLSMode serves TLS on Listen: disabled (the default), permissive (TLS
	// and plain on the same port, for a migration) or enforcing.
	// TLSCertFile and TLSKeyFile (PEM) are then required; they are re-read
	// when they change.
	TLSMode     remoting.TLSMode
	TLSCertFile string
	TLSKeyFile  string
	// ControllerAddrs are failover controller voters' request addresses
	// (--controller-addrs). With them, a master the controller elected
	// takes the master's slot of its group at once, even while the master
	// it replaced still holds it (frozen or cut off): the name server
	// confirms the election with a voter first (elected.go). Empty: a held
	// slot frees only when its holder's connection closes or it expires.
	ControllerAddrs []string
	// ControllerAccessKey and ControllerSecretKey sign those confirmations
	// for voters that run with an ACL (any account may read their status);
	// ControllerTLS, when set, dials the voters over TLS.
	ControllerAccessKey, ControllerSecretKey string
	ControllerTLS                            *tls.Config
	// MetricsListen, when set, is the "host:port" serving Prometheus metrics
	// at /metrics (--metrics-listen; port 0 picks one, MetricsAddr reports
	// it). docs/metrics.md lists the metrics.
	MetricsListen string
	// Logger receives the server's events; nil discards them. The server
	// adds role=namesrv and idc=IDC to every line.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now. Tests may replace it.
	Now func() time.Time
}

// NewOptions returns the default options (IDC still has to be set).
// Default registration limits: 200 k topics per broker (RocketMQ's name
// server breaks near 60–70 k, at its 16 MiB frame), 2 M topic entries in
// all (200 brokers of 10 k topics).
const (
	DefaultMaxTopicsPerBroker = 200_000
	DefaultMaxTopicEntries    = 2_000_000
)

func NewOptions() Options {
	return Options{
		MaxTopicsPerBroker: DefaultMaxTopicsPerBroker,
		ClaimHold:          DefaultClaimHold,
		MaxTopicEntries:    DefaultMaxTopicEntries,
		Listen:             DefaultListen,
		BrokerExpiry:       DefaultBrokerExpiry,
		ScanInterval:       DefaultScanInterval,
		ClientExpiry:       DefaultClientExpiry,
		KVConfigPath:       DefaultKVConfigPath(),
	}
}

// DefaultKVConfigPath is $HOME/zonemq/namesrv/kvConfig.json (RocketMQ keeps
// ~/namesrv/kvConfig.json), or "" when there is no home directory.
func DefaultKVConfigPath() string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, "zonemq", "namesrv", "kvConfig.json")
}

// ErrInvalidOptions wraps every error New returns for a bad option (as
// opposed to a failure to bind or to load the KV config).
var ErrInvalidOptions = errors.New("namesrv: invalid options")

// validate checks opts, naming the command-line flag of a bad value.
func (o *Options) validate() error {
	var msg string
	switch {
	case strings.TrimSpace(o.Listen) == "":
		msg = "--listen is empty"
	case strings.TrimSpace(o.IDC) == "":
		msg = "--idc is required (the IDC this name server runs in)"
	case o.BrokerExpiry <= 0:
		msg = fmt.Sprintf("--broker-expiry must be positive, got %v", o.BrokerExpiry)
	case o.ScanInterval <= 0:
		msg = fmt.Sprintf("--scan-interval must be positive, got %v", o.ScanInterval)
	case o.ClientExpiry <= 0:
		msg = fmt.Sprintf("--client-expiry must be positive, got %v", o.ClientExpiry)
	case o.TLSMode != remoting.TLSDisabled && (o.TLSCertFile == "" || o.TLSKeyFile == ""):
		msg = fmt.Sprintf("--tls-mode %s needs --tls-cert and --tls-key", o.TLSMode)
	case o.MaxFrameSize < 0:
		msg = fmt.Sprintf("--max-frame-size must not be negative, got %d", o.MaxFrameSize)
	default:
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidOptions, msg)
}
