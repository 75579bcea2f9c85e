package metrics

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestEndpointCapsIdleConnections: idle keep-alive connections beyond
// MaxScrapeConns are closed at once instead of held (issue 22: 1,009 idle
// connections to /metrics used up a broker's descriptors); once they go, a
// scrape works.
func TestEndpointCapsIdleConnections(t *testing.T) {
	e, err := Listen("127.0.0.1:0", slog.New(slog.DiscardHandler), func(prometheus.Registerer) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range MaxScrapeConns {
		c, err := net.Dial("tcp", e.Addr())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	l := e.listener.(*Limited)
	deadline := time.Now().Add(5 * time.Second)
	for l.Open() < MaxScrapeConns && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if l.Open() != MaxScrapeConns {
		t.Fatalf("%d connections open, want %d", l.Open(), MaxScrapeConns)
	}
	for i := range 5 {
		c, err := net.Dial("tcp", e.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		c.Close()
		var ne net.Error
		if err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection %d over the cap was held open (%v)", i, err)
		}
	}
	if l.Refused() != 5 {
		t.Fatalf("%d refused, want 5", l.Refused())
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	var resp *http.Response
	for time.Now().Before(deadline.Add(5 * time.Second)) {
		if resp, err = http.Get("http://" + e.Addr() + "/metrics"); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("a scrape after the idle connections left: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: %s", resp.Status)
	}
}
