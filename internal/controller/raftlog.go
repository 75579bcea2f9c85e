package controller

import (
	"bytes"
	"context"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// newRaftLogger gives hashicorp/raft (which logs through hclog) a logger
// that writes into ours: each line it renders becomes one slog record at
// the level hclog put in it.
func newRaftLogger(logger *slog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:        "raft",
		Level:       hclog.Info,
		Output:      &slogWriter{logger: logger.With("component", "raft")},
		DisableTime: true,
	})
}

// slogWriter turns hclog's rendered lines into slog records.
type slogWriter struct{ logger *slog.Logger }

// Write implements io.Writer; hclog writes one line per call.
func (w *slogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(bytes.TrimRight(p, "\n")))
	level := slog.LevelInfo
	switch {
	case strings.HasPrefix(line, "[ERROR]"):
		level = slog.LevelError
	case strings.HasPrefix(line, "[WARN]"):
		level = slog.LevelWarn
	case strings.HasPrefix(line, "[DEBUG]"), strings.HasPrefix(line, "[TRACE]"):
		level = slog.LevelDebug
	}
	w.logger.Log(context.Background(), level, line)
	return len(p), nil
}
