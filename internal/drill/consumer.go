package drill

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// consumerProc is one IDC's consumer as a process of its own (`zonemq
// consume --output json`), so S4 can kill it (SIGKILL) and hang it
// (SIGSTOP) as a real application would fail, not only shut it down. Its
// stdout is read line by line into the ledger; the time of a delivery is
// the line's ts, taken by the consumer when its handler ran, so a line that
// waits in the pipe while the drill is busy keeps its true time.
type consumerProc struct {
	idc     *idcProcs
	binary  string
	logPath string
	ledger  *book

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the process is reaped and its stdout read
	stopped bool          // SIGSTOPped
	// ending is set while the drill stops the consumer. One that exits on
	// its own — `zonemq consume` gives up at start when no name server
	// answers — is started again a second later, as a service manager
	// would (the 60-minute campaign ended on a pause of such a process).
	ending bool
}

func newConsumerProc(binary, workDir string, i *idcProcs, l *book) *consumerProc {
	return &consumerProc{idc: i, binary: binary, ledger: l,
		logPath: filepath.Join(workDir, i.name+"-consumer.log")}
}

func (c *consumerProc) String() string { return c.idc.name + "/consumer" }

// consumedLine is the part of a `zonemq consume --output json` line the
// ledger needs.
type consumedLine struct {
	TS          int64  `json:"ts"`
	Key         string `json:"key"`
	Broker      string `json:"broker"`
	IDC         string `json:"idc"`
	QueueID     int    `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
}

// start launches the consumer. It is ready when its first message arrives;
// waitFlowing waits for that.
func (c *consumerProc) start(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd != nil {
		return fmt.Errorf("%s is already running", c)
	}
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// Under --netns the consumer runs in its IDC's network namespace, as
	// the IDC's servers do (network.attach).
	newCmd := exec.Command
	if c.idc.broker.command != nil {
		newCmd = c.idc.broker.command
	}
	cmd := newCmd(c.binary, "consume",
		"--addrsrv", strings.Join(c.idc.addrsrvs, ","), "--idc", c.idc.name, "--local-ip", c.idc.ip,
		"--topic", drillTopic, "--group", drillGroup, "--from", "first",
		"--output", "json", "--log-level", "info")
	cmd.Stderr = logFile
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig, cmd.SysProcAttr.Setpgid = syscall.SIGKILL, true
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", c, err)
	}
	exited := make(chan struct{})
	c.cmd, c.exited, c.stopped = cmd, exited, false
	go func() {
		c.read(stdout, logFile)
		cmd.Wait()
		c.mu.Lock()
		own := !c.ending && c.cmd == cmd
		if own {
			c.cmd = nil
			fmt.Fprintf(logFile, "drill: the consumer exited on its own (%v); starting it again in 1s\n", cmd.ProcessState)
		}
		c.mu.Unlock()
		logFile.Close()
		close(exited)
		if own {
			time.AfterFunc(time.Second, c.restartOnItsOwn)
		}
	}()
	return nil
}

// restartOnItsOwn starts the consumer again after it exited on its own,
// every second while it cannot start, unless the drill started or stopped
// it meanwhile.
func (c *consumerProc) restartOnItsOwn() {
	c.mu.Lock()
	skip := c.cmd != nil || c.ending
	c.mu.Unlock()
	if skip {
		return
	}
	if err := c.start(context.Background()); err != nil {
		time.AfterFunc(time.Second, c.restartOnItsOwn)
	}
}

// read records every delivery line until the consumer's stdout closes;
// anything else it printed goes to its log.
func (c *consumerProc) read(r io.Reader, log io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var l consumedLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Key == "" {
			fmt.Fprintf(log, "drill: unexpected consumer output: %s\n", sc.Bytes())
			continue
		}
		c.ledger.addRecv(l.Key, recvRecord{consumerIDC: c.idc.name, brokerIDC: l.IDC, broker: l.Broker,
			at: time.UnixMilli(l.TS), queue: l.QueueID, offset: l.QueueOffset})
	}
}

// signal sends sig to the running consumer (SIGSTOP hangs it, SIGCONT
// resumes it).
func (c *consumerProc) signal(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return nil // down between a run of its own and its restart: nothing to signal
	}
	switch sig {
	case syscall.SIGSTOP:
		c.stopped = true
	case syscall.SIGCONT:
		c.stopped = false
	}
	if err := c.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// kill SIGKILLs the consumer and waits until it is gone.
func (c *consumerProc) kill() error {
	return c.end(syscall.SIGKILL, 0)
}

// terminate stops the consumer as an operator would (SIGTERM: it commits its
// offsets and leaves the group), escalating to SIGKILL after grace.
func (c *consumerProc) terminate(grace time.Duration) error {
	return c.end(syscall.SIGTERM, grace)
}

func (c *consumerProc) end(sig syscall.Signal, grace time.Duration) error {
	c.mu.Lock()
	cmd, exited, stopped := c.cmd, c.exited, c.stopped
	c.ending = cmd != nil
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.ending = false
		c.mu.Unlock()
	}()
	if cmd == nil {
		return nil
	}
	if stopped && sig != syscall.SIGKILL {
		cmd.Process.Signal(syscall.SIGCONT)
	}
	cmd.Process.Signal(sig)
	var err error
	if sig == syscall.SIGKILL {
		<-exited
	} else {
		select {
		case <-exited:
		case <-time.After(grace):
			err = errors.New(c.String() + " did not stop within " + grace.String() + "; killed")
			cmd.Process.Signal(syscall.SIGKILL)
			<-exited
		}
	}
	c.mu.Lock()
	c.cmd = nil
	c.mu.Unlock()
	return err
}
