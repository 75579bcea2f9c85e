// Package devcluster runs whole IDCs inside one process — per IDC an address
// server, a name server and a broker — for tests and `zonemq dev`.
//
// IDC n ("idc<n>", n from 1) lives on the loopback address 127.0.n.1, so a
// process's IDC shows in its address. Its address server lists every IDC's
// name server; its broker ("broker-idc<n>") learns the name servers from its
// own IDC's address server and registers with all of them, as in a real
// deployment.
//
// # Ports
//
// With Options.BasePort = 0 every server binds a free port (tests). With a
// BasePort B, IDC n's servers listen on fixed ports of 127.0.n.1:
//
//	address server  B+8080   (B = 10000: 18080)
//	name server     B+9876   (B = 10000: 19876)
//	broker          B+911    (B = 10000: 10911)
//	replica k       B+911+k  (B = 10000: 10912, …)
//
// so printed commands keep working across restarts.
//
// # Controller
//
// With Options.Controller, every IDC's name server also runs a
// failover-controller voter (as `zonemq namesrv --controller` does), on
// B+9880 (requests) and B+9881 (Raft) of 127.0.n.1, one voter per IDC,
// data under DataDir/idc<n>/controller; every broker reports to all of
// them and the controller elects a group's master (docs/controller.md).
// Stopping an IDC's name server stops its voter too.
//
// # Replicas
//
// With Options.Replicas = R > 1, IDC n's broker group also has replicas
// (ids 1..R-1) in the next R-1 IDCs: the replica with id k of
// broker-idc<n> runs in IDC n+k (wrapping around) on port B+911+k. An
// IDC's servers are then its own group's master plus the replicas it hosts
// for the groups of the IDCs before it. A stopped server
// restarts on the address it had, with the same data directory.
package devcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/addrsrv"
	"github.com/zonemq/zonemq/internal/broker"
	"github.com/zonemq/zonemq/internal/controller"
	"github.com/zonemq/zonemq/internal/member"
	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/proxy"
	"github.com/zonemq/zonemq/internal/store"
)

// Options configures a Cluster.
type Options struct {
	// IDCs is how many IDCs to run; zero means 2. At most 254.
	IDCs int
	// DataDir holds every broker's data (DataDir/idc<n>/broker) and name
	// server's KV config. Empty means a temporary directory removed by
	// Close.
	DataDir string
	// BasePort selects fixed ports (see the package comment); zero means
	// free ports.
	BasePort int
	// Logger receives every server's log; nil discards it.
	Logger *slog.Logger
	// BrokerFlush is the brokers' flush policy; the zero value is
	// store.FlushAsync.
	BrokerFlush store.FlushMode

	// Broker, Namesrv and Addrsrv, if set, adjust each server's options
	// (timings, limits) before it is created; n is the IDC number.
	Broker  func(n int, o *broker.Options)
	Namesrv func(n int, o *namesrv.Options)
	Addrsrv func(n int, o *addrsrv.Options)

	// Replicas is how many copies each IDC's broker group keeps, the
	// master counted (see the package comment); zero or 1 means none. At
	// most IDCs.
	Replicas int
	// Replication is the groups' acknowledgement mode
	// (broker.ReplicationAsync or ReplicationSync); empty means async.
	Replication string

	// Controller runs a failover-controller voter in every IDC's name
	// server and makes every broker report to them (see the package
	// comment).
	Controller bool

	// ReadyTimeout bounds Start's wait for every broker to be registered
	// with every name server. Zero means 20 s.
	ReadyTimeout time.Duration

	// AccessKey and SecretKey sign the cluster's own checks and go into
	// ClientConfig, for clusters whose Broker and Namesrv hooks turn the
	// ACL on (they also have to give the brokers credentials). Empty: none.
	AccessKey string
	SecretKey string
	// ClientTLS, when set, is the TLS config of the cluster's own checks and
	// of ClientConfig, for clusters whose hooks turn TLS on. Nil: plain.
	ClientTLS *tls.Config

	// AccessPoints starts a gRPC access point (internal/proxy) in every
	// IDC, for the RocketMQ 5 clients, on port BasePort+8081.
	AccessPoints bool

	// Secure authenticates the cluster's members to each other: a cluster
	// secret written to DataDir/cluster.secret (kept when it exists)
	// goes to every name server, broker and voter (docs/security.md).
	// SecretFile names it for an operator's admin tools; ClientConfig does
	// not carry it (applications need none).
	Secure bool
}

// Cluster is a running multi-IDC cluster. Its methods are safe for
// concurrent use.
type Cluster struct {
	opts    Options
	dataDir string
	tempDir bool
	logger  *slog.Logger

	// secret is the cluster secret with Options.Secure, else nil.
	secret *member.Secret

	mu     sync.Mutex
	idcs   []*idcNode
	closed bool
}

// idcNode is one IDC's three servers. Each server runs on its own goroutine;
// its done channel closes when Run returned.
type idcNode struct {
	n    int
	name string
	host string

	addrsrvAddr, namesrvAddr, brokerAddr string

	addrsrv     *addrsrv.Server
	addrsrvDone chan struct{}
	namesrv     *namesrv.Server
	namesrvDone chan struct{}
	broker      *broker.Server
	brokerDone  chan struct{}

	// replicas are the replicas this IDC hosts for other IDCs' groups.
	replicas []*replicaNode

	// The controller voter (Options.Controller), stopped and started with
	// the name server.
	controllerAddr, raftAddr string
	controller               *controller.Server
	controllerDone           chan struct{}

	// accessPoint is the IDC's gRPC access point (Options.AccessPoints).
	accessPoint *proxy.Server
}

// replicaNode is one replica broker: member id of group's broker group.
type replicaNode struct {
	group int // the IDC whose broker group it belongs to
	id    int64
	addr  string
	srv   *broker.Server
	done  chan struct{}
}

// Start runs opts.IDCs IDCs and returns once every broker is registered with
// every name server. On error everything started is stopped again.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.IDCs == 0 {
		opts.IDCs = 2
	}
	if opts.IDCs < 1 || opts.IDCs > 254 {
		return nil, fmt.Errorf("devcluster: IDCs is %d; it must be within 1..254", opts.IDCs)
	}
	if opts.BasePort < 0 || opts.BasePort+9876 > 65535 {
		return nil, fmt.Errorf("devcluster: BasePort %d leaves no room for port BasePort+9876", opts.BasePort)
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 20 * time.Second
	}
	if opts.Replicas < 0 || opts.Replicas > opts.IDCs {
		return nil, fmt.Errorf("devcluster: Replicas is %d; it must be within 1..IDCs (%d)", opts.Replicas, opts.IDCs)
	}
	c := &Cluster{opts: opts, dataDir: opts.DataDir, logger: opts.Logger}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.dataDir == "" {
		dir, err := os.MkdirTemp("", "zonemq-dev-")
		if err != nil {
			return nil, fmt.Errorf("devcluster: %w", err)
		}
		c.dataDir, c.tempDir = dir, true
	}
	if opts.Secure {
		var err error
		if c.secret, err = loadOrWriteSecret(c.SecretFile()); err != nil {
			c.Close()
			return nil, fmt.Errorf("devcluster: %w", err)
		}
	}
	for n := 1; n <= opts.IDCs; n++ {
		c.idcs = append(c.idcs, &idcNode{n: n, name: IDCName(n), host: fmt.Sprintf("127.0.%d.1", n)})
	}
	for n := 1; n <= opts.IDCs; n++ {
		for k := 1; k < opts.Replicas; k++ {
			host := c.idcs[(n-1+k)%opts.IDCs]
			host.replicas = append(host.replicas, &replicaNode{group: n, id: int64(k)})
		}
	}
	// Name servers first: the address servers list them, the brokers
	// register with them.
	for _, node := range c.idcs {
		if err := c.startNamesrvLocked(node); err != nil {
			c.Close()
			return nil, err
		}
	}
	if opts.Controller {
		if err := c.bootstrapControllers(); err != nil {
			c.Close()
			return nil, err
		}
	}
	for _, node := range c.idcs {
		if err := c.startAddrsrvLocked(node); err != nil {
			c.Close()
			return nil, err
		}
	}
	for _, node := range c.idcs {
		if err := c.startBrokerLocked(node); err != nil {
			c.Close()
			return nil, err
		}
	}
	for _, node := range c.idcs {
		if err := c.startReplicasLocked(node); err != nil {
			c.Close()
			return nil, err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	if err := c.WaitRegistered(rctx); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.WaitReplicasInSync(rctx); err != nil {
		c.Close()
		return nil, err
	}
	if opts.Controller {
		if err := c.WaitMastersElected(rctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	if opts.AccessPoints {
		for _, node := range c.idcs {
			cc := c.ClientConfig(node.n)
			cc.Logger = c.logger
			ap, err := proxy.Start(rctx, proxy.Config{Listen: c.listenAddr(node, "", 8081), IDC: node.name, Cluster: cc,
				Logger: c.logger})
			if err != nil {
				c.Close()
				return nil, fmt.Errorf("devcluster: access point of %s: %w", node.name, err)
			}
			c.mu.Lock()
			node.accessPoint = ap
			c.mu.Unlock()
		}
	}
	return c, nil
}

// AccessPointAddr is IDC n's gRPC access point ("" without
// Options.AccessPoints).
func (c *Cluster) AccessPointAddr(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ap := c.node(n).accessPoint; ap != nil {
		return ap.Addr()
	}
	return ""
}

// WaitReplicasInSync waits until every running master counts every replica
// of its group as in sync, so acknowledged sends have every copy.
func (c *Cluster) WaitReplicasInSync(ctx context.Context) error {
	want := c.Replicas() - 1
	if want == 0 {
		return nil
	}
	for {
		c.mu.Lock()
		lagging := ""
		for _, node := range c.idcs {
			if node.broker != nil && node.broker.IsMaster() && node.broker.InSyncReplicas() < want {
				lagging = node.name
				break
			}
		}
		c.mu.Unlock()
		if lagging == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devcluster: the replicas of %s's broker are not in sync", lagging)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// IDCName is the name of IDC n: "idc<n>".
func IDCName(n int) string { return fmt.Sprintf("idc%d", n) }

// BrokerName is the name of IDC n's broker: "broker-idc<n>".
func BrokerName(n int) string { return "broker-" + IDCName(n) }

// IDCs is the number of IDCs.
func (c *Cluster) IDCs() int { return len(c.idcs) }

// DataDir is the cluster's data directory.
func (c *Cluster) DataDir() string { return c.dataDir }

func (c *Cluster) node(n int) *idcNode {
	if n < 1 || n > len(c.idcs) {
		panic(fmt.Sprintf("devcluster: no IDC %d (the cluster has %d)", n, len(c.idcs)))
	}
	return c.idcs[n-1]
}

// Host is IDC n's loopback address, 127.0.n.1.
func (c *Cluster) Host(n int) string { return c.node(n).host }

// AddrsrvURL is the base URL of IDC n's address server.
func (c *Cluster) AddrsrvURL(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return "http://" + c.node(n).addrsrvAddr
}

// AddrsrvURLs lists every address server's URL, IDC n's first (n = 0: in
// IDC order).
func (c *Cluster) AddrsrvURLs(n int) []string {
	var out []string
	if n > 0 {
		out = append(out, c.AddrsrvURL(n))
	}
	for m := 1; m <= len(c.idcs); m++ {
		if m != n {
			out = append(out, c.AddrsrvURL(m))
		}
	}
	return out
}

// NamesrvAddr is IDC n's name server address.
func (c *Cluster) NamesrvAddr(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.node(n).namesrvAddr
}

// NamesrvAddrs lists every name server, in IDC order.
func (c *Cluster) NamesrvAddrs() []string {
	var out []string
	for m := 1; m <= len(c.idcs); m++ {
		out = append(out, c.NamesrvAddr(m))
	}
	return out
}

// BrokerAddr is IDC n's broker address.
func (c *Cluster) BrokerAddr(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.node(n).brokerAddr
}

// QueueLockOwners is IDC n's broker's lock table for group, as
// "topic#queue" → owner client id; nil while that broker is stopped.
func (c *Cluster) QueueLockOwners(n int, group string) map[string]string {
	c.mu.Lock()
	srv := c.node(n).broker
	c.mu.Unlock()
	if srv == nil {
		return nil
	}
	out := map[string]string{}
	for mq, owner := range srv.QueueLockOwners(group) {
		out[fmt.Sprintf("%s#%d", mq.Topic, mq.QueueID)] = owner
	}
	return out
}

// ClientConfig is a client config for a client living in IDC n: its own
// IDC's address server first, then the others, and connections bound to
// 127.0.n.1.
func (c *Cluster) ClientConfig(n int) client.ClientConfig {
	return client.ClientConfig{AddrsrvURLs: c.AddrsrvURLs(n), IDC: IDCName(n), LocalIP: c.Host(n),
		AccessKey: c.opts.AccessKey, SecretKey: c.opts.SecretKey, TLS: c.opts.ClientTLS}
}

func (c *Cluster) port(offset int) int {
	if c.opts.BasePort == 0 {
		return 0
	}
	return c.opts.BasePort + offset
}

// listenAddr is where a server of node binds: its previous address when it
// restarts, else the port scheme.
func (c *Cluster) listenAddr(node *idcNode, prev string, offset int) string {
	if prev != "" {
		return prev
	}
	return fmt.Sprintf("%s:%d", node.host, c.port(offset))
}

func (c *Cluster) startNamesrvLocked(node *idcNode) error {
	o := namesrv.NewOptions()
	o.Listen = c.listenAddr(node, node.namesrvAddr, 9876)
	o.IDC = node.name
	o.KVConfigPath = filepath.Join(c.dataDir, node.name, "namesrv", "kvConfig.json")
	o.Logger = c.logger
	o.ClusterSecret = c.secret
	if c.opts.Namesrv != nil {
		c.opts.Namesrv(node.n, &o)
	}
	s, err := namesrv.New(o)
	if err != nil {
		return fmt.Errorf("devcluster: %s name server: %w", node.name, err)
	}
	node.namesrv, node.namesrvAddr = s, s.Addr()
	node.namesrvDone = run(s.Run)
	if c.opts.Controller {
		return c.startControllerLocked(node)
	}
	return nil
}

func (c *Cluster) startAddrsrvLocked(node *idcNode) error {
	o := addrsrv.NewOptions()
	o.Listen = c.listenAddr(node, node.addrsrvAddr, 8080)
	o.IDC = node.name
	for _, other := range c.idcs {
		o.Namesrvs = append(o.Namesrvs, addrsrv.Namesrv{Addr: other.namesrvAddr, IDC: other.name})
	}
	o.Logger = c.logger
	if c.opts.Addrsrv != nil {
		c.opts.Addrsrv(node.n, &o)
	}
	s, err := addrsrv.New(o)
	if err != nil {
		return fmt.Errorf("devcluster: %s address server: %w", node.name, err)
	}
	node.addrsrv, node.addrsrvAddr = s, s.Addr()
	node.addrsrvDone = run(s.Run)
	return nil
}

func (c *Cluster) startBrokerLocked(node *idcNode) error {
	s, err := c.newBroker(node, BrokerName(node.n), 0, c.listenAddr(node, node.brokerAddr, 911), filepath.Join(c.dataDir, node.name, "broker"))
	if err != nil {
		return err
	}
	node.broker, node.brokerAddr = s, s.Addr()
	node.brokerDone = run(s.Run)
	return nil
}

// startReplicasLocked starts the replicas node hosts that are not running.
func (c *Cluster) startReplicasLocked(node *idcNode) error {
	for _, r := range node.replicas {
		if r.srv != nil {
			continue
		}
		name := BrokerName(r.group)
		s, err := c.newBroker(node, name, r.id, c.listenAddr(node, r.addr, 911+int(r.id)),
			filepath.Join(c.dataDir, node.name, "replica-of-"+name))
		if err != nil {
			return err
		}
		r.srv, r.addr = s, s.Addr()
		r.done = run(s.Run)
	}
	return nil
}

// newBroker creates member id of broker group name, running in node's IDC.
func (c *Cluster) newBroker(node *idcNode, name string, id int64, listen, dataDir string) (*broker.Server, error) {
	o := broker.NewOptions()
	o.Listen = listen
	o.IDC = node.name
	o.BrokerName = name
	o.BrokerID = id
	o.DataDir = dataDir
	o.Flush = c.opts.BrokerFlush
	o.ClusterSecret = c.secret
	if c.opts.Replication != "" {
		o.Replication = c.opts.Replication
	}
	o.AddrsrvURLs = nil
	o.AddrsrvURLs = append(o.AddrsrvURLs, "http://"+node.addrsrvAddr)
	for _, other := range c.idcs {
		if other != node {
			o.AddrsrvURLs = append(o.AddrsrvURLs, "http://"+other.addrsrvAddr)
		}
	}
	o.Logger = c.logger
	for _, other := range c.idcs {
		if other.controllerAddr != "" {
			o.ControllerAddrs = append(o.ControllerAddrs, other.controllerAddr)
		}
	}
	if c.opts.Broker != nil {
		c.opts.Broker(node.n, &o)
	}
	s, err := broker.New(o)
	if err != nil {
		return nil, fmt.Errorf("devcluster: %s broker %s (id %d): %w", node.name, name, id, err)
	}
	return s, nil
}

// run starts a server's Run on its own goroutine; the channel closes when
// Run returns.
func run(fn func(context.Context) error) chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(context.Background())
	}()
	return done
}

// WaitRegistered waits until every running name server lists every running
// broker.
func (c *Cluster) WaitRegistered(ctx context.Context) error {
	c.mu.Lock()
	var brokers, namesrvs []string
	for _, node := range c.idcs {
		if node.broker != nil {
			brokers = append(brokers, node.brokerAddr)
		}
		for _, r := range node.replicas {
			if r.srv != nil {
				brokers = append(brokers, r.addr)
			}
		}
		if node.namesrv != nil {
			namesrvs = append(namesrvs, node.namesrvAddr)
		}
	}
	c.mu.Unlock()
	for _, ns := range namesrvs {
		if err := waitBrokersListed(ctx, ns, brokers,
			client.ClientConfig{AccessKey: c.opts.AccessKey, SecretKey: c.opts.SecretKey, TLS: c.opts.ClientTLS}); err != nil {
			return err
		}
	}
	return nil
}

// waitBrokersListed polls one name server's cluster info until it lists
// every broker address, with cc's credentials and TLS config.
func waitBrokersListed(ctx context.Context, ns string, brokers []string, cc client.ClientConfig) error {
	adm, err := admin.New(admin.Config{ClientConfig: client.ClientConfig{NamesrvAddrs: []string{ns},
		AccessKey: cc.AccessKey, SecretKey: cc.SecretKey, TLS: cc.TLS}})
	if err != nil {
		return err
	}
	if err := adm.Start(ctx); err != nil {
		return err
	}
	defer adm.Shutdown(context.Background())
	var last error
	for {
		listed := map[string]bool{}
		st, err := adm.Cluster(ctx)
		for _, b := range st {
			if b.Alive {
				listed[b.Addr] = true
			}
		}
		last = err
		missing := ""
		for _, b := range brokers {
			if !listed[b] {
				missing = b
				break
			}
		}
		if err == nil && missing == "" {
			return nil
		}
		if err == nil {
			last = fmt.Errorf("broker %s not registered", missing)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devcluster: name server %s not ready: %v", ns, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// StopBroker shuts every broker running in IDC n down cleanly (they
// unregister first): its own group's broker and the replicas it hosts.
func (c *Cluster) StopBroker(n int) {
	c.mu.Lock()
	node := c.node(n)
	s, done := node.broker, node.brokerDone
	node.broker = nil
	var replicas []*replicaNode
	for _, r := range node.replicas {
		if r.srv != nil {
			replicas = append(replicas, &replicaNode{srv: r.srv, done: r.done})
			r.srv = nil
		}
	}
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
		<-done
	}
	for _, r := range replicas {
		r.srv.Shutdown()
		<-r.done
	}
}

// StartBroker restarts IDC n's brokers on their addresses with their data.
func (c *Cluster) StartBroker(n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("devcluster: closed")
	}
	node := c.node(n)
	if node.broker == nil {
		if err := c.startBrokerLocked(node); err != nil {
			return err
		}
	}
	return c.startReplicasLocked(node)
}

// ReplicaAddr is the address of replica id of IDC group's broker group
// ("" when there is none).
func (c *Cluster) ReplicaAddr(group int, id int64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, node := range c.idcs {
		for _, r := range node.replicas {
			if r.group == group && r.id == id {
				return r.addr
			}
		}
	}
	return ""
}

// SecretFile is the cluster secret's file (with Options.Secure): what an
// operator's admin commands that change the cluster take as
// --cluster-secret-file.
func (c *Cluster) SecretFile() string { return filepath.Join(c.dataDir, "cluster.secret") }

// Secure reports whether the cluster's members authenticate each other.
func (c *Cluster) Secure() bool { return c.secret != nil }

// loadOrWriteSecret reads the secret at path, or writes a new one there.
func loadOrWriteSecret(path string) (*member.Secret, error) {
	if _, err := os.Stat(path); err == nil {
		return member.LoadSecret(path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return member.WriteSecretFile(path)
}

// Replicas is how many copies each broker group keeps (1: none).
func (c *Cluster) Replicas() int { return max(c.opts.Replicas, 1) }

// StopNamesrv shuts IDC n's name server down.
func (c *Cluster) StopNamesrv(n int) {
	c.mu.Lock()
	node := c.node(n)
	s, done := node.namesrv, node.namesrvDone
	node.namesrv = nil
	cs, cdone := node.controller, node.controllerDone
	node.controller = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
		<-done
	}
	if cs != nil {
		cs.Shutdown()
		<-cdone
	}
}

// StartNamesrv restarts IDC n's name server on its address. Brokers
// register with it again on their next heartbeat.
func (c *Cluster) StartNamesrv(n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("devcluster: closed")
	}
	node := c.node(n)
	if node.namesrv != nil {
		return nil
	}
	return c.startNamesrvLocked(node)
}

// StopAddrsrv shuts IDC n's address server down.
func (c *Cluster) StopAddrsrv(n int) {
	c.mu.Lock()
	node := c.node(n)
	s, done := node.addrsrv, node.addrsrvDone
	node.addrsrv = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
		<-done
	}
}

// StartAddrsrv restarts IDC n's address server on its address.
func (c *Cluster) StartAddrsrv(n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("devcluster: closed")
	}
	node := c.node(n)
	if node.addrsrv != nil {
		return nil
	}
	return c.startAddrsrvLocked(node)
}

// StopIDC stops all of IDC n: broker, name server, address server.
func (c *Cluster) StopIDC(n int) {
	c.StopBroker(n)
	c.StopNamesrv(n)
	c.StopAddrsrv(n)
}

// StartIDC restarts whatever of IDC n is stopped.
func (c *Cluster) StartIDC(n int) error {
	if err := c.StartNamesrv(n); err != nil {
		return err
	}
	if err := c.StartAddrsrv(n); err != nil {
		return err
	}
	return c.StartBroker(n)
}

// Close stops every server (brokers first) and removes a temporary data
// directory. It is idempotent.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	var aps []*proxy.Server
	for _, node := range c.idcs {
		if node.accessPoint != nil {
			aps = append(aps, node.accessPoint)
		}
	}
	c.mu.Unlock()
	for _, ap := range aps {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ap.Close(ctx)
		cancel()
	}
	var wg sync.WaitGroup
	for _, stop := range []func(int){c.StopBroker, c.StopNamesrv, c.StopAddrsrv} {
		for n := 1; n <= len(c.idcs); n++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stop(n)
			}()
		}
		wg.Wait()
	}
	if c.tempDir {
		return os.RemoveAll(c.dataDir)
	}
	return nil
}
