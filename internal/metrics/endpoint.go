// Package metrics serves a role's Prometheus metrics over HTTP: every
// server role (broker, namesrv, addrsrv) has a --metrics-listen address
// whose /metrics this package serves. The metrics themselves are defined
// beside the code they measure, in each role's metrics.go; docs/metrics.md
// lists them all.
package metrics

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Endpoint is a bound HTTP listener serving /metrics. Close stops it.
type Endpoint struct {
	listener net.Listener
	server   *http.Server
	done     chan struct{}
}

// Listen binds addr and serves the collectors register adds to a fresh
// registry (which also holds the Go runtime and process collectors) at
// /metrics, plus a plain-text pointer at /. register is the role's
// RegisterMetrics.
func Listen(addr string, logger *slog.Logger, register func(prometheus.Registerer) error) (*Endpoint, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := register(reg); err != nil {
		return nil, fmt.Errorf("registering metrics: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "zonemq metrics: GET /metrics (Prometheus text format)")
	})
	e := &Endpoint{
		listener: LimitListener(ln, MaxScrapeConns),
		server: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second, MaxHeaderBytes: 16 << 10},
		done: make(chan struct{}),
	}
	go func() {
		defer close(e.done)
		if err := e.server.Serve(e.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics endpoint stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	logger.Info("serving metrics", "addr", ln.Addr().String())
	return e, nil
}

// MaxScrapeConns caps the open connections of a /metrics endpoint: a few
// scrapers need a few; more are closed at once (see LimitListener), and an
// idle one is closed after 30 s.
const MaxScrapeConns = 64

// Addr is the bound address ("ip:port"), or "" for a nil Endpoint.
func (e *Endpoint) Addr() string {
	if e == nil {
		return ""
	}
	return e.listener.Addr().String()
}

// Close stops serving and waits for the serve goroutine. It is safe on a nil
// Endpoint and idempotent.
func (e *Endpoint) Close() {
	if e == nil {
		return
	}
	e.server.Close()
	<-e.done
}
