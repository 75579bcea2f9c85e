// Package addrsrv is zonemq's address server: it knows every IDC's name
// servers, probes each one with a real remoting request, and answers HTTP
// clients with the name servers that are alive now, its own IDC's first.
//
// The list it serves is the format stock RocketMQ clients read from their
// "TopAddressing" / HTTP name-server resolver (GET /rocketmq/nsaddr →
// "host:port;host:port"), so Java and Go clients can use it unmodified;
// zonemq brokers and clients read it the same way. Address servers share
// nothing: run several per IDC behind one name or list them all.
package addrsrv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/idc"
	"github.com/zonemq/zonemq/internal/metrics"
	"github.com/zonemq/zonemq/internal/remoting"
)

// shutdownGrace bounds how long Shutdown waits for HTTP requests in flight.
const shutdownGrace = 5 * time.Second

// Server is one address server. Create it with New, serve with Run, stop with
// Shutdown or by cancelling Run's context. Its methods are safe for
// concurrent use.
type Server struct {
	opts         Options
	probeTimeout time.Duration
	logger       *slog.Logger
	listener     net.Listener
	httpServer   *http.Server
	client       *remoting.Client
	metrics      *addrsrvMetrics   // metrics.go
	metricsEP    *metrics.Endpoint // --metrics-listen; nil when unset

	// ctx ends the probe loops; cancel runs in Shutdown.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	states   []*namesrvState // in configured order; the slice never changes, the fields under mu do
	running  bool
	shutdown bool
	stopping chan struct{} // closed when Shutdown starts; Run returns
	done     chan struct{} // closed when Shutdown has finished

	wg sync.WaitGroup
}

// New validates opts, binds the HTTP listener (so Addr reports the real
// address) and returns a server that is not yet probing or serving.
func New(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("addrsrv: %w", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("role", "addrsrv", "idc", opts.IDC)

	var tlsConfig *tls.Config
	if opts.TLSMode != remoting.TLSDisabled {
		if opts.TLSCertFile == "" || opts.TLSKeyFile == "" {
			return nil, fmt.Errorf("%w: --tls-mode %s needs --tls-cert and --tls-key", ErrInvalidOptions, opts.TLSMode)
		}
		certs, err := remoting.NewCertReloader(opts.TLSCertFile, opts.TLSKeyFile, logger)
		if err != nil {
			return nil, fmt.Errorf("addrsrv: --tls-cert/--tls-key: %w", err)
		}
		tlsConfig = certs.ServerConfig()
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("addrsrv: listen --listen %s: %w", opts.Listen, err)
	}
	// The remoting sniffer works for HTTP too: a plain request starts with
	// a method name, never with a TLS handshake byte.
	ln = remoting.TLSListener(ln, tlsConfig, opts.TLSMode)
	// Clients re-read the list every 5 s, some over keep-alive: cap the
	// open connections inside the descriptor budget (an idle one closes
	// after IdleTimeout below), so idle ones cannot exhaust it.
	ln = metrics.LimitListener(ln, MaxHTTPConns)
	timeout := opts.probeTimeout()
	var probeDial func(ctx context.Context, network, addr string) (net.Conn, error)
	if opts.ProbeTLS != nil {
		probeDial = remoting.TLSDialer(opts.ProbeTLS, nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts:         opts,
		probeTimeout: timeout,
		logger:       logger,
		listener:     ln,
		client: remoting.NewClient(remoting.ClientOptions{
			// A probe's whole budget: a dial that hangs (SYNs dropped) is a
			// failed probe like a request that gets no answer.
			DialTimeout:  timeout,
			WriteTimeout: timeout,
			Logger:       logger,
			Dial:         probeDial,
		}),
		ctx:      ctx,
		cancel:   cancel,
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
	s.opts.Namesrvs = append([]Namesrv(nil), opts.Namesrvs...)
	ownSeen := false
	for _, ns := range s.opts.Namesrvs {
		s.states = append(s.states, &namesrvState{Namesrv: ns, wake: make(chan struct{}, 1)})
		ownSeen = ownSeen || idc.Same(ns.IDC, opts.IDC)
	}
	s.metrics = newAddrsrvMetrics(opts.IDC, s.states)
	if !ownSeen {
		logger.Warn("no name server of this address server's own IDC is configured; clients will be sent to other IDCs", "namesrv", FormatNamesrvs(s.opts.Namesrvs))
	}
	s.httpServer = &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if s.metricsEP, err = s.listenMetrics(); err != nil {
		ln.Close()
		return nil, err
	}
	return s, nil
}

// MaxHTTPConns caps the address server's open HTTP connections; one more is
// closed at once (metrics.LimitListener).
const MaxHTTPConns = 4096

// Addr is the HTTP address the server is bound to, "ip:port".
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Run probes every name server and serves HTTP until ctx ends or Shutdown is
// called; it then shuts down and returns nil (or the HTTP server's error if
// serving failed). Probing starts at once: the first probe of every name
// server goes out before Run waits for anything.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return errors.New("addrsrv: Run called twice")
	}
	if s.shutdown {
		s.mu.Unlock()
		return nil
	}
	s.running = true
	s.wg.Add(1 + len(s.states))
	if s.opts.PingInterval > 0 {
		s.wg.Add(len(s.states))
	}
	s.mu.Unlock()

	s.logger.Info("address server listening", "addr", s.Addr(), "namesrv", FormatNamesrvs(s.opts.Namesrvs),
		"probeInterval", s.opts.ProbeInterval, "probeTimeout", s.probeTimeout, "downAfter", s.opts.DownAfter,
		"pingInterval", s.opts.PingInterval, "silentAfter", s.opts.SilentAfter)
	serveErr := make(chan error, 1)
	go func() {
		defer s.wg.Done()
		if err := s.httpServer.Serve(s.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr <- fmt.Errorf("addrsrv: serve HTTP: %w", err)
		}
	}()
	for _, st := range s.states {
		go func() {
			defer s.wg.Done()
			s.probeLoop(s.ctx, st)
		}()
		if s.opts.PingInterval > 0 {
			go func() {
				defer s.wg.Done()
				s.pingLoop(s.ctx, st)
			}()
		}
	}

	var err error
	select {
	case <-ctx.Done():
	case <-s.stopping:
	case err = <-serveErr:
	}
	s.Shutdown()
	return err
}

// Shutdown stops serving HTTP (requests in flight get up to 5 s), stops the
// probes, closes their connections and waits for every goroutine. It is
// idempotent; concurrent callers all return once it has finished.
func (s *Server) Shutdown() {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.shutdown = true
	close(s.stopping)
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	if err := s.httpServer.Shutdown(ctx); err != nil {
		s.httpServer.Close()
	}
	cancel()
	s.listener.Close() // Serve may never have run
	s.cancel()
	s.client.Close()
	s.wg.Wait()
	s.metricsEP.Close()
	s.logger.Info("address server stopped")
	close(s.done)
}

// NamesrvStatus is what the address server knows of one name server.
type NamesrvStatus struct {
	// Addr and IDC are as configured.
	Addr string
	IDC  string
	// Alive is true while the name server answers probes, and also before its
	// first probe has completed (the state is unknown; clients may try it).
	Alive bool
	// LastProbe is when the last probe completed; zero before the first.
	LastProbe time.Time
	// LastError is why the last probe failed; "" if it succeeded.
	LastError string
}

// Namesrvs reports every configured name server, in configured order.
func (s *Server) Namesrvs() []NamesrvStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]NamesrvStatus, len(s.states))
	for i, st := range s.states {
		out[i] = NamesrvStatus{
			Addr:      st.Addr,
			IDC:       st.IDC,
			Alive:     st.listableLocked(),
			LastProbe: st.lastProbe,
			LastError: st.lastErr,
		}
	}
	return out
}

// List returns the addresses served at /rocketmq/nsaddr: the name servers
// alive now (or not yet probed), own IDC first, configured order within each
// part; when none is alive, every configured one in that order, so clients
// can still try.
func (s *Server) List() []string {
	s.mu.Lock()
	listed := make([]*namesrvState, 0, len(s.states))
	for _, st := range s.states {
		if st.listableLocked() {
			listed = append(listed, st)
		}
	}
	if len(listed) == 0 {
		listed = append(listed, s.states...)
	}
	s.mu.Unlock()
	listed = idc.OwnFirst(listed, func(st *namesrvState) string { return st.IDC }, s.opts.IDC)
	out := make([]string, len(listed))
	for i, st := range listed {
		out[i] = st.Addr
	}
	return out
}
