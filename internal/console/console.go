// Package console is zonemq's read-only web console: the IDCs side by side
// with their address servers, name servers and brokers and their health;
// where each IDC's producers send and its consumers read right now; topics
// with their queues per broker; consumer groups with each queue's owner,
// its IDC and lag; and a timeline of what went down, came back and moved.
//
// It is a client application: everything it shows comes from the address
// servers' HTTP API and the public client's Admin (so it imports only
// client and protocol). A poll loop builds a Snapshot once per Interval;
// pages render the latest one with html/template, and a little plain
// JavaScript re-fetches the live part every two seconds. Assets are
// embedded; the page works offline.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Options configures a console.
type Options struct {
	// AddrsrvURLs are the address servers to watch, e.g.
	// "http://127.0.1.1:8080" (required; one per IDC shows every IDC's
	// view of its name servers).
	AddrsrvURLs []string
	// Listen is the HTTP "host:port" (port 0 picks one; Addr reports it).
	Listen string
	// Interval is how often the cluster is read (1 s).
	Interval time.Duration
	// RequestTimeout bounds each request to a server (1 s).
	RequestTimeout time.Duration
	// Logger receives the console's log lines; nil discards them.
	Logger *slog.Logger

	// Admin enables the admin page (/admin): create a topic, reset a
	// group's offsets. Off (the default), the console changes nothing.
	Admin bool
	// AccessKey and SecretKey sign every request the console makes, as
	// the CLI's --access-key/--secret-key do: needed to read a cluster with
	// ACL on, and an account with admin: true for the admin actions.
	AccessKey, SecretKey string
}

// Server is a running console. Its methods are safe for concurrent use.
type Server struct {
	opts     Options
	logger   *slog.Logger
	listener net.Listener
	http     *http.Server
	admin    *admin.Client
	poller   *poller
	tmpl     *template.Template
	// adminToken is put in every admin form and required back (CSRF).
	adminToken string

	mu   sync.Mutex
	snap Snapshot
	seq  int // polls completed

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// New validates opts, binds the listener and prepares the admin client. It
// does not poll or serve until Run.
func New(opts Options) (*Server, error) {
	if len(opts.AddrsrvURLs) == 0 {
		return nil, errors.New("console: --addrsrv: at least one address server URL is required")
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = time.Second
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("role", "console")
	tmpl, err := template.New("").Funcs(funcs).ParseFS(assets, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	admin, err := admin.New(admin.Config{ClientConfig: client.ClientConfig{
		AddrsrvURLs: opts.AddrsrvURLs, RequestTimeout: opts.RequestTimeout, Logger: logger,
		AccessKey: opts.AccessKey, SecretKey: opts.SecretKey,
	}})
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	token, err := newAdminToken()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("console: --listen %s: %w", opts.Listen, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{opts: opts, logger: logger, listener: ln, admin: admin, tmpl: tmpl, adminToken: token,
		poller: newPoller(opts, admin), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	s.snap = Snapshot{At: time.Now(), Addrsrvs: opts.AddrsrvURLs}
	s.http = &http.Server{Handler: s.routes(), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	return s, nil
}

// Addr is the bound HTTP address, "ip:port".
func (s *Server) Addr() string { return s.listener.Addr().String() }

// URL is the console's base URL.
func (s *Server) URL() string { return "http://" + s.Addr() + "/" }

// Run polls and serves until ctx ends or Shutdown is called.
func (s *Server) Run(ctx context.Context) error {
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.http.Serve(s.listener) }()
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		s.pollLoop()
	}()
	s.logger.Info("console serving", "url", s.URL(), "addrsrvs", s.opts.AddrsrvURLs)
	var err error
	select {
	case <-ctx.Done():
	case <-s.ctx.Done():
	case err = <-serveErr:
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
	}
	s.Shutdown()
	<-pollDone
	return err
}

// pollLoop starts the admin client (retrying until an address server
// answers) and then reads the cluster every Interval.
func (s *Server) pollLoop() {
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	started := false
	for {
		if !started {
			sctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
			err := s.admin.Start(sctx)
			cancel()
			if err == nil {
				started = true
			} else {
				s.setProblem("no name server reachable yet: " + err.Error())
			}
		}
		if started {
			pctx, cancel := context.WithTimeout(s.ctx, 10*s.opts.RequestTimeout)
			snap := s.poller.poll(pctx)
			cancel()
			s.mu.Lock()
			s.snap = snap
			s.seq++
			s.mu.Unlock()
		}
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) setProblem(p string) {
	s.mu.Lock()
	s.snap.At = time.Now()
	s.snap.Problems = []string{p}
	s.mu.Unlock()
}

// Snapshot returns the latest snapshot and how many polls have completed.
func (s *Server) Snapshot() (Snapshot, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap, s.seq
}

// Shutdown stops serving and polling. It is idempotent.
func (s *Server) Shutdown() {
	s.once.Do(func() {
		s.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s.http.Shutdown(ctx)
		cancel()
		s.listener.Close()
		s.admin.Shutdown(context.Background())
		close(s.done)
	})
	<-s.done
}

// routes is the console's HTTP surface: GETs that change nothing, and with
// Options.Admin the admin page and its POSTed actions (admin.go).
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.handlePage)
	mux.HandleFunc("GET /live", s.handleLive)
	mux.HandleFunc("GET /api/snapshot", s.handleSnapshot)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	if s.opts.Admin {
		s.adminRoutes(mux)
	}
	return mux
}
