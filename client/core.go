package client

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/idc"
	"github.com/zonemq/zonemq/internal/member"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Lifecycle states of a client.
const (
	stateNew = iota
	stateRunning
	stateShutdown
)

// core is the machinery every client type shares: the connections, the
// name-server list with its heartbeats, and the route table. Each Producer,
// PushConsumer, PullConsumer and Conn owns one core; nothing is shared
// between clients, so one client's shutdown never disturbs another.
type core struct {
	cfg    ClientConfig
	role   string // protocol.ClientRole*, for the name-server heartbeat
	logger *slog.Logger
	rc     *remoting.Client
	ns     *nameServers
	routes *routeTable
	// secret is ClusterSecretFile's cluster secret, or nil.
	secret *member.Secret

	// groups lists the client's groups for the name-server heartbeat.
	groups func() []string

	mu       sync.Mutex
	state    int
	clientID string

	ctx    context.Context // ends at shutdown; parent of every loop
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newCore(cfg ClientConfig, role string) (*core, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	c := &core{cfg: cfg, role: role}
	if cfg.ClusterSecretFile != "" {
		if c.secret, err = member.LoadSecret(cfg.ClusterSecretFile); err != nil {
			return nil, &ConfigError{"ClusterSecretFile", err.Error()}
		}
	}
	c.logger = cfg.Logger.With("role", "client", "kind", role, "idc", cfg.IDC)
	dial := cfg.Dial
	if dial == nil {
		d := &net.Dialer{KeepAlive: 15 * time.Second}
		if cfg.LocalIP != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(cfg.LocalIP)}
		}
		dial = d.DialContext
	}
	if cfg.TLS != nil {
		dial = remoting.TLSDialer(cfg.TLS, dial)
	}
	c.rc = remoting.NewClient(remoting.ClientOptions{
		DialTimeout: cfg.DialTimeout,
		Logger:      c.logger,
		Dial:        dial,
	})
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.ns = newNameServers(c)
	c.routes = newRouteTable(c)
	c.groups = func() []string { return nil }
	return c, nil
}

// start learns the name servers, fixes the client id and starts the shared
// loops. It fails if no name server is known.
func (c *core) start(ctx context.Context) error {
	c.mu.Lock()
	switch c.state {
	case stateRunning:
		c.mu.Unlock()
		return errors.New("zonemq client: already started")
	case stateShutdown:
		c.mu.Unlock()
		return ErrShutdown
	}
	c.mu.Unlock()

	if err := c.ns.refresh(ctx); err != nil {
		return err
	}
	if err := c.ns.checkIDC(); err != nil {
		return err
	}
	id := idc.FormatClientID(c.localIP(ctx), c.cfg.InstanceName, c.cfg.IDC)

	c.mu.Lock()
	if c.state != stateNew {
		c.mu.Unlock()
		return ErrShutdown
	}
	c.clientID = id
	c.state = stateRunning
	c.mu.Unlock()
	c.logger = c.logger.With("client", id)
	c.logger.Info("client starting", "nameServers", c.ns.addrs())

	c.goLoop(c.ns.refreshLoop)
	if c.role != "" {
		c.goLoop(c.ns.heartbeatLoop)
	}
	c.goLoop(c.routes.refreshLoop)
	return nil
}

// goLoop runs fn on its own goroutine until the client shuts down. After
// shutdown has begun it starts nothing: stop may already be waiting.
func (c *core) goLoop(fn func(ctx context.Context)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == stateShutdown {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn(c.ctx)
	}()
}

// running reports ErrNotStarted / ErrShutdown unless the client runs.
func (c *core) running() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state {
	case stateNew:
		return ErrNotStarted
	case stateShutdown:
		return ErrShutdown
	}
	return nil
}

// id is the client id (valid once started).
func (c *core) id() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clientID
}

// stop ends every loop and closes every connection. It waits for the loops
// unless ctx ends first. It reports whether this call did the stopping.
func (c *core) stop(ctx context.Context) (bool, error) {
	c.mu.Lock()
	if c.state == stateShutdown {
		c.mu.Unlock()
		return false, nil
	}
	c.state = stateShutdown
	c.mu.Unlock()
	c.cancel()
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		c.rc.Close()
		close(done)
	}()
	select {
	case <-done:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// localIP is the ip part of the client id: LocalIP if configured, else the
// local address of a connection to the first reachable name server (that
// connection is kept; the heartbeat uses it).
func (c *core) localIP(ctx context.Context) string {
	if c.cfg.LocalIP != "" {
		return c.cfg.LocalIP
	}
	for _, addr := range c.ns.candidates() {
		cn, err := c.rc.Conn(ctx, addr)
		if err != nil {
			continue
		}
		if host, _, err := net.SplitHostPort(cn.LocalAddr()); err == nil {
			return host
		}
	}
	return localIPv4().String()
}

// invoke sends req to addr and waits at most timeout (and ctx). A timeout
// closes the connection: a peer that does not answer in time is treated as
// hung, so the next request dials afresh instead of queueing behind it.
// Transport failures come back as ErrTimeout / ErrUnreachable.
func (c *core) invoke(ctx context.Context, addr string, req *remoting.Command, timeout time.Duration) (*remoting.Command, error) {
	// Only our own timeout says the peer is hung; a caller's nearer deadline
	// says nothing about it.
	own := true
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		own = false
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	code := protocol.RequestCode(req.Code)
	resp, err := c.rc.Invoke(ictx, addr, c.sign(req))
	switch {
	case err == nil:
		return resp, nil
	case errors.Is(err, remoting.ErrTimeout) || errors.Is(err, context.DeadlineExceeded):
		if own {
			c.rc.CloseConn(addr)
		}
		return nil, transportError(code.String(), addr, remoting.ErrTimeout)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	return nil, transportError(code.String(), addr, err)
}

// request builds a request command with typed ext fields. Its header goes
// in RocketMQ's binary encoding: a third of the bytes of JSON and several
// times cheaper to encode and decode (docs/benchmarks.md), understood by
// zonemq and Java servers alike; responses come back in it too.
func request(code protocol.RequestCode, ext map[string]string, body []byte) *remoting.Command {
	req := remoting.NewRequest(int32(code), ext, body)
	req.Serialize = remoting.SerializeRocketMQ
	return req
}

// sign returns req signed for the ACL when the client has credentials,
// else req itself. It signs a copy, so one request may be sent to several
// servers at once; call it last, after every field and the body are final.
// With a cluster secret (an operator's tool) the member MAC goes first, so
// the ACL signature covers it.
func (c *core) sign(req *remoting.Command) *remoting.Command {
	if c.cfg.AccessKey == "" && c.secret == nil {
		return req
	}
	signed := *req
	signed.ExtFields = make(map[string]string, len(req.ExtFields)+4)
	maps.Copy(signed.ExtFields, req.ExtFields)
	c.secret.Sign(signed.Code, signed.ExtFields, signed.Body, time.Now())
	if c.cfg.AccessKey != "" {
		acl.Sign(signed.Code, signed.ExtFields, signed.Body, c.cfg.AccessKey, c.cfg.SecretKey, time.Now())
	}
	return &signed
}
