package console_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/broker"
	"github.com/zonemq/zonemq/internal/console"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/testutil"
)

const consoleACL = `accounts:
  - accessKey: clusterAdmin
    secretKey: clusterSecret
    admin: true
  - accessKey: consoleViewer
    secretKey: viewerSecret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
`

// startConsole runs a console over c's address servers until the test ends.
func startConsole(t *testing.T, c *devcluster.Cluster, admin bool, accessKey, secretKey string) *console.Server {
	t.Helper()
	s, err := console.New(console.Options{AddrsrvURLs: []string{c.AddrsrvURL(1), c.AddrsrvURL(2)},
		Listen: "127.0.0.1:0", Interval: 300 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		Admin: admin, AccessKey: accessKey, SecretKey: secretKey})
	testutil.NoError(t, err, "console.New")
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	t.Cleanup(func() {
		s.Shutdown()
		testutil.NoError(t, <-done, "console Run")
	})
	// Its client starts with the first poll; actions before it are refused
	// with 503 "not connected to the cluster yet".
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, polls := s.Snapshot(); polls == 0 {
			return fmt.Errorf("the console has not polled yet")
		}
		return nil
	})
	return s
}

// page is one HTTP answer of the console.
type page struct {
	status int
	body   string
}

func get(t *testing.T, u string) page {
	t.Helper()
	resp, err := http.Get(u)
	testutil.NoError(t, err, u)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return page{resp.StatusCode, string(b)}
}

// post submits a form as a browser on origin would (origin "" sends no
// Origin header, as a non-browser client).
func post(t *testing.T, u, origin string, form url.Values) page {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	testutil.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
		site := "same-origin"
		if !strings.HasPrefix(u, origin) {
			site = "cross-site"
		}
		req.Header.Set("Sec-Fetch-Site", site)
	}
	resp, err := http.DefaultClient.Do(req)
	testutil.NoError(t, err, u)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return page{resp.StatusCode, string(b)}
}

var tokenRE = regexp.MustCompile(`name="token" value="([0-9a-f]+)"`)

// TestConsoleAdminActions runs two IDCs with ACL on and consoles with and
// without --admin: read-only serves no admin page and takes no POST; with
// --admin and an admin account it creates a topic and resets a group's
// offsets; cross-origin posts, posts without the form token, bad input and
// an account the ACL refuses get a clear error on the page and change
// nothing.
func TestConsoleAdminActions(t *testing.T) {
	aclPath := filepath.Join(t.TempDir(), "plain_acl.yml")
	testutil.NoError(t, os.WriteFile(aclPath, []byte(consoleACL), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Options{IDCs: 2, DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler),
		Namesrv: func(_ int, o *namesrv.Options) { o.ACLFile = aclPath },
		Broker: func(_ int, o *broker.Options) {
			o.ACLFile, o.AccessKey, o.SecretKey = aclPath, "clusterAdmin", "clusterSecret"
		},
		AccessKey: "clusterAdmin", SecretKey: "clusterSecret"})
	testutil.NoError(t, err, "devcluster.Start")
	t.Cleanup(func() { c.Close() })

	// Read-only (the default): no admin page, no action.
	ro := startConsole(t, c, false, "clusterAdmin", "clusterSecret")
	testutil.True(t, strings.Contains(get(t, ro.URL()).body, "read-only"), "read-only badge")
	testutil.Equal(t, get(t, ro.URL()+"admin").status, http.StatusNotFound)
	r := post(t, ro.URL()+"admin/topic", strings.TrimSuffix(ro.URL(), "/"), url.Values{"topic": {"RoTopic"}, "queues": {"2"}})
	testutil.True(t, r.status == http.StatusNotFound || r.status == http.StatusMethodNotAllowed, "read-only POST", r.status)

	// --admin with an admin account.
	adm := startConsole(t, c, true, "clusterAdmin", "clusterSecret")
	origin := strings.TrimSuffix(adm.URL(), "/")
	testutil.True(t, strings.Contains(get(t, adm.URL()).body, `href="/admin"`), "admin link on the main page")
	p := get(t, adm.URL()+"admin")
	testutil.Equal(t, p.status, http.StatusOK)
	m := tokenRE.FindStringSubmatch(p.body)
	testutil.True(t, m != nil, "no form token", p.body)
	token := m[1]

	const topic, group = "ConsoleAdminTopic", "ConsoleAdminGroup"
	r = post(t, adm.URL()+"admin/topic", origin, url.Values{"token": {token}, "topic": {topic}, "queues": {"2"}})
	testutil.Equal(t, r.status, http.StatusOK, r.body)
	testutil.True(t, strings.Contains(r.body, "Topic "+topic+" created"), r.body)

	cc := c.ClientConfig(1)
	cc.Logger = slog.New(slog.DiscardHandler)
	a, err := admin.New(admin.Config{ClientConfig: cc})
	testutil.NoError(t, err)
	testutil.NoError(t, a.Start(ctx))
	t.Cleanup(func() { a.Shutdown(context.Background()) })
	testutil.Eventually(t, 10*time.Second, func() error {
		rt, err := a.TopicRoute(ctx, topic)
		if err != nil {
			return err
		}
		if len(rt.Brokers) != 2 {
			return fmt.Errorf("%s on %d brokers", topic, len(rt.Brokers))
		}
		return nil
	})

	// Reset a group's offsets to latest after three sends: each queue's
	// new offset is its end, shown per queue.
	pr, err := client.NewProducer(client.ProducerConfig{ClientConfig: cc})
	testutil.NoError(t, err)
	testutil.NoError(t, pr.Start(ctx))
	t.Cleanup(func() { pr.Shutdown(context.Background()) })
	for range 3 {
		_, err := pr.SendSync(ctx, &client.Message{Topic: topic, Body: []byte("x")})
		testutil.NoError(t, err)
	}
	r = post(t, adm.URL()+"admin/offset-reset", origin, url.Values{"token": {token}, "form": {"reset-offset"}, "group": {group}, "topic": {topic}, "to": {"latest"}})
	testutil.Equal(t, r.status, http.StatusOK, r.body)
	testutil.True(t, strings.Contains(r.body, "Offsets of "+group+" on "+topic+" reset to latest"), r.body)
	resetPage := r.body
	qs, err := a.GroupOffsets(ctx, group, topic)
	testutil.NoError(t, err)
	var total int64
	for _, q := range qs {
		testutil.Equal(t, q.Committed, q.Max, q.Queue)
		total += q.Committed
	}
	testutil.Equal(t, total, int64(3))

	// Refusals, each with its reason on the page.
	refusals := []struct {
		what, path, origin string
		form               url.Values
		status             int
		says               string
	}{
		{"cross-origin", "admin/topic", "http://evil.example", url.Values{"token": {token}, "topic": {"EvilTopic"}, "queues": {"1"}},
			http.StatusForbidden, "cross-origin request"},
		{"no token", "admin/topic", origin, url.Values{"topic": {"NoTokenTopic"}, "queues": {"1"}},
			http.StatusForbidden, "missing or stale form token"},
		{"stale token", "admin/offset-reset", "", url.Values{"token": {"00ff"}, "group": {group}, "topic": {topic}, "to": {"earliest"}},
			http.StatusForbidden, "missing or stale form token"},
		{"bad topic", "admin/topic", origin, url.Values{"token": {token}, "topic": {"bad topic!"}, "queues": {"1"}},
			http.StatusBadRequest, "Cannot create the topic"},
		{"system topic", "admin/topic", origin, url.Values{"token": {token}, "topic": {"%RETRY%x"}, "queues": {"1"}},
			http.StatusBadRequest, "system, retry or dead-letter"},
		{"bad queues", "admin/topic", origin, url.Values{"token": {token}, "topic": {"QTopic"}, "queues": {"0"}},
			http.StatusBadRequest, "queues: want a number"},
		{"bad time", "admin/offset-reset", origin, url.Values{"token": {token}, "group": {group}, "topic": {topic}, "to": {"yesterday"}},
			http.StatusBadRequest, "reset to:"},
		{"unknown topic", "admin/offset-reset", origin, url.Values{"token": {token}, "group": {group}, "topic": {"NoSuchTopic"}, "to": {"earliest"}},
			http.StatusBadGateway, "Cannot reset the offsets"},
	}
	for _, rf := range refusals {
		r := post(t, adm.URL()+rf.path, rf.origin, rf.form)
		testutil.Equal(t, r.status, rf.status, rf.what, r.body)
		testutil.True(t, strings.Contains(r.body, rf.says), rf.what, r.body)
	}
	for _, t2 := range []string{"EvilTopic", "NoTokenTopic", "QTopic"} {
		_, err := a.TopicRoute(ctx, t2)
		testutil.True(t, err != nil, t2+" was created by a refused request")
	}

	// Accounts the ACL refuses: not admin, and a wrong secret.
	for _, creds := range [][2]string{{"consoleViewer", "viewerSecret"}, {"clusterAdmin", "wrongSecret"}} {
		s := startConsole(t, c, true, creds[0], creds[1])
		tok := tokenRE.FindStringSubmatch(get(t, s.URL()+"admin").body)[1]
		r := post(t, s.URL()+"admin/topic", strings.TrimSuffix(s.URL(), "/"), url.Values{"token": {tok}, "topic": {"AclTopic"}, "queues": {"1"}})
		testutil.Equal(t, r.status, http.StatusBadGateway, creds[0], r.body)
		testutil.True(t, strings.Contains(r.body, "The cluster refused to create AclTopic"), creds[0], r.body)
		testutil.True(t, strings.Contains(r.body, "NO_PERMISSION") || strings.Contains(r.body, "ACL refused"), creds[0], r.body)
	}
	_, err = a.TopicRoute(ctx, "AclTopic")
	testutil.True(t, err != nil, "AclTopic was created with refused credentials")

	// The admin form in a real browser, when there is one.
	if path := findBrowser(); path != "" {
		b := browser{t: t, path: path}
		dom := b.dom(adm.URL() + "admin")
		testutil.True(t, strings.Contains(dom, `id="create-topic"`) && strings.Contains(dom, `id="reset-offset"`), dom)
		shot := filepath.Join(screenshotDir(t), "console-admin.png")
		b.screenshot(adm.URL()+"admin", shot)
		t.Logf("screenshot of the admin page: %s", shot)
		// The answer to the reset, as the browser showed it after the POST
		// (served again, with its style sheet from the console).
		html := strings.Replace(resetPage, `href="/static/`, `href="`+adm.URL()+`static/`, 1)
		replay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, html)
		}))
		defer replay.Close()
		start := time.Now()
		b.screenshot(replay.URL, filepath.Join(screenshotDir(t), "console-admin-reset.png"))
		t.Logf("reset screenshot took %v", time.Since(start))
	}
}
