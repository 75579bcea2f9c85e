package addrsrv

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// newIdleServer returns a server that is never Run: its state is set by hand.
func newIdleServer(t *testing.T) *Server {
	t.Helper()
	o := NewOptions()
	o.Listen = "127.0.1.1:0"
	o.IDC = "idc2"
	o.Namesrvs = []Namesrv{
		{Addr: "127.0.1.1:9876", IDC: "idc1"},
		{Addr: "127.0.2.1:9876", IDC: "idc2"},
		{Addr: "127.0.1.2:9876", IDC: "idc1"},
		{Addr: "127.0.2.2:9876", IDC: "IDC2"},
	}
	s, err := New(o)
	testutil.NoError(t, err, "New")
	t.Cleanup(s.Shutdown)
	return s
}

func serve(s *Server, method, target string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	s.routes().ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

// setState records outcomes on the name server at index i as probes would.
func setState(s *Server, i int, errs ...error) {
	for _, err := range errs {
		s.record(s.states[i], err)
	}
}

func TestAddrsrvHTTPRoutes(t *testing.T) {
	s := newIdleServer(t)
	cases := []struct {
		method, target string
		code           int
	}{
		{"GET", "/rocketmq/nsaddr", 200},
		{"HEAD", "/rocketmq/nsaddr", 200},
		{"GET", "/rocketmq/nsaddr-unitA", 200},
		{"GET", "/rocketmq/nsaddr-unitA?nofix=1", 200},
		{"GET", "/rocketmq/nsaddr?x=y", 200},
		{"GET", "/v1/namesrvs", 200},
		{"GET", "/healthz", 200},
		{"GET", "/", 404},
		{"GET", "/rocketmq", 404},
		{"GET", "/rocketmq/", 404},
		{"GET", "/rocketmq/other", 404},
		{"GET", "/rocketmq/nsaddrx", 404},
		{"GET", "/rocketmq/nsaddr/x", 404},
		{"GET", "/v1/namesrvs/x", 404},
		{"GET", "/v1", 404},
		{"POST", "/rocketmq/nsaddr", 405},
		{"PUT", "/v1/namesrvs", 405},
		{"DELETE", "/healthz", 405},
	}
	for _, c := range cases {
		rec := serve(s, c.method, c.target)
		if rec.Code != c.code {
			t.Errorf("%s %s: status %d, want %d", c.method, c.target, rec.Code, c.code)
		}
		if c.code == 405 && !strings.Contains(rec.Header().Get("Allow"), "GET") {
			t.Errorf("%s %s: Allow header %q", c.method, c.target, rec.Header().Get("Allow"))
		}
	}
	rec := serve(s, "GET", "/healthz")
	testutil.Equal(t, rec.Body.String(), "ok", "healthz body")
}

func TestAddrsrvHTTPNsAddrBeforeFirstProbe(t *testing.T) {
	s := newIdleServer(t)
	// Unknown state lists everything, own IDC (case-insensitive) first.
	for _, target := range []string{"/rocketmq/nsaddr", "/rocketmq/nsaddr-u1?nofix=1"} {
		rec := serve(s, "GET", target)
		testutil.Equal(t, rec.Body.String(), "127.0.2.1:9876;127.0.2.2:9876;127.0.1.1:9876;127.0.1.2:9876", target)
		testutil.Equal(t, rec.Header().Get("Content-Type"), "text/plain; charset=utf-8", "content type")
	}
	var got []map[string]any
	rec := serve(s, "GET", "/v1/namesrvs")
	testutil.Equal(t, rec.Header().Get("Content-Type"), "application/json", "content type")
	testutil.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got), "decode")
	testutil.Equal(t, len(got), 4, "entries")
	for i, e := range got {
		testutil.Equal(t, len(e), 5, "fields in", e)
		testutil.Equal(t, e["addr"], any(s.opts.Namesrvs[i].Addr), "addr (configured order)")
		testutil.Equal(t, e["idc"], any(s.opts.Namesrvs[i].IDC), "idc")
		testutil.Equal(t, e["alive"], any(true), "alive while unknown")
		testutil.Equal(t, e["lastProbe"], any(""), "lastProbe before the first probe")
		testutil.Equal(t, e["lastError"], any(""), "lastError")
	}
}

func TestAddrsrvStateMachine(t *testing.T) {
	s := newIdleServer(t)
	refused := errors.New("connection refused")
	list := func() string { return strings.Join(s.List(), ";") }

	// First probe decides an unknown state at once, either way.
	setState(s, 0, refused) // idc1 a: down
	setState(s, 1, nil)     // idc2 a: up
	testutil.Equal(t, list(), "127.0.2.1:9876;127.0.2.2:9876;127.0.1.2:9876", "after first probes")

	// A known-up server needs DownAfter (2) consecutive failures.
	setState(s, 1, refused)
	testutil.Equal(t, list(), "127.0.2.1:9876;127.0.2.2:9876;127.0.1.2:9876", "one miss keeps it")
	setState(s, 1, nil, refused) // a success resets the count
	testutil.Equal(t, list(), "127.0.2.1:9876;127.0.2.2:9876;127.0.1.2:9876", "count was reset")
	setState(s, 1, refused)
	testutil.Equal(t, list(), "127.0.2.2:9876;127.0.1.2:9876", "two misses drop it")

	// One good probe brings it back.
	setState(s, 0, nil)
	testutil.Equal(t, list(), "127.0.2.2:9876;127.0.1.1:9876;127.0.1.2:9876", "idc1 a back")

	// None alive: every configured one, own IDC first.
	for i := range s.states {
		setState(s, i, refused, refused)
	}
	testutil.Equal(t, list(), "127.0.2.1:9876;127.0.2.2:9876;127.0.1.1:9876;127.0.1.2:9876", "none alive")

	st := s.Namesrvs()[0]
	testutil.Equal(t, st.Alive, false, "alive")
	testutil.Equal(t, st.LastError, "connection refused", "last error")
	testutil.True(t, time.Since(st.LastProbe) < time.Minute, "last probe set", st.LastProbe)

	var got []namesrvJSON
	testutil.NoError(t, json.Unmarshal(serve(s, "GET", "/v1/namesrvs").Body.Bytes(), &got), "decode")
	ts, err := time.Parse(time.RFC3339, got[0].LastProbe)
	testutil.NoError(t, err, "lastProbe is RFC 3339")
	testutil.True(t, ts.Sub(st.LastProbe).Abs() < time.Millisecond, "lastProbe value", ts, st.LastProbe)

	setState(s, 2, nil)
	testutil.Equal(t, s.Namesrvs()[2].LastError, "", "a success clears lastError")
}

func TestAddrsrvNoTrailingNewline(t *testing.T) {
	s := newIdleServer(t)
	body := serve(s, "GET", "/rocketmq/nsaddr").Body.String()
	testutil.True(t, !strings.ContainsAny(body, "\r\n \t"), "nsaddr body has no whitespace", body)
}

func TestAddrsrvMethodsOnIdleServer(t *testing.T) {
	s := newIdleServer(t)
	s.Shutdown()
	s.Shutdown() // idempotent
	testutil.NoError(t, s.Run(t.Context()), "Run after Shutdown")
	_, err := http.Get("http://" + s.Addr() + "/healthz")
	testutil.True(t, err != nil, "listener closed after Shutdown")
}
