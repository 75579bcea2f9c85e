package drill

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Ports the drill's processes listen on; IDC n uses 127.0.n.1, so the same
// port serves every IDC. They differ from `zonemq dev`'s so both can run.
const (
	drillAddrsrvPort = 28080
	drillNamesrvPort = 29876
	drillBrokerPort  = 20911
)

// idcProcs are the server processes of one IDC.
type idcProcs struct {
	name    string
	ip      string
	addrsrv *proc
	namesrv *proc
	broker  *proc
}

func (i *idcProcs) addrsrvURL() string { return "http://" + i.addrsrv.addr }

// cluster is a whole multi-IDC deployment as separate processes.
type cluster struct {
	binary  string
	workDir string
	idcs    []*idcProcs
}

func idcName(n int) string { return fmt.Sprintf("idc%d", n) }

// newCluster lays out n IDCs under workDir; nothing is started yet.
func newCluster(binary, workDir string, n int, portOffset int) (*cluster, error) {
	c := &cluster{binary: binary, workDir: workDir}
	var namesrvs []string
	for i := 1; i <= n; i++ {
		ip := fmt.Sprintf("127.0.%d.1", i)
		namesrvs = append(namesrvs, fmt.Sprintf("%s=%s:%d", idcName(i), ip, drillNamesrvPort+portOffset))
	}
	for i := 1; i <= n; i++ {
		name, ip := idcName(i), fmt.Sprintf("127.0.%d.1", i)
		dir := filepath.Join(workDir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		addrsrvAddr := fmt.Sprintf("%s:%d", ip, drillAddrsrvPort+portOffset)
		namesrvAddr := fmt.Sprintf("%s:%d", ip, drillNamesrvPort+portOffset)
		brokerAddr := fmt.Sprintf("%s:%d", ip, drillBrokerPort+portOffset)
		c.idcs = append(c.idcs, &idcProcs{
			name: name,
			ip:   ip,
			addrsrv: newProc(binary, workDir, roleAddrsrv, name, addrsrvAddr, []string{
				"--listen", addrsrvAddr, "--idc", name,
				"--namesrv", strings.Join(namesrvs, ","), "--probe-interval", "1s",
			}),
			namesrv: newProc(binary, workDir, roleNamesrv, name, namesrvAddr, []string{
				"--listen", namesrvAddr, "--idc", name,
				"--kv-config", filepath.Join(dir, "namesrv", "kvConfig.json"),
			}),
			broker: newProc(binary, workDir, roleBroker, name, brokerAddr, []string{
				"--listen", brokerAddr, "--idc", name, "--name", "broker-" + name,
				"--data", filepath.Join(dir, "broker"), "--addrsrv", "http://" + addrsrvAddr,
				"--flush", "sync",
			}),
		})
	}
	return c, nil
}

// start starts every IDC's name server, address server and broker.
func (c *cluster) start(ctx context.Context) error {
	for _, i := range c.idcs {
		if err := i.namesrv.start(ctx); err != nil {
			return err
		}
	}
	for _, i := range c.idcs {
		if err := i.addrsrv.start(ctx); err != nil {
			return err
		}
	}
	for _, i := range c.idcs {
		if err := i.broker.start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// close stops every process, killing what does not stop in time.
func (c *cluster) close() {
	for _, i := range c.idcs {
		for _, p := range []*proc{i.broker, i.addrsrv, i.namesrv} {
			if err := p.terminate(10 * time.Second); err != nil {
				p.kill()
			}
		}
	}
}

// resume un-hangs p if it was stopped; a no-op otherwise.
func resume(p *proc) {
	p.mu.Lock()
	stopped := p.stopped && p.cmd != nil
	p.mu.Unlock()
	if stopped {
		p.signal(syscall.SIGCONT)
	}
}
