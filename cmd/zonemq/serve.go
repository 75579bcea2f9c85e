package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// shutdownLimit is how long a server may take to stop after SIGINT/SIGTERM
// (docs/architecture.md §6: within 10 s, exit 0).
const shutdownLimit = 10 * time.Second

// serverRole is what a server package builds: it serves until ctx ends.
type serverRole interface {
	Run(ctx context.Context) error
}

// serveRole is what every server command (namesrv, broker, addrsrv) does
// once its flags are parsed: make the logger for --log-level, build the
// server (a configuration mistake, one matching invalid, is a usage error:
// exit status 2), announce it, and run it until a signal. Each server bounds
// its own shutdown; the guard here keeps the 10 s promise even if one does
// not.
func serveRole[S serverRole](ctx context.Context, stderr io.Writer, level string, invalid error,
	build func(*slog.Logger) (S, error), announce func(S)) error {
	logger, err := newLogger(stderr, level)
	if err != nil {
		return err
	}
	s, err := build(logger)
	if err != nil {
		if errors.Is(err, invalid) {
			return usagef("%v", err)
		}
		return err
	}
	if announce != nil {
		announce(s)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-done:
		return err
	case <-time.After(shutdownLimit):
		return fmt.Errorf("shutdown did not finish within %v", shutdownLimit)
	}
}
