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

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/ledger"
)

// The official-client workloads (issue 23): the clients RocketMQ users
// run, as more applications of the campaign, each a process of its own in
// the first IDC sending to a topic of its own and consuming it in one
// group; their sends and deliveries go into the same checker, and the
// nemesis may kill, stop or pause them as any client.
//   - the stock remoting Go client, rocketmq-client-go (test/rmqpeer,
//     given with --stock-peer), finds the name servers through its IDC's
//     address server as a RocketMQ user configures it;
//   - the RocketMQ 5 Go client (test/v5peer, --v5-peer) talks gRPC to the
//     IDCs' access points, its own IDC's first (a multi-address endpoint).
const (
	stockTopic    = "ZonemqDrillStock"
	stockGroup    = "zonemq_drill_stock_cg"
	stockProducer = "zonemq_drill_stock_pg"
	stockQueues   = 4
	stockTarget   = "/stock-client"

	v5Topic  = "ZonemqDrillV5"
	v5Group  = "zonemq_drill_v5_cg"
	v5Target = "/v5-client"
)

// peerSpec says how to run one official-client workload.
type peerSpec struct {
	binary string
	target string // its name after the IDC's: "/stock-client"
	topic  string
	// args are the command line of run gen (its keys must differ from
	// every earlier run's).
	args func(home *idcProcs, gen int, interval time.Duration) []string
}

// stockSpec runs test/rmqpeer.
func stockSpec(binary string) peerSpec {
	return peerSpec{binary: binary, target: stockTarget, topic: stockTopic,
		args: func(home *idcProcs, gen int, interval time.Duration) []string {
			return []string{"--addrsrv", home.addrsrvURL(), "--topic", stockTopic, "--group", stockGroup,
				"--producer-group", stockProducer, "--prefix", fmt.Sprintf("stock-%d-", gen),
				"--instance", fmt.Sprintf("drill-stock-%d", gen), "--interval", interval.String()}
		}}
}

// v5Spec runs test/v5peer's chaos mode against every IDC's access point,
// the home IDC's first.
func v5Spec(binary string, c *cluster) peerSpec {
	return peerSpec{binary: binary, target: v5Target, topic: v5Topic,
		args: func(home *idcProcs, gen int, interval time.Duration) []string {
			eps := []string{home.proxy.addr}
			for _, i := range c.idcs {
				if i != home {
					eps = append(eps, i.proxy.addr)
				}
			}
			return []string{"chaos", "--endpoint", strings.Join(eps, ";"), "--topic", v5Topic, "--group", v5Group,
				"--prefix", fmt.Sprintf("v5-%d-", gen), "--interval", interval.String()}
		}}
}

// peerWork is one official-client workload's process and what it reported.
type peerWork struct {
	spec     peerSpec
	idc      *idcProcs
	logPath  string
	home     string // HOME for the client (it writes its resolver snapshots under it)
	interval time.Duration

	mu       sync.Mutex
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	exited   chan struct{}
	gen      int
	stopSend bool
	// ending is set while the drill stops the client (a fault, the
	// close); closed once it closed. A client that exits on its own —
	// it gives up when no name server answers at start — is started
	// again a second later, as a service manager would.
	ending, closed bool
	pending        map[string]bool // attempted, not answered yet
	acks           []ledger.Ack
	failed         []string
	recvs          []ledger.Consumption
	consumed       map[string]bool
}

// startPeer creates the workload's topic on every group and starts the
// client in the first IDC.
func startPeer(ctx context.Context, c *cluster, spec peerSpec, interval time.Duration, cfg client.ClientConfig) (*peerWork, error) {
	err := withAdmin(ctx, cfg, "creating the topic "+spec.topic, func(adm *admin.Client) error {
		return adm.CreateTopic(ctx, admin.TopicSpec{Topic: spec.topic, Queues: stockQueues})
	})
	if err != nil {
		return nil, err
	}
	home := c.idcs[0]
	name := strings.TrimPrefix(spec.target, "/")
	w := &peerWork{spec: spec, idc: home, interval: interval, pending: map[string]bool{}, consumed: map[string]bool{},
		logPath: filepath.Join(c.workDir, home.name+"-"+name+".log"), home: filepath.Join(c.workDir, name+"-home")}
	if err := os.MkdirAll(w.home, 0o755); err != nil {
		return nil, err
	}
	return w, w.start(ctx)
}

func (w *peerWork) String() string { return w.idc.name + w.spec.target }

// start launches the client; each run sends keys of its own (stock-<run>-n).
func (w *peerWork) start(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd != nil || w.closed {
		return nil // running (a restart of its own came first), or closed
	}
	logFile, err := os.OpenFile(w.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	w.gen++
	newCmd := exec.Command
	if w.idc.broker.command != nil {
		newCmd = w.idc.broker.command // its IDC's network namespace
	}
	cmd := newCmd(w.spec.binary, w.spec.args(w.idc, w.gen, w.interval)...)
	cmd.Env = append(os.Environ(), "HOME="+w.home)
	cmd.Stderr = logFile
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig, cmd.SysProcAttr.Setpgid = syscall.SIGKILL, true
	stdout, err := cmd.StdoutPipe()
	if err == nil {
		w.stdin, err = cmd.StdinPipe()
	}
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", w, err)
	}
	if w.stopSend {
		fmt.Fprintln(w.stdin, "stop")
	}
	exited := make(chan struct{})
	w.cmd, w.exited = cmd, exited
	go func() {
		w.read(stdout, logFile)
		cmd.Wait()
		w.mu.Lock()
		// A send the process did not answer may have been stored.
		for k := range w.pending {
			w.failed = append(w.failed, k)
		}
		clear(w.pending)
		restart := !w.ending && !w.closed && w.cmd == cmd
		if restart {
			w.cmd, w.stdin = nil, nil
			fmt.Fprintf(logFile, "drill: the client exited on its own (%v); starting it again in 1s\n", cmd.ProcessState)
		}
		w.mu.Unlock()
		logFile.Close()
		close(exited)
		if restart {
			time.AfterFunc(time.Second, w.restartOnItsOwn)
		}
	}()
	return nil
}

// restartOnItsOwn starts the client again after it exited on its own,
// retrying every second while it cannot start.
func (w *peerWork) restartOnItsOwn() {
	if err := w.start(context.Background()); err != nil {
		time.AfterFunc(time.Second, w.restartOnItsOwn)
	}
}

// stockLine is one line of test/rmqpeer's (and test/v5peer chaos's) output.
type stockLine struct {
	Op          string `json:"op"`
	Key         string `json:"key"`
	Broker      string `json:"broker"`
	QueueID     int    `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	StartNs     int64  `json:"startNs"`
	EndNs       int64  `json:"endNs"`
	TS          int64  `json:"ts"`
	Err         string `json:"err"`
}

// read records the client's lines until its stdout closes.
func (w *peerWork) read(r io.Reader, log io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var l stockLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Key == "" {
			fmt.Fprintf(log, "drill: %s: %s\n", w, sc.Bytes())
			continue
		}
		w.mu.Lock()
		switch l.Op {
		case "attempt":
			w.pending[l.Key] = true
		case "send":
			delete(w.pending, l.Key)
			w.acks = append(w.acks, ledger.Ack{Key: l.Key, Group: l.Broker, Queue: l.QueueID, Offset: l.QueueOffset,
				SentAt: time.Unix(0, l.StartNs), AckedAt: time.Unix(0, l.EndNs)})
		case "fail":
			delete(w.pending, l.Key)
			w.failed = append(w.failed, l.Key)
		case "recv":
			w.consumed[l.Key] = true
			w.recvs = append(w.recvs, ledger.Consumption{Key: l.Key, Consumer: w.String(), Group: l.Broker,
				Queue: l.QueueID, Offset: l.QueueOffset, At: time.UnixMilli(l.TS)})
		default:
			fmt.Fprintf(log, "drill: %s: %s\n", w, sc.Bytes())
		}
		w.mu.Unlock()
	}
}

// snapshot returns what the client reported: acknowledged sends,
// deliveries, and the keys of sends that failed or went unanswered.
func (w *peerWork) snapshot() ([]ledger.Ack, []ledger.Consumption, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	failed := append([]string(nil), w.failed...)
	for k := range w.pending {
		failed = append(failed, k)
	}
	return append([]ledger.Ack(nil), w.acks...), append([]ledger.Consumption(nil), w.recvs...), failed
}

// flowing reports whether the client has had a message delivered.
func (w *peerWork) flowing() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.recvs) > 0
}

// unconsumed is how many acknowledged sends were not delivered yet.
func (w *peerWork) unconsumed() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, a := range w.acks {
		if !w.consumed[a.Key] {
			n++
		}
	}
	return n
}

// stopSending ends the sending; the consumer goes on (a restart too).
func (w *peerWork) stopSending() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopSend = true
	if w.stdin != nil {
		fmt.Fprintln(w.stdin, "stop")
	}
}

// signal sends sig to the running client.
func (w *peerWork) signal(sig syscall.Signal) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil {
		return nil // down between a run of its own and its restart: nothing to signal
	}
	if err := w.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

func (w *peerWork) kill() error { return w.end(syscall.SIGKILL, 0) }

func (w *peerWork) terminate(grace time.Duration) error { return w.end(syscall.SIGTERM, grace) }

// end signals the client and waits until it exited (SIGKILL after grace).
func (w *peerWork) end(sig syscall.Signal, grace time.Duration) error {
	w.mu.Lock()
	cmd, exited := w.cmd, w.exited
	w.ending = cmd != nil
	w.mu.Unlock()
	if cmd == nil {
		return nil
	}
	cmd.Process.Signal(syscall.SIGCONT) // a paused client cannot stop
	cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(grace):
		cmd.Process.Kill()
		<-exited
	}
	w.mu.Lock()
	w.cmd, w.stdin, w.ending = nil, nil, false
	w.mu.Unlock()
	return nil
}

// close stops the client for good.
func (w *peerWork) close(context.Context) {
	if w != nil {
		w.terminate(10 * time.Second)
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		w.terminate(10 * time.Second) // one that restarted meanwhile
	}
}
