package console_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/console"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/testutil"
)

// The console is tested in a real browser: headless Chromium (Debian's
// `chromium` package; .ci/run installs it) loads the page, runs its script
// and prints the DOM (--dump-dom) or takes a screenshot (--screenshot).
// That is all the test needs of the DevTools machinery, so it drives the
// browser through its command line and adds no dependency.

// findBrowser returns a Chromium-family binary, or "" if there is none.
// ZONEMQ_CHROMIUM names one explicitly.
func findBrowser() string {
	if p := os.Getenv("ZONEMQ_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser runs headless Chromium with the flags that work in a container
// (no sandbox, no GPU, nothing fetched in the background) and a fresh
// profile per run.
type browser struct {
	t    *testing.T
	path string
}

func (b browser) run(args ...string) []byte {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + b.t.TempDir(), "--window-size=1400,1300"}
	cmd := exec.CommandContext(ctx, b.path, append(flags, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		b.t.Fatalf("%s %v: %v\n%s", b.path, args, err, stderr.String())
	}
	return stdout.Bytes()
}

// dom loads url and returns the DOM after the page's scripts ran.
func (b browser) dom(url string) string { return string(b.run("--dump-dom", url)) }

// screenshot saves url as a PNG at path.
func (b browser) screenshot(url, path string) {
	b.run("--screenshot="+path, url)
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		b.t.Fatalf("no screenshot at %s: %v", path, err)
	}
}

// flowTargets returns the IDCs idc's clients send to (kind "produce") or
// read from ("consume") in the page, with "away" marking another IDC.
func flowTargets(dom, idc, kind string) string {
	_, block, ok := strings.Cut(dom, `data-flow="`+idc+`"`)
	if !ok {
		return "no flow row for " + idc
	}
	block, _, _ = strings.Cut(block, `data-flow="`)
	_, bar, ok := strings.Cut(block, `data-kind="`+kind+`"`)
	if !ok {
		return "no " + kind + " bar"
	}
	bar, _, _ = strings.Cut(bar, `data-kind="`)
	var out []string
	for _, seg := range strings.Split(bar, `class="seg `)[1:] {
		class, rest, _ := strings.Cut(seg, `"`)
		_, target, ok := strings.Cut(rest, `data-target="`)
		if !ok {
			out = append(out, class)
			continue
		}
		target, _, _ = strings.Cut(target, `"`)
		out = append(out, class+":"+target)
	}
	return strings.Join(out, ",")
}

// brokerUp reads a broker's up state from the page ("true", "false", or ""
// when the page does not show it).
func brokerUp(dom, name string) string {
	_, rest, ok := strings.Cut(dom, `data-broker="`+name+`" data-up="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// screenshotDir is where the screenshots go: $ZONEMQ_SCREENSHOT_DIR (CI
// keeps them), else the test's temporary directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("ZONEMQ_SCREENSHOT_DIR"); d != "" {
		testutil.NoError(t, os.MkdirAll(d, 0o755), "screenshot dir")
		return d
	}
	return t.TempDir()
}

// TestConsoleBrowserShowsFailover runs two IDCs with a producer and a
// consumer in each, opens the console in headless Chromium, stops idc1's
// broker and checks that the page shows it down and idc1's traffic on
// idc2, then restarts it and checks the traffic comes home.
func TestConsoleBrowserShowsFailover(t *testing.T) {
	path := findBrowser()
	if path == "" {
		t.Skip("no headless browser: install Debian's chromium package (apt-get install -y chromium) or set ZONEMQ_CHROMIUM")
	}
	b := browser{t: t, path: path}
	logger := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Options{IDCs: 2, DataDir: t.TempDir(), Logger: logger})
	testutil.NoError(t, err, "devcluster.Start")
	t.Cleanup(func() { c.Close() })

	s, err := console.New(console.Options{AddrsrvURLs: []string{c.AddrsrvURL(1), c.AddrsrvURL(2)},
		Listen: "127.0.0.1:0", Interval: 300 * time.Millisecond, Logger: logger})
	testutil.NoError(t, err, "console.New")
	runDone := make(chan error, 1)
	go func() { runDone <- s.Run(context.Background()) }()
	t.Cleanup(func() {
		s.Shutdown()
		testutil.NoError(t, <-runDone, "console Run")
	})

	// A producer (20 messages a second) and a consumer in each IDC.
	const topic, group = "ConsoleTopic", "ConsoleGroup"
	var wg sync.WaitGroup
	loadCtx, stopLoad := context.WithCancel(context.Background())
	t.Cleanup(func() { stopLoad(); wg.Wait() })
	for n := 1; n <= 2; n++ {
		cc := c.ClientConfig(n)
		cc.Logger = logger
		p, err := client.NewProducer(client.ProducerConfig{ClientConfig: cc})
		testutil.NoError(t, err)
		testutil.NoError(t, p.Start(ctx))
		t.Cleanup(func() { p.Shutdown(context.Background()) })
		pc, err := client.NewPushConsumer(client.ConsumerConfig{ClientConfig: cc, Group: group, ConsumeFromWhere: client.ConsumeFromFirstOffset})
		testutil.NoError(t, err)
		testutil.NoError(t, pc.Subscribe(topic, "*", func(context.Context, []*client.MessageExt) client.ConsumeResult {
			return client.ConsumeSuccess
		}))
		testutil.NoError(t, pc.Start(ctx))
		t.Cleanup(func() { pc.Shutdown(context.Background()) })
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-loadCtx.Done():
					return
				case <-tick.C:
				}
				sctx, cancel := context.WithTimeout(loadCtx, 3*time.Second)
				p.SendSync(sctx, &client.Message{Topic: topic, Body: []byte("x")}) // failures show on the page
				cancel()
			}
		}()
	}

	url := s.URL()
	dir := screenshotDir(t)
	waitPage := func(what string, ok func(dom string) error) string {
		t.Helper()
		var dom string
		testutil.Eventually(t, 60*time.Second, func() error {
			dom = b.dom(url)
			if err := ok(dom); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		})
		return dom
	}
	home := func(dom string) error {
		if up := brokerUp(dom, devcluster.BrokerName(1)); up != "true" {
			return fmt.Errorf("broker-idc1 up=%q", up)
		}
		if got := flowTargets(dom, "idc1", "produce"); got != "home:idc1" {
			return fmt.Errorf("idc1's producers send to %q", got)
		}
		return nil
	}
	waitPage("healthy cluster", home)
	b.screenshot(url, filepath.Join(dir, "console-healthy.png"))

	c.StopBroker(1)
	dom := waitPage("idc1's broker stopped", func(dom string) error {
		if up := brokerUp(dom, devcluster.BrokerName(1)); up != "false" {
			return fmt.Errorf("broker-idc1 up=%q, want false", up)
		}
		if got := flowTargets(dom, "idc1", "produce"); got != "away:idc2" {
			return fmt.Errorf("idc1's producers send to %q, want away:idc2", got)
		}
		return nil
	})
	for _, want := range []string{"degraded", "DOWN", "broker broker-idc1 went down", "producers now send to idc2",
		// broker-idc1's queues stay in the group table, marked, with the lag stranded there.
		"stranded, as of"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page after the stop lacks %q", want)
		}
	}
	shot := filepath.Join(dir, "console-failover.png")
	b.screenshot(url, shot)
	t.Logf("screenshot of the failover: %s", shot)

	testutil.NoError(t, c.StartBroker(1), "restart idc1's broker")
	dom = waitPage("idc1's broker back", home)
	if !strings.Contains(dom, "broker broker-idc1 is back") {
		t.Errorf("the timeline does not show the broker's return")
	}
	b.screenshot(url, filepath.Join(dir, "console-failback.png"))
}
