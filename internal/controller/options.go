package controller

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/zonemq/zonemq/internal/member"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Peer is one Raft voter: its node id and Raft address.
type Peer struct {
	ID       string
	RaftAddr string
}

// ParsePeers reads --raft-peers: 'id=host:port,id=host:port,…'.
func ParsePeers(s string) ([]Peer, error) {
	var peers []Peer
	seen := map[string]bool{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, addr, ok := strings.Cut(item, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("--raft-peers: %q is not id=host:port", item)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--raft-peers: %q: %w", item, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("--raft-peers: node id %q twice", id)
		}
		seen[id] = true
		peers = append(peers, Peer{ID: id, RaftAddr: addr})
	}
	return peers, nil
}

// Options configures a controller voter. NewOptions gives the defaults.
type Options struct {
	// Listen is the request address (brokers, admin); port 0 picks one.
	Listen string
	// RaftListen is the Raft transport's address; port 0 picks one (then
	// bootstrap with RaftAddr, as tests do).
	RaftListen string
	// NodeID is this voter's Raft id.
	NodeID string
	// Peers are every voter, this one included; needed to bootstrap.
	Peers []Peer
	// Bootstrap makes a voter with no Raft state start the cluster with
	// Peers as voters. A voter with state ignores it.
	Bootstrap bool
	// DataDir holds the Raft log, stable store and snapshots.
	DataDir string

	// MasterLeaseTimeout is how long a master may stay silent before the
	// leader elects another; it is also the lease granted to a master.
	MasterLeaseTimeout time.Duration
	// CheckInterval is how often the leader looks for lapsed leases.
	CheckInterval time.Duration
	// ApplyTimeout bounds one Raft commit.
	ApplyTimeout time.Duration

	// Raft timings (hashicorp/raft's names). LeaderLeaseTimeout must not
	// exceed HeartbeatTimeout: the lease safety argument in
	// docs/controller.md rests on it.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// SnapshotThreshold is how many log entries trigger a snapshot.
	SnapshotThreshold uint64

	// MaxFrameSize bounds request frames; 0 is remoting's default.
	MaxFrameSize int

	// ClusterSecret authenticates cluster members to each other
	// (internal/member, docs/security.md): with it, every member request
	// must carry a valid member MAC. nil turns member authentication off,
	// which only loopback listeners or an explicit --insecure allow.
	ClusterSecret *member.Secret
	// ACLFile is a plain_acl.yml (RocketMQ ACL 1.0, docs/security.md); with
	// it every request must be signed, and heartbeats and elections need an
	// admin account. Empty turns the ACL off. It is re-read when it changes
	// (every ACLReloadInterval, 0 meaning 1 s).
	ACLFile           string
	ACLReloadInterval time.Duration
	// TLSMode serves TLS on Listen (the request port): disabled, permissive
	// or enforcing, with TLSCertFile and TLSKeyFile (PEM), as the brokers
	// and name servers do. The Raft port between voters stays plain TCP:
	// keep it on a network only the voters reach (docs/controller.md).
	TLSMode     remoting.TLSMode
	TLSCertFile string
	TLSKeyFile  string
	// Logger receives the controller's logs; nil discards them.
	Logger *slog.Logger
}

// NewOptions returns the defaults.
func NewOptions() Options {
	return Options{
		Listen:             "127.0.0.1:9880",
		RaftListen:         "127.0.0.1:9881",
		MasterLeaseTimeout: 1500 * time.Millisecond,
		CheckInterval:      100 * time.Millisecond,
		ApplyTimeout:       2 * time.Second,
		// 500 ms: a lost leader's IDC costs a Raft election of 0.5–1 s
		// before the new leader's lease wait, which keeps a new master
		// within 3 s (docs/controller.md); the tests run these timings
		// under -race on two loaded cores without flapping.
		HeartbeatTimeout:   500 * time.Millisecond,
		ElectionTimeout:    500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond,
		SnapshotThreshold:  1024,
	}
}

func (o *Options) validate() error {
	switch {
	case o.Listen == "":
		return errors.New("controller: --listen is empty")
	case o.RaftListen == "":
		return errors.New("controller: --raft-listen is empty")
	case o.NodeID == "":
		return errors.New("controller: --id is empty")
	case o.DataDir == "":
		return errors.New("controller: --data is empty (the Raft log must survive restarts)")
	case o.MasterLeaseTimeout <= 0:
		return errors.New("controller: --master-lease-timeout must be positive")
	case o.CheckInterval <= 0 || o.CheckInterval > o.MasterLeaseTimeout:
		return errors.New("controller: the check interval must be positive and below --master-lease-timeout")
	case o.ApplyTimeout <= 0:
		return errors.New("controller: the apply timeout must be positive")
	case o.HeartbeatTimeout <= 0 || o.ElectionTimeout <= 0 || o.LeaderLeaseTimeout <= 0:
		return errors.New("controller: Raft timeouts must be positive")
	case o.LeaderLeaseTimeout > o.HeartbeatTimeout:
		return errors.New("controller: the Raft leader lease must not exceed the Raft heartbeat timeout")
	}
	if o.Bootstrap {
		found := false
		for _, p := range o.Peers {
			found = found || p.ID == o.NodeID
		}
		if !found {
			return fmt.Errorf("controller: --bootstrap needs --raft-peers to name this node (%q)", o.NodeID)
		}
	}
	return nil
}
