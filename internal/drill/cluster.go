package drill

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/zonemq/zonemq/internal/member"
)

// Ports the drill's processes listen on; IDC n uses 127.0.n.1, so the same
// port serves every IDC. They differ from `zonemq dev`'s so both can run.
const (
	drillAddrsrvPort = 28080
	drillNamesrvPort = 29876
	drillBrokerPort  = 20911
	drillProxyPort   = 28081
)

// idcProcs are the server processes of one IDC.
type idcProcs struct {
	name    string
	ip      string
	dir     string // its data
	addrsrv *proc
	namesrv *proc
	broker  *proc
	// proxy is the IDC's gRPC access point for the RocketMQ 5 clients,
	// nil unless the layout asks for one.
	proxy *proc
	// replicas are the replica brokers this IDC hosts for other IDCs'
	// broker groups (Options.Replicas > 1).
	replicas []*proc
	// dial, under --netns, opens connections from inside this IDC's network
	// namespace (netns.go); nil on loopback.
	dial dialFunc
	// addrsrvs are every IDC's address server URL, this IDC's first: what
	// its clients are given, as docs/cli.md tells users to, so a client
	// that starts while its own IDC's address server is down still finds
	// the cluster (the chaos campaign found a consumer that could not
	// restart while only its own was listed).
	addrsrvs []string
}

// servers lists every server process of the IDC, brokers first.
func (i *idcProcs) servers() []*proc {
	ps := append(append([]*proc{i.broker}, i.replicas...), i.addrsrv, i.namesrv)
	if i.proxy != nil {
		ps = append(ps, i.proxy)
	}
	return ps
}

func (i *idcProcs) addrsrvURL() string { return "http://" + i.addrsrv.addr }

// cluster is a whole multi-IDC deployment as separate processes.
type cluster struct {
	binary  string
	workDir string
	// secretFile is the cluster secret every server and the drill's
	// admin tools use (docs/security.md): the drill runs authenticated.
	secretFile string
	idcs       []*idcProcs
	// controllerAddrs are the voters' request addresses (IDC order) in
	// controller mode; empty otherwise.
	controllerAddrs []string
}

// clusterLayout is what newCluster lays out.
type clusterLayout struct {
	idcs, replicas, portOffset int
	// controller runs a voter in every IDC's name server and makes the
	// brokers report to them; minInSync is then the brokers'
	// --min-insync-replicas (0: the broker's default).
	controller bool
	minInSync  int
	// proxies runs a gRPC access point in every IDC (the RocketMQ 5
	// client workload needs them).
	proxies bool
}

func idcName(n int) string { return fmt.Sprintf("idc%d", n) }

// loopbackIP is IDC n's address on loopback, 127.0.n.1.
func loopbackIP(n int) string { return fmt.Sprintf("127.0.%d.1", n) }

// newCluster lays out n IDCs under workDir; nothing is started yet.
// ipOf gives IDC n's address (loopbackIP, or netns.Addr under --netns).
func newCluster(binary, workDir string, l clusterLayout, ipOf func(int) string) (*cluster, error) {
	n, replicas, portOffset := l.idcs, l.replicas, l.portOffset
	c := &cluster{binary: binary, workDir: workDir, secretFile: filepath.Join(workDir, "cluster.secret")}
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Stat(c.secretFile); os.IsNotExist(err) {
		if _, err := member.WriteSecretFile(c.secretFile); err != nil {
			return nil, err
		}
	}
	var namesrvs, raftPeers []string
	for i := 1; i <= n; i++ {
		ip := ipOf(i)
		namesrvs = append(namesrvs, fmt.Sprintf("%s=%s:%d", idcName(i), ip, drillNamesrvPort+portOffset))
		raftPeers = append(raftPeers, fmt.Sprintf("%s=%s:%d", idcName(i), ip, drillRaftPort+portOffset))
		if l.controller {
			c.controllerAddrs = append(c.controllerAddrs, fmt.Sprintf("%s:%d", ip, drillControllerPort+portOffset))
		}
	}
	// groupArgs are the flags every member of a broker group shares.
	groupArgs := []string{"--cluster-secret-file", c.secretFile}
	if replicas > 1 {
		groupArgs = append(groupArgs, "--replication", "sync")
	}
	if l.controller {
		groupArgs = append(groupArgs, "--controller", strings.Join(c.controllerAddrs, ","))
		if l.minInSync > 0 {
			groupArgs = append(groupArgs, "--min-insync-replicas", fmt.Sprint(l.minInSync))
		}
	}
	for i := 1; i <= n; i++ {
		name, ip := idcName(i), ipOf(i)
		dir := filepath.Join(workDir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		addrsrvAddr := fmt.Sprintf("%s:%d", ip, drillAddrsrvPort+portOffset)
		namesrvAddr := fmt.Sprintf("%s:%d", ip, drillNamesrvPort+portOffset)
		brokerAddr := fmt.Sprintf("%s:%d", ip, drillBrokerPort+portOffset)
		brokerArgs := []string{"--listen", brokerAddr, "--idc", name, "--name", "broker-" + name,
			"--data", filepath.Join(dir, "broker"), "--addrsrv", "http://" + addrsrvAddr, "--flush", "sync"}
		brokerArgs = append(brokerArgs, groupArgs...)
		namesrvArgs := []string{"--listen", namesrvAddr, "--idc", name,
			"--kv-config", filepath.Join(dir, "namesrv", "kvConfig.json"), "--cluster-secret-file", c.secretFile}
		if l.controller {
			namesrvArgs = append(namesrvArgs, controllerArgs(ip, name, dir, raftPeers, portOffset)...)
		}
		c.idcs = append(c.idcs, &idcProcs{
			name: name,
			ip:   ip,
			dir:  dir,
			addrsrv: newProc(binary, workDir, roleAddrsrv, name, addrsrvAddr, []string{
				"--listen", addrsrvAddr, "--idc", name,
				"--namesrv", strings.Join(namesrvs, ","), "--probe-interval", "1s",
			}),
			namesrv: newProc(binary, workDir, roleNamesrv, name, namesrvAddr, namesrvArgs),
			broker:  newProc(binary, workDir, roleBroker, name, brokerAddr, brokerArgs),
		})
	}
	for _, i := range c.idcs {
		i.addrsrvs = []string{i.addrsrvURL()}
		for _, o := range c.idcs {
			if o != i {
				i.addrsrvs = append(i.addrsrvs, o.addrsrvURL())
			}
		}
		if l.proxies {
			addr := fmt.Sprintf("%s:%d", i.ip, drillProxyPort+portOffset)
			i.proxy = newProc(binary, workDir, roleProxy, i.name, addr, []string{"--listen", addr, "--idc", i.name,
				"--addrsrv", strings.Join(i.addrsrvs, ","), "--cluster-secret-file", c.secretFile})
		}
	}
	// Replica k of IDC g's broker group lives in IDC g+k, on the broker
	// port + k.
	for g := 1; g <= n; g++ {
		for k := 1; k < replicas; k++ {
			host := c.idcs[(g-1+k)%n]
			group := "broker-" + idcName(g)
			addr := fmt.Sprintf("%s:%d", host.ip, drillBrokerPort+portOffset+k)
			p := newProc(binary, workDir, roleBroker, host.name, addr, append([]string{
				"--listen", addr, "--idc", host.name, "--name", group, "--id", fmt.Sprint(k),
				"--data", filepath.Join(host.dir, "replica-of-"+group), "--addrsrv", host.addrsrvURLFor(portOffset),
				"--flush", "sync"}, groupArgs...))
			p.logPath = filepath.Join(workDir, fmt.Sprintf("%s-replica-of-%s.log", host.name, group))
			host.replicas = append(host.replicas, p)
		}
	}
	return c, nil
}

// addrsrvURLFor is the IDC's address server URL before its proc exists.
func (i *idcProcs) addrsrvURLFor(portOffset int) string {
	return fmt.Sprintf("http://%s:%d", i.ip, drillAddrsrvPort+portOffset)
}

// start starts every IDC's name server, address server and broker.
func (c *cluster) start(ctx context.Context) error {
	for _, i := range c.idcs {
		if err := i.namesrv.start(ctx); err != nil {
			return err
		}
		// A voter that restarts, even on an empty disk, rejoins the
		// cluster it belongs to; only the first start bootstraps it.
		i.namesrv.args = slices.DeleteFunc(i.namesrv.args, func(a string) bool { return a == "--bootstrap" })
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
	for _, i := range c.idcs {
		for _, r := range i.replicas {
			if err := r.start(ctx); err != nil {
				return err
			}
		}
	}
	for _, i := range c.idcs {
		if i.proxy != nil {
			if err := i.proxy.start(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// close stops every process, killing what does not stop in time.
func (c *cluster) close() {
	for _, i := range c.idcs {
		for _, p := range i.servers() {
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
