package client

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAddrsrvSilenceLoggedOnceThenReminded: while every address server is
// down (a whole IDC's outage), a refresh every few seconds must not log a
// warning each time: once, then a reminder a minute later, and a line when
// one answers again.
func TestAddrsrvSilenceLoggedOnceThenReminded(t *testing.T) {
	up := true
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !up {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`[{"addr":"127.0.1.1:9876","idc":"idc1","alive":true}]`))
	}))
	defer srv.Close()
	logs := &lockedBuffer{}
	c, err := newCore(ClientConfig{AddrsrvURLs: []string{srv.URL}, Logger: slog.New(slog.NewTextHandler(logs, nil))}, "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.ns.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	up = false
	mu.Unlock()
	for range 5 {
		if err := c.ns.refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "no address server answered"); n != 1 {
		t.Fatalf("%d warnings for one outage, want 1:\n%s", n, logs.String())
	}
	// A minute on, one reminder.
	c.ns.mu.Lock()
	c.ns.reminded = c.ns.reminded.Add(-addrsrvReminder)
	c.ns.mu.Unlock()
	c.ns.refresh(ctx)
	c.ns.refresh(ctx)
	if n := strings.Count(logs.String(), "still no address server answers"); n != 1 {
		t.Fatalf("%d reminders, want 1:\n%s", n, logs.String())
	}
	mu.Lock()
	up = true
	mu.Unlock()
	c.ns.refresh(ctx)
	if !strings.Contains(logs.String(), "an address server answers again") {
		t.Fatalf("no recovery line:\n%s", logs.String())
	}
}

// TestAddrsrvPointedAtNameServer: an --addrsrv URL naming a remoting port
// (which drops an HTTP request) gets an error that names the swap.
func TestAddrsrvPointedAtNameServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			// As a name server does: read the "frame", find it absurd, close.
			conn.SetReadDeadline(time.Now().Add(time.Second))
			conn.Read(make([]byte, 4))
			conn.Close()
		}
	}()
	c, err := newCore(ClientConfig{AddrsrvURLs: []string{"http://" + ln.Addr().String()}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ns.fetch(context.Background(), "http://"+ln.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "is it a name server? --addrsrv wants an address server's http://host:port") {
		t.Fatalf("got %v", err)
	}
}
