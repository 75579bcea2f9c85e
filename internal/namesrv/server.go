package namesrv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/metrics"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Server is a name server. Create it with New, serve with Run, stop with
// Shutdown or by cancelling Run's context. Its methods are safe for
// concurrent use.
type Server struct {
	opts   Options
	logger *slog.Logger
	now    func() time.Time
	rs     *remoting.Server

	routes *routeTable
	// claimLogged rate-limits the log of refused slot claims (key → time).
	claimLogged sync.Map
	kv          *kvStore
	clients     *clientRegistry
	acl         *acl.Checker      // nil: ACL off
	metrics     *namesrvMetrics   // metrics.go
	metricsEP   *metrics.Endpoint // --metrics-listen; nil when unset
	elected     *electedChecks    // elected.go; nil without ControllerAddrs

	lifeMu  sync.Mutex // guards started and stopped
	started bool
	stopped bool
	stop    chan struct{} // closed by Shutdown
	wg      sync.WaitGroup

	// connsClosed counts connection closes fully processed and scans the
	// expiry passes run (tests wait on them to know an event was handled).
	connsClosed atomic.Int64
	scans       atomic.Int64
}

// New validates opts, loads the KV config and binds the listener, so Addr
// is the real address as soon as New returns. It does not serve yet.
func New(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("role", "namesrv", "idc", opts.IDC)
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	kv, err := openKVStore(opts.KVConfigPath)
	if err != nil {
		return nil, err
	}
	var checker *acl.Checker
	if opts.ACLFile != "" {
		if checker, err = acl.Load(opts.ACLFile, logger); err != nil {
			return nil, fmt.Errorf("namesrv: --acl-file: %w", err)
		}
	}
	var serverTLS remoting.ServerTLS
	if opts.TLSMode != remoting.TLSDisabled {
		certs, err := remoting.NewCertReloader(opts.TLSCertFile, opts.TLSKeyFile, logger)
		if err != nil {
			return nil, fmt.Errorf("namesrv: --tls-cert/--tls-key: %w", err)
		}
		serverTLS = remoting.ServerTLS{Mode: opts.TLSMode, Config: certs.ServerConfig()}
	}
	rs, err := remoting.NewServer(remoting.ServerOptions{
		TLS:          serverTLS,
		Listen:       opts.Listen,
		MaxFrameSize: opts.MaxFrameSize,
		Logger:       logger,
	})
	if err != nil {
		return nil, fmt.Errorf("namesrv: --listen %s: %w", opts.Listen, err)
	}
	s := &Server{
		opts:    opts,
		logger:  logger,
		now:     now,
		rs:      rs,
		routes:  newRouteTable(opts.BrokerExpiry, opts.MaxTopicEntries, claimHold(opts.ClaimHold)),
		kv:      kv,
		clients: newClientRegistry(),
		acl:     checker,
		metrics: newNamesrvMetrics(opts.IDC),
		stop:    make(chan struct{}),
	}
	s.elected = newElectedChecks(opts.ControllerAddrs, s)
	rs.OnConnect(func(c *remoting.Conn) { c.OnClose(s.connClosed) })
	s.registerHandlers()
	if s.metricsEP, err = s.listenMetrics(); err != nil {
		s.elected.close()
		rs.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) registerHandlers() {
	handlers := map[protocol.RequestCode]remoting.Handler{
		protocol.RegisterBroker:                s.handleRegisterBroker,
		protocol.UnregisterBroker:              s.handleUnregisterBroker,
		protocol.BrokerHeartbeat:               s.handleBrokerHeartbeat,
		protocol.QueryDataVersion:              s.handleQueryDataVersion,
		protocol.RegisterTopicInNamesrv:        s.handleRegisterTopicInNamesrv,
		protocol.GetRouteInfoByTopic:           s.handleGetRouteInfoByTopic,
		protocol.GetBrokerClusterInfo:          s.handleGetBrokerClusterInfo,
		protocol.GetAllTopicListFromNameServer: s.handleGetAllTopicListFromNameServer,
		protocol.DeleteTopicInNamesrv:          s.handleDeleteTopicInNamesrv,
		protocol.GetTopicsByCluster:            s.handleGetTopicsByCluster,
		protocol.PutKVConfig:                   s.handlePutKVConfig,
		protocol.GetKVConfig:                   s.handleGetKVConfig,
		protocol.DeleteKVConfig:                s.handleDeleteKVConfig,
		protocol.GetKVListByNamespace:          s.handleGetKVListByNamespace,
		protocol.ClientHeartbeatToNamesrv:      s.handleClientHeartbeatToNamesrv,
		protocol.GetClientsByIDC:               s.handleGetClientsByIDC,
	}
	for code, h := range handlers {
		s.rs.Handle(int32(code), s.checked(code, h))
	}
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.rs.Addr() }

// IDC is the IDC the server was configured with.
func (s *Server) IDC() string { return s.opts.IDC }

// Run serves until ctx ends or Shutdown is called, then shuts down and
// returns nil; it returns an error only if the listener fails. It may be
// called once.
func (s *Server) Run(ctx context.Context) error {
	s.lifeMu.Lock()
	if s.stopped {
		s.lifeMu.Unlock()
		return nil
	}
	if s.started {
		s.lifeMu.Unlock()
		return errors.New("namesrv: Run called twice")
	}
	s.started = true
	serveErr := make(chan error, 1)
	s.wg.Add(2)
	s.lifeMu.Unlock()

	go func() {
		defer s.wg.Done()
		serveErr <- s.rs.Serve()
	}()
	go func() {
		defer s.wg.Done()
		s.scanLoop()
	}()
	if s.acl != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.acl.WatchUntil(s.stop, s.opts.ACLReloadInterval)
		}()
	}
	s.logger.Info("name server serving", "addr", s.Addr(), "brokerExpiry", s.opts.BrokerExpiry,
		"scanInterval", s.opts.ScanInterval, "clientExpiry", s.opts.ClientExpiry,
		"kvConfig", s.opts.KVConfigPath, "kvEntries", s.kv.count())
	if s.opts.KVConfigPath == "" {
		s.logger.Warn("KV config is kept in memory only (no --kv-config path)")
	}

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

// Shutdown stops accepting, closes every connection, waits for in-flight
// requests and the scan loop, and returns. It is idempotent and safe to call
// from any goroutine, before or during Run. The KV config needs no flush:
// every change was written when it was made.
func (s *Server) Shutdown() {
	s.lifeMu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.stop)
		// Closing every connection fires the close hooks; they see s.stop
		// closed and leave the tables alone (nothing is leaving, we are).
		s.rs.Close()
		s.metricsEP.Close()
		s.logger.Info("name server stopped")
	}
	s.lifeMu.Unlock()
	s.wg.Wait()
	s.elected.close()
}

func (s *Server) stopping() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// scanLoop expires silent brokers and clients every ScanInterval.
func (s *Server) scanLoop() {
	t := time.NewTicker(s.opts.ScanInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.scan()
		}
	}
}

// scan runs one expiry pass.
func (s *Server) scan() {
	defer s.scans.Add(1)
	now := s.now()
	for _, rm := range s.routes.expire(now) {
		s.logRemoval(rm)
	}
	for _, c := range s.clients.expire(now, s.opts.ClientExpiry) {
		s.logger.Info("client removed", "clientId", c.ClientID, "clientIdc", c.IDC, "role", c.Role,
			"peer", c.Addr, "reason", fmt.Sprintf("no heartbeat for %v", s.opts.ClientExpiry))
	}
}

// connClosed removes the brokers and clients whose latest registration or
// heartbeat came over c.
func (s *Server) connClosed(c *remoting.Conn) {
	defer s.connsClosed.Add(1)
	if s.stopping() {
		return
	}
	for _, rm := range s.routes.connClosedRemove(c) {
		s.logRemoval(rm)
	}
	for _, ci := range s.clients.connClosedRemove(c) {
		s.logger.Info("client removed", "clientId", ci.ClientID, "clientIdc", ci.IDC, "role", ci.Role,
			"peer", ci.Addr, "reason", "connection closed")
	}
}

func (s *Server) logRemoval(rm removal) {
	s.metrics.removed(rm)
	s.logger.Info("broker removed", "brokerName", rm.brokerName, "brokerAddr", rm.brokerAddr,
		"brokerId", rm.brokerID, "cluster", rm.clusterName, "zone", rm.zoneName,
		"lastAddrOfBroker", rm.brokerRemoved, "reason", rm.reason)
}

// claimHold is Options.ClaimHold with its default applied (negative: off).
func claimHold(d time.Duration) time.Duration {
	if d == 0 {
		return DefaultClaimHold
	}
	return d
}
