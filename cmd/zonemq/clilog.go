package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// cliHandler writes the SDK's log records for a person at a terminal: one
// short line per record, `zonemq send: warning: <message> (key=value, …)`,
// without the time and without the attributes every line of the command
// would repeat (its role, kind, IDC and client id), so a log line neither
// wraps over several terminal lines nor buries the send and receive lines
// around it.
type cliHandler struct {
	w      io.Writer
	mu     *sync.Mutex // one record is one write
	level  slog.Leveler
	prefix string
	attrs  []slog.Attr
}

// cliRepeated are the attributes the SDK adds to every record of a client.
var cliRepeated = map[string]bool{"role": true, "kind": true, "idc": true, "client": true}

func newCLILogger(w io.Writer, prefix string, level slog.Leveler) *slog.Logger {
	return slog.New(&cliHandler{w: w, mu: &sync.Mutex{}, level: level, prefix: prefix})
}

func (h *cliHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *cliHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(h.prefix)
	b.WriteString(": ")
	b.WriteString(strings.ToLower(r.Level.String()))
	b.WriteString(": ")
	b.WriteString(oneLine(r.Message))
	var kv []string
	add := func(a slog.Attr) {
		if !cliRepeated[a.Key] && a.Key != "" {
			kv = append(kv, a.Key+"="+oneLine(fmt.Sprint(a.Value.Resolve().Any())))
		}
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(func(a slog.Attr) bool { add(a); return true })
	if len(kv) > 0 {
		b.WriteString(" (" + strings.Join(kv, ", ") + ")")
	}
	b.WriteString("\n")
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *cliHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &c
}

// WithGroup flattens groups: a one-line message has no room for them.
func (h *cliHandler) WithGroup(string) slog.Handler { return h }
