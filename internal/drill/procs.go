package drill

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// role is one server process kind the drill runs per IDC.
type role string

const (
	roleAddrsrv role = "addrsrv"
	roleNamesrv role = "namesrv"
	roleBroker  role = "broker"
	roleProxy   role = "proxy" // gRPC: ready once it accepts connections
)

// proc is one role process of one IDC, started from the zonemq binary. It
// can be killed, hung (SIGSTOP), resumed and started again on the same data.
type proc struct {
	role    role
	idc     string
	addr    string // the address it listens on
	binary  string
	args    []string
	logPath string

	// command and dial, under --netns, start the process in its IDC's
	// network namespace and reach it there (netns.go); nil on loopback.
	command func(name string, args ...string) *exec.Cmd
	dial    dialFunc

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool // SIGSTOPped
}

func (p *proc) String() string { return fmt.Sprintf("%s/%s(%s)", p.idc, p.role, p.addr) }

// start launches the process and waits until it accepts connections. On
// a process already running it only waits: an earlier start may have given
// up on a slow one (a broker verifying its log after a power loss took 22 s
// in the 60-minute campaign, past the 20 s a start waits), and the retry
// must not fail for finding it up.
func (p *proc) start(ctx context.Context) error {
	p.mu.Lock()
	if p.cmd != nil {
		exited := p.exited
		select {
		case <-exited:
			p.cmd = nil // it died since: start it again below
		default:
			p.mu.Unlock()
			return p.waitReady(ctx, exited)
		}
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	cmd := p.newCommand()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// The children must not outlive the drill, whatever happens to it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		p.mu.Unlock()
		return fmt.Errorf("start %s: %w", p, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited, p.stopped = cmd, exited, false
	p.mu.Unlock()
	go func() {
		cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	err = p.waitReady(ctx, exited)
	if err != nil {
		select {
		case <-exited:
			// Gone: a later start may try again.
			p.mu.Lock()
			if p.cmd == cmd {
				p.cmd = nil
			}
			p.mu.Unlock()
		default:
		}
	}
	return err
}

func (p *proc) waitReady(ctx context.Context, exited chan struct{}) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		if p.ready() {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited during start-up (see %s)", p, p.logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after 20s (see %s)", p, p.logPath)
		}
	}
}

func (p *proc) ready() bool {
	if p.role == roleAddrsrv {
		c := http.Client{Timeout: 300 * time.Millisecond, Transport: httpTransport(p.dial)}
		resp, err := c.Get("http://" + p.addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	c, err := dialTimeout(p.dial, p.addr, 300*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	if p.role == roleProxy {
		return true // it listens once it serves
	}
	// Listening is not enough: a broker listens before it opens its store,
	// and one that cannot (a full disk) exits after accepting. Ready means
	// it answers a request — any answer, an error code included.
	return remotingAnswers(c, 500*time.Millisecond)
}

// probeFrame is a RocketMQ remoting request with a JSON header and a code
// no server serves: every zonemq server answers it with
// REQUEST_CODE_NOT_SUPPORTED once it serves requests at all.
var probeFrame = func() []byte {
	header := []byte(`{"code":-1,"language":"GO","version":0,"opaque":1,"flag":0,"extFields":{}}`)
	frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)))
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(header))) // serialize type 0: JSON
	return append(frame, header...)
}()

// remotingAnswers sends probeFrame on c and reports whether an answer's
// first bytes arrive within timeout.
func remotingAnswers(c net.Conn, timeout time.Duration) bool {
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(probeFrame); err != nil {
		return false
	}
	var length [4]byte
	_, err := io.ReadFull(c, length[:])
	return err == nil
}

// signal sends sig to the running process.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s is not running", p)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.stopped = true
	case syscall.SIGCONT:
		p.stopped = false
	}
	return p.cmd.Process.Signal(sig)
}

// kill SIGKILLs the process and waits for it to be gone.
func (p *proc) kill() error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	p.mu.Lock()
	p.cmd = nil
	p.mu.Unlock()
	return nil
}

// terminate stops the process cleanly (SIGTERM), escalating to SIGKILL.
func (p *proc) terminate(grace time.Duration) error {
	p.mu.Lock()
	cmd, exited, stopped := p.cmd, p.exited, p.stopped
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if stopped {
		cmd.Process.Signal(syscall.SIGCONT)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case <-exited:
	case <-time.After(grace):
		err = errors.New(p.String() + " did not stop within " + grace.String() + "; killed")
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
	p.mu.Lock()
	p.cmd = nil
	p.mu.Unlock()
	return err
}

// newProc describes a role process of one IDC.
func newProc(binary, workDir string, r role, idc, addr string, args []string) *proc {
	return &proc{
		role:    r,
		idc:     idc,
		addr:    addr,
		binary:  binary,
		args:    append([]string{string(r)}, args...),
		logPath: filepath.Join(workDir, fmt.Sprintf("%s-%s.log", idc, r)),
	}
}
