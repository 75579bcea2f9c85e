package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Helpers for the process tests: start the zonemq binary as servers and
// clients on loopback (IDC n on 127.0.n.1, free ports), wait for them to
// serve, signal them, and kill whatever is left when the test ends.

const (
	// readyTimeout bounds the wait for a started server to serve.
	readyTimeout = 20 * time.Second
	// stopTimeout is how long a server may take to stop on SIGINT/SIGTERM
	// (docs/architecture.md §6).
	stopTimeout = 10 * time.Second
)

// idcHost is IDC n's loopback address.
func idcHost(n int) string { return fmt.Sprintf("127.0.%d.1", n) }

// freeAddr returns host:port with a port that was free a moment ago: it
// binds port 0 and closes the listener.
func freeAddr(t *testing.T, host string) string {
	t.Helper()
	ln, err := net.Listen("tcp", host+":0")
	if err != nil {
		t.Fatalf("finding a free port on %s: %v", host, err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// lockedBuffer is a bytes.Buffer safe for one writer and many readers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (lb *lockedBuffer) Write(p []byte) (int, error) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return lb.b.Write(p)
}

func (lb *lockedBuffer) String() string {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return lb.b.String()
}

// lineSplitter passes every complete line written to it to onLine (without
// its newline), and keeps everything in buf.
type lineSplitter struct {
	buf     *lockedBuffer
	onLine  func(string)
	partial []byte
}

func (ls *lineSplitter) Write(p []byte) (int, error) {
	ls.buf.Write(p)
	ls.partial = append(ls.partial, p...)
	for {
		i := bytes.IndexByte(ls.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		ls.onLine(string(ls.partial[:i]))
		ls.partial = ls.partial[i+1:]
	}
}

// proc is one process of the zonemq binary.
type proc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stdout lockedBuffer
	stderr lockedBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // Wait's result, valid after done
}

// procOptions adjusts how a process is started.
type procOptions struct {
	// onLine, if set, gets every stdout line as it is printed.
	onLine func(line string)
	// env is added to the environment (after the ZONEMQ_* variables are
	// removed, so the test's own shell cannot point a client elsewhere).
	env []string
}

// startProc starts `zonemq args…`; it is SIGKILLed at the end of the test
// (and by the kernel if the test binary dies first).
func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return startProcWith(t, name, procOptions{}, args...)
}

func startProcWith(t *testing.T, name string, o procOptions, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{t: t, name: name, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, binary, args...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.cmd.Env = append(cleanEnv(), o.env...)
	p.cmd.Stderr = &p.stderr
	if o.onLine != nil {
		p.cmd.Stdout = &lineSplitter{buf: &p.stdout, onLine: o.onLine}
	} else {
		p.cmd.Stdout = &p.stdout
	}
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		cancel() // SIGKILL, if it still runs
		<-p.done
		if t.Failed() {
			t.Logf("%s (%s) exited: %v\nstdout:\n%s\nstderr:\n%s", p.name, strings.Join(args, " "), p.err,
				tail(p.stdout.String(), 20), tail(p.stderr.String(), 30))
		}
	})
	return p
}

// cleanEnv is the environment without the zonemq client defaults.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ZONEMQ_") {
			env = append(env, kv)
		}
	}
	return env
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("… (%d lines)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process.
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil && !p.exited() {
		p.t.Fatalf("signalling %s: %v", p.name, err)
	}
}

// kill SIGKILLs the process and waits until it is gone.
func (p *proc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// exitCode waits up to timeout for the process to exit and returns its exit
// status; ok is false if it still runs.
func (p *proc) exitCode(timeout time.Duration) (code int, ok bool) {
	select {
	case <-p.done:
	case <-time.After(timeout):
		return 0, false
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0, true
	case errors.As(p.err, &ee):
		return ee.ExitCode(), true
	}
	return -1, true
}

// stopWith sends sig and checks that the process exits 0 within
// stopTimeout; it returns how long that took.
func (p *proc) stopWith(sig syscall.Signal) time.Duration {
	p.t.Helper()
	start := time.Now()
	p.signal(sig)
	code, ok := p.exitCode(stopTimeout)
	took := time.Since(start)
	if !ok {
		p.t.Errorf("%s did not exit within %v of %v", p.name, stopTimeout, sig)
		p.kill()
		return took
	}
	if code != 0 {
		p.t.Errorf("%s exited %d after %v, want 0; stderr:\n%s", p.name, code, sig, tail(p.stderr.String(), 10))
	}
	return took
}

// waitReady polls ready until it reports nil, failing the test when the
// process exits first or readyTimeout passes.
func (p *proc) waitReady(what string, ready func() error) {
	p.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		err := ready()
		if err == nil {
			return
		}
		if p.exited() {
			code, _ := p.exitCode(0)
			p.t.Fatalf("%s exited (status %d) before %s; stderr:\n%s", p.name, code, what, tail(p.stderr.String(), 20))
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: not %s after %v: %v", p.name, what, readyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitTCP waits until addr accepts connections.
func (p *proc) waitTCP(addr string) {
	p.t.Helper()
	p.waitReady("listening on "+addr, func() error {
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// waitHealthy waits until the address server at baseURL answers /healthz.
func (p *proc) waitHealthy(baseURL string) {
	p.t.Helper()
	hc := http.Client{Timeout: 500 * time.Millisecond}
	p.waitReady("healthy at "+baseURL, func() error {
		resp, err := hc.Get(baseURL + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("healthz: %s", resp.Status)
		}
		return nil
	})
}

// server is one started server process and where it serves.
type server struct {
	*proc
	addr string // host:port (the address server's: its base URL's host)
	args []string
}

// url is an address server's base URL.
func (s *server) url() string { return "http://" + s.addr }

// startNamesrv starts `zonemq namesrv` for IDC n on a free port.
func startNamesrv(t *testing.T, n int, extra ...string) *server {
	t.Helper()
	addr := freeAddr(t, idcHost(n))
	args := append([]string{"namesrv", "--listen", addr, "--idc", idcName(n), "--kv-config="}, extra...)
	s := &server{proc: startProc(t, idcName(n)+"/namesrv", args...), addr: addr, args: args}
	s.waitTCP(addr)
	return s
}

// startAddrsrv starts `zonemq addrsrv` for IDC n listing namesrvs (IDC
// number → address).
func startAddrsrv(t *testing.T, n int, namesrvs map[int]string) *server {
	t.Helper()
	var spec []string
	for i := 1; i <= len(namesrvs); i++ {
		spec = append(spec, idcName(i)+"="+namesrvs[i])
	}
	addr := freeAddr(t, idcHost(n))
	args := []string{"addrsrv", "--listen", addr, "--idc", idcName(n), "--namesrv", strings.Join(spec, ",")}
	s := &server{proc: startProc(t, idcName(n)+"/addrsrv", args...), addr: addr, args: args}
	s.waitHealthy(s.url())
	return s
}

// startBroker starts `zonemq broker` for IDC n named name on dataDir;
// cluster gives --namesrv ADDR or --addrsrv URL, and extra more flags.
func startBroker(t *testing.T, n int, name, dataDir string, cluster []string, extra ...string) *server {
	t.Helper()
	addr := freeAddr(t, idcHost(n))
	args := []string{"broker", "--listen", addr, "--idc", idcName(n), "--name", name, "--data", dataDir}
	args = append(append(args, cluster...), extra...)
	s := &server{proc: startProc(t, idcName(n)+"/"+name, args...), addr: addr, args: args}
	s.waitTCP(addr)
	return s
}

// restart starts the server again with the same command line (same
// address, same data) after it has exited.
func (s *server) restart(t *testing.T) {
	t.Helper()
	if !s.exited() {
		t.Fatalf("%s still runs", s.name)
	}
	s.proc = startProc(t, s.name, s.args...)
	s.waitTCP(s.addr)
}

func idcName(n int) string { return fmt.Sprintf("idc%d", n) }

// cliResult is a finished client command.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs `zonemq args…` to its end (at most timeout).
func runCLI(t *testing.T, timeout time.Duration, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("zonemq %s did not finish within %v\nstderr:\n%s", strings.Join(args, " "), timeout, tail(r.stderr, 20))
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running zonemq %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// eventually polls fn every 50 ms until it returns nil, failing the test
// with its last error after deadline.
func eventually(t *testing.T, deadline time.Duration, fn func() error) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("not within %v: %v", deadline, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitBrokersAlive waits until the name servers that clientArgs point at
// list want alive brokers.
func waitBrokersAlive(t *testing.T, want int, clientArgs ...string) {
	t.Helper()
	eventually(t, readyTimeout, func() error {
		r := runCLI(t, 10*time.Second, append([]string{"admin", "cluster", "--output", "json", "--log-level", "error"}, clientArgs...)...)
		if r.code != 0 {
			return fmt.Errorf("admin cluster: exit %d: %s", r.code, strings.TrimSpace(r.stderr))
		}
		var brokers []struct {
			Name  string `json:"name"`
			Alive bool   `json:"alive"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &brokers); err != nil {
			return fmt.Errorf("admin cluster output %q: %v", r.stdout, err)
		}
		alive := 0
		for _, b := range brokers {
			if b.Alive {
				alive++
			}
		}
		if alive < want {
			return fmt.Errorf("%d of %d brokers alive: %s", alive, want, r.stdout)
		}
		return nil
	})
}

// createTopic creates topic on every broker with `zonemq admin topic
// create` and waits until its route lists wantBrokers brokers.
func createTopic(t *testing.T, topic string, wantBrokers int, clientArgs ...string) {
	t.Helper()
	waitBrokersAlive(t, wantBrokers, clientArgs...)
	r := runCLI(t, 30*time.Second, append([]string{"admin", "topic", "create", "--topic", topic, "--queues", "4", "--log-level", "error"}, clientArgs...)...)
	if r.code != 0 {
		t.Fatalf("admin topic create %s: exit %d: %s", topic, r.code, r.stderr)
	}
	eventually(t, readyTimeout, func() error {
		r := runCLI(t, 10*time.Second, append([]string{"admin", "topic", "route", "--topic", topic, "--output", "json", "--log-level", "error"}, clientArgs...)...)
		if r.code != 0 {
			return fmt.Errorf("admin topic route: exit %d: %s", r.code, strings.TrimSpace(r.stderr))
		}
		var route struct {
			Brokers []json.RawMessage `json:"brokers"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &route); err != nil {
			return err
		}
		if len(route.Brokers) < wantBrokers {
			return fmt.Errorf("route of %s lists %d of %d brokers", topic, len(route.Brokers), wantBrokers)
		}
		return nil
	})
}

// jsonLines decodes every non-empty line of out as a JSON object, keeping
// numbers exact.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		m, err := decodeLine(l)
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

func decodeLine(l string) (map[string]any, error) {
	dec := json.NewDecoder(strings.NewReader(l))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("more than one JSON value on the line")
	}
	return m, nil
}

// testHome points $HOME at a temporary directory for the test, so
// in-process clients (rocketmq-client-go) write there.
func testHome(t *testing.T) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	return home
}
