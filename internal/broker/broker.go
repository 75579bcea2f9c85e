// Package broker is zonemq's broker: it keeps messages on disk (through
// internal/store), serves RocketMQ producers and consumers over the remoting
// protocol so that stock clients work unmodified, keeps the registry of the
// clients connected to it, and registers itself with the name servers of
// every IDC.
//
// # Files
//
// One concept per file: send.go and batch.go (SEND_MESSAGE, _V2, _BATCH),
// pull.go and longpoll.go (PULL_MESSAGE and parked pulls), offset.go,
// topic.go and topic_config.go, subscription_group.go, client_registry.go and
// heartbeat.go, register.go and addrsrv.go (name servers), query.go,
// admin.go.
//
// # Seams for retry, dead-letter, delay, transactions and queue locks
//
// Those features live in files named lock*.go, schedule*.go, sendback*.go,
// dlq*.go and transaction*.go, plus extra_handlers.go, owned by another
// engineer. They plug in without editing the core files:
//
//   - s.registerExtraHandlers() (extra_handlers.go) runs at the end of New,
//     after the core handlers, the topic table and the store are ready; New
//     fails if it does. It keeps its services in s.extra, registers
//     CONSUMER_SEND_MSG_BACK, LOCK_BATCH_MQ, UNLOCK_BATCH_MQ,
//     END_TRANSACTION… with s.handle, sets the hook fields below, and
//     starts background work with s.addLoop / s.addCloser. Its settings
//     are Options fields (MessageDelayLevel, LockLease, Transaction…).
//   - s.putMessage(ctx, m) stores one fully routed message (the real topic,
//     SCHEDULE_TOPIC_XXXX, a %RETRY% or %DLQ% topic): the send path's last
//     step, with the store error already mapped for logging and counters.
//   - s.schedule is called by the send path for a message whose DELAY
//     property is ≥ 1. While it is nil such messages are stored at once.
//   - s.prepareTransaction is called for a transaction half message
//     (sysFlag PREPARED) with the connection it came on. While it is nil
//     those are refused with NO_PERMISSION, as a Java broker with
//     rejectTransactionMessage does.
//   - s.beforeRetryStore may rewrite a message sent straight to a %RETRY%
//     topic (the client's fallback when CONSUMER_SEND_MSG_BACK fails), e.g.
//     to its %DLQ% topic once reconsumeTimes passes the maximum.
//   - s.topics.createIfAbsent(cfg) creates a topic (%RETRY%/%DLQ%/schedule)
//     and s.topicsChanged() re-registers with every name server.
//   - s.registry answers who is in a consumer group (ConsumerIDs,
//     consumerChannels), for lock ownership checks.
//   - s.groups.getOrCreate(group) gives the group's retry settings.
//
// # Lifecycle
//
// New binds the listener (Addr is the real address), opens the store and
// loads topics and groups. Run serves and starts the registration, address
// server, client-expiry and notification loops. Shutdown is ordered:
// unregister from every name server, answer parked pulls, refuse new
// requests and finish the ones in flight, close connections, stop the
// loops, run the closers, close the store.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/metrics"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
	"github.com/zonemq/zonemq/internal/wallclock"
)

// DefaultRegion is the MSG_REGION every send answer carries (RocketMQ's
// default regionId).
const DefaultRegion = "DefaultRegion"

// drainTimeout bounds how long Shutdown waits for requests in flight.
const drainTimeout = 3 * time.Second

// Server is one broker. Its methods are safe for concurrent use.
type Server struct {
	opts      Options
	logger    *slog.Logger
	remoting  *remoting.Server
	store     *store.Store
	addr      string         // advertised "ip:port"
	instance  string         // this data directory's id (instance.go)
	storeHost netip.AddrPort // the same, stamped into every record

	topics   *topicTable
	groups   *subscriptionGroupTable
	pops     popTable // POP consumption state (pop.go)
	registry *clientRegistry
	pulls    *pullHolder
	namesrvs *registrar
	acl      *acl.Checker // nil: ACL off
	notifyCh chan string  // consumer groups whose membership changed
	gate     gate
	bootTime time.Time
	putCount atomic.Int64
	// reseeded: the store's damaged data was moved aside at start and the
	// group's log is being copied again (reseed.go): newReplication marks
	// the replication state, and it does not lead until caught up.
	reseeded bool
	// retriesAnswered counts retried sends answered with the copy an
	// earlier attempt stored (sendretry.go).
	retriesAnswered atomic.Int64
	pullCount       atomic.Int64
	metrics         *brokerMetrics    // metrics.go
	metricsEP       *metrics.Endpoint // --metrics-listen; nil when unset

	// repl is the broker's part in its group: role, epochs, replicas
	// (replication*.go). writesInFlight counts puts between the role check
	// and the store, so a switchover can wait them out.
	repl           *replication
	writesInFlight atomic.Int64
	// syncAcks answers sends after their fsync (--flush sync) and their
	// replicas' acknowledgement (--replication sync); nil without either
	// (syncacks.go).
	syncAcks *syncAcks

	// Seams filled by registerExtraHandlers (see the package comment).
	extra              extraServices
	schedule           func(ctx context.Context, m *protocol.MessageExt, delayLevel int) (store.PutResult, error)
	prepareTransaction func(ctx context.Context, c *remoting.Conn, m *protocol.MessageExt) (store.PutResult, error)
	beforeRetryStore   func(ctx context.Context, h *protocol.SendMessageRequestHeader, m *protocol.MessageExt) error
	loops              []func(ctx context.Context)
	closers            []func()

	ctx    context.Context // cancelled at Shutdown; loops watch it
	cancel context.CancelFunc
	wg     sync.WaitGroup // the loops started by Run

	mu       sync.Mutex
	running  bool
	stopping bool
	done     chan struct{} // closed when Shutdown has finished
	// lastVisible is the store's visible end parked pulls were last told
	// of (noteVisible).
	lastVisible atomic.Int64
}

// New validates opts, binds the listener, opens the store and loads the
// topic and subscription-group tables. It does not serve until Run.
func New(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("broker: %w: %w", ErrInvalidOptions, err)
	}
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: --data %s: %w", opts.DataDir, err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("role", "broker", "idc", opts.IDC, "broker", opts.BrokerName)

	var serverTLS remoting.ServerTLS
	if opts.TLSMode != remoting.TLSDisabled {
		certs, err := remoting.NewCertReloader(opts.TLSCertFile, opts.TLSKeyFile, logger)
		if err != nil {
			return nil, fmt.Errorf("broker: --tls-cert/--tls-key: %w", err)
		}
		serverTLS = remoting.ServerTLS{Mode: opts.TLSMode, Config: certs.ServerConfig()}
	}
	rs, err := remoting.NewServer(remoting.ServerOptions{
		TLS:    serverTLS,
		Listen: opts.Listen,
		// A frame holds at most one maximal message plus headers; batches
		// are bounded by the same limit, so 16 MiB is ample unless the
		// operator raises MaxMessageSize.
		MaxFrameSize:      max(remoting.DefaultMaxFrameSize, opts.MaxMessageSize+1<<20),
		MaxConns:          opts.Hardening.MaxConnections,
		MaxReceivingBytes: opts.Hardening.MaxReceivingBytes,
		Logger:            logger,
	})
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	addr, host, err := advertisedAddr(rs.Addr())
	if err != nil {
		rs.Close()
		return nil, fmt.Errorf("broker: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts:      opts,
		logger:    logger.With("addr", addr),
		remoting:  rs,
		addr:      addr,
		storeHost: host,
		registry:  newClientRegistry(),
		notifyCh:  make(chan string, 1024),
		bootTime:  time.Now(),
		ctx:       ctx,
		cancel:    cancel,
		done:      make(chan struct{}),
	}
	warnFDLimit(s.logger, opts.Hardening)
	s.pulls = newPullHolder(s)
	s.metrics = newBrokerMetrics(s)
	s.loops = append(s.loops, s.pulls.expiryLoop)

	sopts := store.NewOptions()
	sopts.Dir = opts.DataDir
	sopts.Clock = wallclock.Now
	sopts.SegmentSize = opts.SegmentSize
	sopts.Flush = opts.Flush
	sopts.FileReservedTime = opts.FileReservedTime
	sopts.DiskMaxUsedRatio = opts.DiskMaxUsedRatio
	sopts.MaxMessageSize = opts.MaxMessageSize
	sopts.StoreHost = host
	sopts.Logger = s.logger
	// Where the controller may elect another member, consumers read only
	// what the group confirmed (replication_confirm.go). A master with no
	// replica in sync confirms its own writes: without an fsync or a
	// replica's acknowledgement to wake the answering goroutine, the
	// arrival does.
	fenced := opts.Replication == ReplicationSync && len(opts.ControllerAddrs) > 0
	confirmOnArrival := fenced && opts.Flush != store.FlushSync
	sopts.OnArrive = func(topic string, queueID int32, maxOffset int64) {
		s.pulls.notify(topic, queueID, maxOffset)
		if s.repl != nil {
			s.repl.notifyData()
		}
		if confirmOnArrival && s.syncAcks != nil {
			s.syncAcks.signal()
		}
	}
	sopts.ObservePut, sopts.ObserveFlush = s.metrics.storeObservers()
	sopts.CommitLogSync = opts.commitLogSync
	if opts.Flush == store.FlushSync || opts.Replication == ReplicationSync {
		s.syncAcks = newSyncAcks(s)
		s.loops = append(s.loops, s.syncAcks.run)
		if opts.Flush == store.FlushSync {
			sopts.OnFlush = s.syncAcks.flushed
		}
	}
	sopts.Fenced = fenced
	sopts.RecoverDropCorrupt = opts.Hardening.RecoverDropCorrupt
	sopts.MaxOpenQueueFiles = opts.Hardening.MaxOpenQueueFiles
	st, reseeded, err := openStore(sopts, opts, s.logger)
	if err != nil {
		cancel()
		rs.Close()
		return nil, fmt.Errorf("broker: opening the store in %s: %w", opts.DataDir, err)
	}
	s.store, s.reseeded = st, reseeded
	// fail closes what New opened so far; nothing runs before Run.
	fail := func(err error) (*Server, error) {
		cancel()
		rs.Close()
		if s.namesrvs != nil {
			s.namesrvs.close()
		}
		if s.repl != nil && s.repl.client != nil {
			s.repl.client.Close()
			s.repl.ctrlClient.Close()
		}
		st.Close()
		return nil, fmt.Errorf("broker: %w", err)
	}
	if s.instance, err = loadInstance(st); err != nil {
		return fail(err)
	}
	if s.topics, err = loadTopicTable(st, s.logger, opts); err != nil {
		return fail(err)
	}
	if s.groups, err = loadSubscriptionGroupTable(st, s.logger); err != nil {
		return fail(err)
	}
	if s.repl, err = newReplication(s); err != nil {
		return fail(err)
	}
	// After the role is known: a replica's table legitimately lags its log.
	if err := s.checkStoredTopics(); err != nil {
		return fail(err)
	}
	replOpts := remoting.ClientOptions{DialTimeout: opts.NamesrvTimeout, Logger: s.logger}
	if opts.NamesrvTLS != nil {
		replOpts.Dial = remoting.TLSDialer(opts.NamesrvTLS, nil)
	}
	s.repl.client = remoting.NewClient(replOpts)
	// The controllers are reached like the name servers: over TLS when
	// the broker dials its name servers over TLS.
	ctrlOpts := remoting.ClientOptions{DialTimeout: opts.NamesrvTimeout, Logger: s.logger, Dial: opts.controllerDial}
	if opts.NamesrvTLS != nil {
		ctrlOpts.Dial = remoting.TLSDialer(opts.NamesrvTLS, opts.controllerDial)
	}
	s.repl.ctrlClient = remoting.NewClient(ctrlOpts)
	if opts.ACLFile != "" {
		if s.acl, err = acl.Load(opts.ACLFile, s.logger); err != nil {
			return fail(fmt.Errorf("--acl-file: %w", err))
		}
		s.loops = append(s.loops, func(ctx context.Context) { s.acl.WatchLoop(ctx, 0) })
	}
	s.namesrvs = newRegistrar(s)
	s.namesrvs.setAddrs(opts.NamesrvAddrs, nil)

	rs.OnConnect(func(c *remoting.Conn) {
		setPullGate(c)
		c.OnClose(s.connClosed)
	})
	s.registerHandlers()
	if err := s.registerExtraHandlers(); err != nil {
		return fail(err)
	}
	if err := s.listenMetrics(); err != nil {
		return fail(err)
	}
	return s, nil
}

// Addr is the broker's advertised address: the address it is bound to, with
// an unspecified host replaced by a reachable one.
func (s *Server) Addr() string { return s.addr }

// Run serves until ctx ends or Shutdown is called, then shuts down. It
// returns nil after a clean stop.
func (s *Server) Run(ctx context.Context) error {
	serveErr := make(chan error, 1)
	// Start everything under mu, so a concurrent Shutdown either finds it
	// all started or stops Run from starting anything.
	s.mu.Lock()
	if s.running || s.stopping {
		s.mu.Unlock()
		return errors.New("broker: Run called twice or after Shutdown")
	}
	s.running = true
	if err := s.repl.start(s.ctx); err != nil {
		s.mu.Unlock()
		s.Shutdown()
		return fmt.Errorf("broker: %w", err)
	}
	go func() { serveErr <- s.remoting.Serve() }()
	s.goLoop(s.notifyLoop)
	s.goLoop(s.expiryLoop)
	s.goLoop(s.repl.replicaLoop)
	s.goLoop(s.repl.metaLoop)
	s.goLoop(s.repl.isrLoop)
	if s.repl.controllerMode() {
		s.goLoop(s.repl.controllerLoop)
	}
	if len(s.opts.AddrsrvURLs) > 0 {
		s.goLoop(s.addrsrvLoop)
	}
	for _, fn := range s.loops {
		s.goLoop(fn)
	}
	s.namesrvs.start()
	s.mu.Unlock()
	s.logger.Info("broker serving", "cluster", s.opts.Cluster, "id", s.opts.BrokerID, "master", s.isMaster(),
		"replication", s.opts.Replication, "data", s.opts.DataDir,
		"namesrvs", s.opts.NamesrvAddrs, "addrsrvs", s.opts.AddrsrvURLs)

	var err error
	select {
	case <-ctx.Done():
	case <-s.done:
	case err = <-serveErr:
		if err != nil {
			s.logger.Error("accept loop failed; shutting down", "err", err)
		}
	}
	s.Shutdown()
	return err
}

// goLoop runs fn on a goroutine owned by the server until Shutdown.
func (s *Server) goLoop(fn func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn(s.ctx)
	}()
}

// addLoop registers fn to run on its own goroutine from Run until Shutdown
// (a seam for the schedule and transaction-check services). Call it from
// registerExtraHandlers.
func (s *Server) addLoop(fn func(ctx context.Context)) { s.loops = append(s.loops, fn) }

// addCloser registers fn to run at Shutdown after every request and loop has
// finished and before the store closes (a seam to persist state).
func (s *Server) addCloser(fn func()) { s.closers = append(s.closers, fn) }

// isStopping reports whether Shutdown has begun.
func (s *Server) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// Shutdown stops the broker in order: unregister from every name server,
// let the connected zonemq consumers commit (tellConsumersClosing), answer
// parked pulls, refuse new requests and let those in flight finish,
// close every connection, stop the loops, run the closers, close the store.
// It is idempotent and returns when everything has stopped.
func (s *Server) Shutdown() {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.stopping = true
	s.mu.Unlock()

	s.logger.Info("broker shutting down")
	// Name servers first, so clients stop routing here while the requests
	// already on their way are still served.
	s.namesrvs.stop()
	s.namesrvs.unregisterAll()
	s.tellConsumersClosing()
	select {
	case <-s.pulls.close():
	case <-time.After(time.Second):
		// A client that does not read its socket; closing the connections
		// below ends the write.
	}
	select {
	case <-s.gate.close():
	case <-time.After(drainTimeout):
		s.logger.Warn("requests still in flight after the drain timeout; closing connections", "timeout", drainTimeout)
	}
	s.remoting.Close()
	s.pulls.wait()
	s.cancel()
	s.wg.Wait()
	for _, fn := range s.closers {
		fn()
	}
	s.namesrvs.close()
	s.repl.client.Close()
	s.repl.ctrlClient.Close()
	if err := s.store.Close(); err != nil {
		s.logger.Error("closing the store", "err", err)
	}
	s.metricsEP.Close()
	s.logger.Info("broker stopped")
	close(s.done)
}

// connClosed forgets everything hanging on a closed connection: its parked
// pulls and its client registrations.
func (s *Server) connClosed(c *remoting.Conn) {
	s.pulls.dropConn(c)
	for _, g := range s.registry.removeConn(c) {
		s.consumerGroupChanged(g)
	}
}

// handle registers h for code behind the shutdown gate: once Shutdown has
// begun, new requests are refused with SERVICE_NOT_AVAILABLE (clients retry
// another broker) while those already running finish.
func (s *Server) handle(code protocol.RequestCode, h remoting.Handler) {
	if isSendCode(code) {
		h = s.metrics.instrumentSend(h)
	}
	s.remoting.Handle(int32(code), s.gated(h))
}

// gated wraps h behind the shutdown gate.
func (s *Server) gated(h remoting.Handler) remoting.Handler {
	return func(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
		if !s.gate.enter() {
			return errorf(req, protocol.ServiceNotAvailable, "broker %s is shutting down", s.opts.BrokerName)
		}
		defer s.gate.leave()
		if resp := s.checkACL(c, req); resp != nil {
			return resp
		}
		return h(ctx, c, req)
	}
}

// registerHandlers installs the core request handlers.
func (s *Server) registerHandlers() {
	s.registerSendHandlers()
	s.handle(protocol.PullMessage, s.handlePullMessage)
	s.handle(protocol.QueryConsumerOffset, s.handleQueryConsumerOffset)
	s.handle(protocol.UpdateConsumerOffset, s.handleUpdateConsumerOffset)
	s.handle(protocol.GetMaxOffset, s.handleGetMaxOffset)
	s.handle(protocol.GetMinOffset, s.handleGetMinOffset)
	s.handle(protocol.SearchOffsetByTimestamp, s.handleSearchOffsetByTimestamp)
	s.handle(protocol.GetEarliestMsgStoretime, s.handleGetEarliestMsgStoretime)
	s.handle(protocol.GetAllConsumerOffset, s.handleGetAllConsumerOffset)
	s.handle(protocol.InvokeBrokerToResetOffset, s.handleInvokeBrokerToResetOffset)
	s.handle(protocol.HeartBeat, s.handleHeartBeat)
	s.handle(protocol.UnregisterClient, s.handleUnregisterClient)
	s.handle(protocol.GetConsumerListByGroup, s.handleGetConsumerListByGroup)
	s.handle(protocol.GetConsumerConnectionList, s.handleGetConsumerConnectionList)
	s.handle(protocol.GetProducerConnectionList, s.handleGetProducerConnectionList)
	s.handle(protocol.GetBrokerConfig, s.handleGetBrokerConfig)
	s.handle(protocol.UpdateBrokerConfig, s.handleUpdateBrokerConfig)
	s.handle(protocol.UpdateAndCreateTopic, s.handleUpdateAndCreateTopic)
	s.handle(protocol.DeleteTopicInBroker, s.handleDeleteTopicInBroker)
	s.handle(protocol.GetAllTopicConfig, s.handleGetAllTopicConfig)
	s.handle(protocol.GetTopicStatsInfo, s.handleGetTopicStatsInfo)
	s.handle(protocol.GetAllSubscriptionGroupConfig, s.handleGetAllSubscriptionGroupConfig)
	s.handle(protocol.GetConsumeStats, s.handleGetConsumeStats)
	s.handle(protocol.QueryMessage, s.handleQueryMessage)
	s.handle(protocol.ViewMessageByID, s.handleViewMessageByID)
	s.handle(protocol.GetBrokerRuntimeInfo, s.handleGetBrokerRuntimeInfo)
	s.handle(protocol.GetTopicFlows, s.handleGetTopicFlows)
	s.handle(protocol.UpdateAndCreateSubscriptionGrp, s.handleUpdateAndCreateSubscriptionGroup)
	s.handle(protocol.PopMessages, s.handlePopMessages)
	s.handle(protocol.AckPopMessages, s.handleAckPopMessages)
	s.handle(protocol.ChangePopInvisibleTime, s.handleChangePopInvisibleTime)
	s.registerReplicationHandlers()
}

// advertisedAddr turns the bound address into the one clients dial: an
// unspecified host becomes the first non-loopback IPv4 address (or
// 127.0.0.1 when there is none).
func advertisedAddr(bound string) (string, netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(bound)
	if err != nil {
		return "", netip.AddrPort{}, fmt.Errorf("bound address %q: %w", bound, err)
	}
	if ap.Addr().IsUnspecified() {
		ip := netip.MustParseAddr("127.0.0.1")
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					if v, ok := netip.AddrFromSlice(n.IP); ok && v.Unmap().Is4() && !v.IsLoopback() {
						ip = v.Unmap()
						break
					}
				}
			}
		}
		ap = netip.AddrPortFrom(ip, ap.Port())
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	return ap.String(), ap, nil
}

// gate counts requests in flight and, once closed, refuses new ones.
type gate struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{}
}

func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n++
	return true
}

func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.n == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// close refuses new entries and returns a channel closed when none is left.
func (g *gate) close() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	ch := make(chan struct{})
	if g.n == 0 {
		close(ch)
	} else {
		g.idle = ch
	}
	return ch
}
