// Package scale measures how zonemq's cost grows with the work (issue 25)
// on real processes of the zonemq binary on loopback. Its benchmarks run
// only when asked:
//
//	go test -run XXX -bench . -benchtime 1x -timeout 60m ./test/scale
//
// Each sub-benchmark is one point of a curve and reports its figures as
// benchmark metrics; ZONEMQ_SCALE_PLOT=DIR draws each curve into DIR, and
// ZONEMQ_SCALE_PROFILES=DIR has every server write a CPU profile there.
// docs/benchmarks.md ("Scale") has the latest run.
package scale

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// binary is the zonemq executable, built once for the package.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run()) // no benchmark asked for: nothing to build
	}
	dir, err := os.MkdirTemp("", "zonemq-scale-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "zonemq")
	build := exec.Command("go", "build", "-o", binary, "../../cmd/zonemq")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		panic("building zonemq: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one process of the zonemq binary; it is SIGKILLed when the
// benchmark ends if it still runs.
type proc struct {
	name string
	args []string
	addr string
	cmd  *exec.Cmd
	done chan struct{}
	logs strings.Builder
	mu   sync.Mutex
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.logs.Len() < 1<<20 {
		p.logs.Write(b)
	}
	return len(b), nil
}

// start runs the process (again, with the same arguments) and returns when
// its address accepts connections.
func (p *proc) start(tb testing.TB) {
	tb.Helper()
	p.cmd = exec.Command(binary, p.args...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if dir := os.Getenv("ZONEMQ_SCALE_PROFILES"); dir != "" {
		// Each server profiles itself until its clean stop at the end.
		p.cmd.Env = append(os.Environ(), "ZONEMQ_CPUPROFILE="+filepath.Join(dir,
			fmt.Sprintf("%s-%s-%d.prof", strings.ReplaceAll(tb.Name(), "/", "_"), p.name, time.Now().UnixNano())))
	}
	p.cmd.Stdout, p.cmd.Stderr = p, p
	p.done = make(chan struct{})
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", p.name, err)
	}
	done := p.done
	go func() { p.cmd.Wait(); close(done) }()
	tb.Cleanup(func() {
		// A clean stop (a profile is written then), SIGKILL if it hangs.
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-done
		}
	})
	waitFor(tb, p.name+" listening", 60*time.Second, func() error {
		select {
		case <-done:
			return fmt.Errorf("%s exited: %s", p.name, tail(p.logs.String()))
		default:
		}
		c, err := net.DialTimeout("tcp", p.addr, 300*time.Millisecond)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// kill SIGKILLs the process and waits for it.
func (p *proc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// stop sends SIGTERM and waits for the process to exit.
func (p *proc) stop(tb testing.TB) {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		tb.Fatalf("%s did not stop within a minute", p.name)
	}
}

// rssMiB is the process's resident set, from /proc.
func (p *proc) rssMiB() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return -1
}

// cpu is the CPU time the process has used (user + system), from /proc.
func (p *proc) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (which may hold spaces).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// freeAddr is host:port with a port that was free a moment ago.
func freeAddr(tb testing.TB, host string) string {
	tb.Helper()
	ln, err := net.Listen("tcp", host+":0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitFor polls cond until it returns nil, failing after limit.
func waitFor(tb testing.TB, what string, limit time.Duration, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %v: %v", what, limit, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func tail(s string) string {
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}

// invoke sends one request and waits up to 30 s for its answer.
func invoke(c *remoting.Client, addr string, code protocol.RequestCode, ext map[string]string, body []byte) (*remoting.Command, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Invoke(ctx, addr, remoting.NewRequest(int32(code), ext, body))
}

// routed reports whether the name server at ns routes topic.
func routed(c *remoting.Client, ns, topic string) error {
	h := protocol.GetRouteInfoRequestHeader{Topic: topic}
	resp, err := invoke(c, ns, protocol.GetRouteInfoByTopic, h.Ext(), nil)
	if err != nil {
		return err
	}
	if resp.Code != int32(protocol.Success) {
		return fmt.Errorf("route of %s: %d %s", topic, resp.Code, resp.Remark)
	}
	return nil
}

// envInts reads a comma-separated list of counts from name, or def.
func envInts(name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// curve runs point once per count (ZONEMQ_SCALE_<env> or defaults) as the
// sub-benchmark "<name>=<count>", then draws the curve (plot).
func curve(b *testing.B, env string, defaults []int, name, curveName, xLabel string, point func(b *testing.B, n int)) {
	for _, n := range envInts("ZONEMQ_SCALE_"+env, defaults) {
		b.Run(fmt.Sprintf("%s=%d", name, n), func(b *testing.B) {
			for range b.N {
				point(b, n)
			}
		})
	}
	plot(b, curveName, xLabel)
}

// each calls fn(0) … fn(n-1) from 64 goroutines (64 requests in flight)
// and returns the first error; after one, no further call starts.
func each(n int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	return first
}
