// Package controller is zonemq's failover controller: a few voters (one
// per IDC, or two IDCs and a witness) that keep, per broker group, the
// master's broker id, an epoch that only grows and the in-sync set, in a
// state machine replicated with Raft (hashicorp/raft, raft-boltdb). The
// leader takes broker heartbeats, grants leases to masters and elects an
// in-sync replica when a master's lease lapses. See docs/controller.md.
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Server is one controller voter. Create it with New, serve with Run, stop
// with Shutdown or by cancelling Run's context. Its methods are safe for
// concurrent use.
type Server struct {
	opts   Options
	logger *slog.Logger
	now    func() time.Time

	rs        *remoting.Server
	acl       *acl.Checker // nil: ACL off (security.go)
	raft      *raft.Raft
	transport *raft.NetworkTransport
	store     checkedStore
	guard     *voteGuard // a voter that lost its Raft state, until it votes again (raftdamage.go)
	fsm       *fsm
	notify    chan bool

	// leading is true once this voter is Raft leader and has applied
	// everything committed before (a barrier): only then does it answer
	// heartbeats and elect.
	leading atomic.Bool
	live    *liveness
	// decideMu serialises lease grants and elections (each from reading
	// the group to its commit), so a lease is never granted to a master
	// an election is replacing. Commits are milliseconds; a lost majority
	// holds it for at most ApplyTimeout.
	decideMu sync.Mutex

	lifeMu  sync.Mutex // guards started and stopped
	started bool
	stopped bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

// New validates opts, opens the Raft stores under DataDir, binds the
// request and Raft listeners and starts the Raft node (which may campaign
// at once). It does not serve requests until Run.
func New(opts Options) (_ *Server, err error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("role", "controller", "node", opts.NodeID)
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("controller: --data %s: %w", opts.DataDir, err)
	}
	s := &Server{opts: opts, logger: logger, now: time.Now, fsm: newFSM(), notify: make(chan bool, 16),
		stop: make(chan struct{})}
	s.live = newLiveness()
	defer func() {
		if err != nil {
			s.closeResources()
		}
	}()
	hlog := newRaftLogger(logger)
	// A damaged Raft state is moved aside and the voter starts empty
	// (raftdamage.go).
	var fresh bool
	if s.store, fresh, err = openRaftStore(opts.DataDir, logger); err != nil {
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(opts.DataDir, 3, hlog)
	if err != nil {
		return nil, fmt.Errorf("controller: opening snapshots in %s: %w", opts.DataDir, err)
	}
	if s.transport, err = newRaftTransport(opts, hlog); err != nil {
		return nil, fmt.Errorf("controller: --raft-listen %s: %w", opts.RaftListen, err)
	}
	var serverTLS remoting.ServerTLS
	if opts.TLSMode != remoting.TLSDisabled {
		certs, err := remoting.NewCertReloader(opts.TLSCertFile, opts.TLSKeyFile, logger)
		if err != nil {
			return nil, fmt.Errorf("controller: --tls-cert/--tls-key: %w", err)
		}
		serverTLS = remoting.ServerTLS{Mode: opts.TLSMode, Config: certs.ServerConfig()}
	}
	if opts.ACLFile != "" {
		if s.acl, err = acl.Load(opts.ACLFile, logger); err != nil {
			return nil, fmt.Errorf("controller: --acl-file: %w", err)
		}
	}
	s.rs, err = remoting.NewServer(remoting.ServerOptions{Listen: opts.Listen, MaxFrameSize: opts.MaxFrameSize, Logger: logger, TLS: serverTLS})
	if err != nil {
		return nil, fmt.Errorf("controller: --listen %s: %w", opts.Listen, err)
	}
	conf := raft.DefaultConfig()
	conf.LocalID = raft.ServerID(opts.NodeID)
	conf.HeartbeatTimeout = opts.HeartbeatTimeout
	conf.ElectionTimeout = opts.ElectionTimeout
	conf.LeaderLeaseTimeout = opts.LeaderLeaseTimeout
	conf.SnapshotThreshold = opts.SnapshotThreshold
	conf.NotifyCh = s.notify
	conf.Logger = hlog
	hasState, err := raft.HasExistingState(s.store, s.store, snaps)
	if err != nil {
		return nil, fmt.Errorf("controller: reading Raft state in %s: %w", opts.DataDir, err)
	}
	var trans raft.Transport = s.transport
	var guard *voteGuard
	if fresh || !hasState && !opts.Bootstrap {
		// It lost its state (damaged, or --data emptied): it must not
		// vote before it has caught up (raftdamage.go).
		guard = newVoteGuard(s.transport, conf.ElectionTimeout, logger)
		guard.damaged = fresh
		trans = guard
		s.guard = guard
	}
	s.raft, err = raft.NewRaft(conf, s.fsm, s.store, s.store, snaps, trans)
	if err != nil && !fresh && strings.Contains(err.Error(), "snapshot") {
		// Snapshots that do not restore are damage too: start empty.
		s.closeResources()
		s.rs, s.transport, s.store = nil, nil, checkedStore{} // closed: the deferred cleanup must not again
		if err := quarantineRaft(opts.DataDir, fmt.Errorf("%w: %v", errRaftDamaged, err), logger); err != nil {
			return nil, err
		}
		return New(opts)
	}
	if err != nil {
		return nil, fmt.Errorf("controller: starting Raft: %w", err)
	}
	if guard != nil {
		guard.applied = s.raft.LastIndex
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			guard.run(s.stop)
		}()
	}
	if opts.Bootstrap && !hasState && !fresh {
		if err := s.Bootstrap(opts.Peers); err != nil {
			return nil, err
		}
	}
	s.registerHandlers()
	return s, nil
}

// Bootstrap starts a new Raft cluster with peers as voters. Every voter
// of a new cluster may call it with the same peers; a voter that already
// has state refuses (raft.ErrCantBootstrap).
func (s *Server) Bootstrap(peers []Peer) error {
	var conf raft.Configuration
	for _, p := range peers {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID),
			Address: raft.ServerAddress(p.RaftAddr)})
	}
	if err := s.raft.BootstrapCluster(conf).Error(); err != nil {
		return fmt.Errorf("controller: bootstrapping %d voters: %w", len(peers), err)
	}
	if s.guard != nil && !s.guard.damaged {
		// A new cluster, bootstrapped after New: no state was lost.
		s.guard.caught.Store(true)
	}
	s.logger.Info("Raft cluster bootstrapped", "voters", len(peers))
	return nil
}

func (s *Server) registerHandlers() {
	s.rs.Handle(int32(protocol.ControllerBrokerHeartbeat), s.checked(protocol.ControllerBrokerHeartbeat, s.handleBrokerHeartbeat))
	s.rs.Handle(int32(protocol.ControllerGetStatus), s.checked(protocol.ControllerGetStatus, s.handleGetStatus))
	s.rs.Handle(int32(protocol.ControllerElect), s.checked(protocol.ControllerElect, s.handleElect))
}

// Addr is the request address.
func (s *Server) Addr() string { return s.rs.Addr() }

// RaftAddr is the Raft transport's address.
func (s *Server) RaftAddr() string { return string(s.transport.LocalAddr()) }

// NodeID is this voter's Raft id.
func (s *Server) NodeID() string { return s.opts.NodeID }

// IsLeader reports whether this voter leads and answers heartbeats.
func (s *Server) IsLeader() bool { return s.leading.Load() && s.raft.State() == raft.Leader }

// Run serves until ctx ends or Shutdown is called, then shuts down. It
// returns an error only if the listener fails. It may be called once.
func (s *Server) Run(ctx context.Context) error {
	s.lifeMu.Lock()
	if s.stopped {
		s.lifeMu.Unlock()
		return nil
	}
	if s.started {
		s.lifeMu.Unlock()
		return errors.New("controller: Run called twice")
	}
	s.started = true
	serveErr := make(chan error, 1)
	s.wg.Add(3)
	if s.acl != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.acl.WatchUntil(s.stop, s.opts.ACLReloadInterval)
		}()
	}
	s.lifeMu.Unlock()

	go func() {
		defer s.wg.Done()
		serveErr <- s.rs.Serve()
	}()
	go func() {
		defer s.wg.Done()
		s.leadershipLoop()
	}()
	go func() {
		defer s.wg.Done()
		s.leaseCheckLoop()
	}()
	s.logger.Info("controller serving", "addr", s.Addr(), "raftAddr", s.RaftAddr(),
		"masterLeaseTimeout", s.opts.MasterLeaseTimeout, "data", s.opts.DataDir)

	var err error
	select {
	case <-ctx.Done():
	case <-s.stop:
	case err = <-serveErr:
		if err != nil {
			s.logger.Error("listener failed; shutting down", "err", err)
		}
	}
	s.Shutdown()
	return err
}

// Shutdown stops serving requests, stops the Raft node (the log is on
// disk after every commit) and closes the stores. It is idempotent.
func (s *Server) Shutdown() {
	s.lifeMu.Lock()
	first := !s.stopped
	if first {
		s.stopped = true
		close(s.stop)
		s.rs.Close()
	}
	s.lifeMu.Unlock()
	s.wg.Wait()
	if first {
		s.closeResources()
		s.logger.Info("controller stopped")
	}
}

// closeResources stops Raft and closes what New opened, whatever exists.
func (s *Server) closeResources() {
	s.leading.Store(false)
	if s.rs != nil {
		s.rs.Close()
	}
	if s.raft != nil {
		if err := s.raft.Shutdown().Error(); err != nil {
			s.logger.Warn("Raft shutdown", "err", err)
		}
	}
	if s.transport != nil {
		s.transport.Close()
	}
	if s.store.BoltStore != nil {
		if err := s.store.Close(); err != nil {
			s.logger.Warn("closing the Raft log", "err", err)
		}
	}
}

// leadershipLoop follows Raft's leadership changes. On gaining it the
// voter first applies everything committed (a barrier), forgets any
// liveness it had and records its request address, and only then leads.
func (s *Server) leadershipLoop() {
	for {
		select {
		case <-s.stop:
			return
		case leader := <-s.notify:
			if !leader {
				if s.leading.Swap(false) {
					s.logger.Info("lost Raft leadership")
				}
				continue
			}
			if err := s.raft.Barrier(s.opts.ApplyTimeout).Error(); err != nil {
				s.logger.Warn("became Raft leader but the barrier failed", "err", err)
				continue
			}
			s.live.reset(s.now())
			if err := s.apply(command{Type: cmdAPIAddr, NodeID: s.opts.NodeID, Addr: s.Addr()}); err != nil {
				s.logger.Warn("recording the request address failed", "err", err)
			}
			s.leading.Store(true)
			s.logger.Info("Raft leader: answering heartbeats; no election before the lease timeout",
				"term", s.raft.Stats()["term"])
		}
	}
}

// leaseCheckLoop runs the election check every CheckInterval while
// leading.
func (s *Server) leaseCheckLoop() {
	t := time.NewTicker(s.opts.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if s.IsLeader() {
				s.checkLeases()
			}
		}
	}
}

// apply commits c through Raft (a majority of voters) and returns the
// FSM's answer.
func (s *Server) apply(c command) error {
	if c.At == 0 {
		c.At = s.now().UnixMilli()
	}
	data, err := json.Marshal(&c)
	if err != nil {
		return fmt.Errorf("encoding %s command: %w", c.Type, err)
	}
	f := s.raft.Apply(data, s.opts.ApplyTimeout)
	if err := f.Error(); err != nil {
		return fmt.Errorf("committing %s through Raft: %w", c.Type, err)
	}
	if err, ok := f.Response().(error); ok && err != nil {
		return err
	}
	return nil
}
