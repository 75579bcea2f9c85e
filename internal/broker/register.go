package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Name-server peer states, logged once per change.
const (
	peerRegistered  = "registered"
	peerUnreachable = "unreachable"
	peerRejected    = "rejected"
)

// registrar keeps the broker registered with every name server: one loop
// per name server, so a slow or hung one delays nobody else. Each loop sends
// the light BROKER_HEARTBEAT every HeartbeatInterval and a full
// REGISTER_BROKER at start, every RegisterInterval, after a topic change,
// after re-dialling, and whenever a heartbeat is refused (the name server
// restarted and no longer knows the broker).
type registrar struct {
	s      *Server
	client *remoting.Client
	// tooLargeAt is when tooLarge last logged (Unix ns).
	tooLargeAt atomic.Int64

	mu      sync.Mutex
	peers   map[string]*namesrvPeer
	started bool
	stopped bool
	wg      sync.WaitGroup // peer loops
}

// namesrvPeer is one name server and its loop.
type namesrvPeer struct {
	addr    string
	kick    chan struct{} // a topic change: register at once
	cancel  context.CancelFunc
	removed bool // guarded by registrar.mu: no longer configured

	mu    sync.Mutex
	state string
}

func newRegistrar(s *Server) *registrar {
	copts := remoting.ClientOptions{DialTimeout: s.opts.NamesrvTimeout, Logger: s.logger}
	if s.opts.NamesrvTLS != nil {
		copts.Dial = remoting.TLSDialer(s.opts.NamesrvTLS, nil)
	}
	return &registrar{
		s:      s,
		client: remoting.NewClient(copts),
		peers:  map[string]*namesrvPeer{},
	}
}

// setAddrs makes the set of name servers the union of static and fetched:
// new ones get a loop at once (registering immediately), dropped ones are
// stopped and their connection closed, which makes them forget the broker.
func (r *registrar) setAddrs(static, fetched []string) {
	want := map[string]bool{}
	for _, a := range slices.Concat(static, fetched) {
		if a = strings.TrimSpace(a); a != "" {
			want[a] = true
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	for addr, p := range r.peers {
		if !want[addr] {
			r.s.logger.Info("name server no longer listed; dropping it", "namesrv", addr)
			p.removed = true
			if p.cancel != nil {
				p.cancel()
			}
			delete(r.peers, addr)
		}
	}
	for addr := range want {
		if _, ok := r.peers[addr]; ok {
			continue
		}
		p := &namesrvPeer{addr: addr, kick: make(chan struct{}, 1)}
		r.peers[addr] = p
		if r.started {
			r.s.logger.Info("new name server listed; registering", "namesrv", addr)
			r.startLocked(p)
		}
	}
}

// start starts a loop per name server.
func (r *registrar) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started || r.stopped {
		return
	}
	r.started = true
	for _, p := range r.peers {
		r.startLocked(p)
	}
}

// startLocked starts p's loop. Caller holds mu.
func (r *registrar) startLocked(p *namesrvPeer) {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.peerLoop(ctx, p)
	}()
}

// kickAll asks every loop to register the topic table now.
func (r *registrar) kickAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.peers {
		select {
		case p.kick <- struct{}{}:
		default: // a registration is already pending
		}
	}
}

// stop ends every loop and waits; connections stay open for unregisterAll.
func (r *registrar) stop() {
	r.mu.Lock()
	r.stopped = true
	for _, p := range r.peers {
		if p.cancel != nil {
			p.cancel()
		}
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// unregisterAll sends UNREGISTER_BROKER at once to every name server the
// broker is registered with and waits at most one timeout for the answers.
// Name servers that are down are skipped: they dropped the broker with its
// connection.
func (r *registrar) unregisterAll() {
	r.mu.Lock()
	addrs := make([]string, 0, len(r.peers))
	for a, p := range r.peers {
		p.mu.Lock()
		if p.state == peerRegistered {
			addrs = append(addrs, a)
		}
		p.mu.Unlock()
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), r.s.opts.NamesrvTimeout)
			defer cancel()
			resp, err := r.client.Invoke(ctx, addr, r.unregisterRequest())
			switch {
			case err != nil:
				r.s.logger.Warn("unregistering from a name server failed", "namesrv", addr, "err", err)
			case resp.Code != int32(protocol.Success):
				r.s.logger.Warn("a name server refused the unregistration", "namesrv", addr, "code", resp.Code, "remark", resp.Remark)
			default:
				r.s.logger.Info("unregistered from name server", "namesrv", addr)
			}
		}()
	}
	wg.Wait()
}

// close closes every name-server connection.
func (r *registrar) close() { r.client.Close() }

// describe renders each name server's state for runtime info.
func (r *registrar) describe() string {
	r.mu.Lock()
	parts := make([]string, 0, len(r.peers))
	for addr, p := range r.peers {
		p.mu.Lock()
		parts = append(parts, addr+"="+p.state)
		p.mu.Unlock()
	}
	r.mu.Unlock()
	sort.Strings(parts)
	return strings.Join(parts, ";")
}

// peerState is what one loop remembers between beats.
type peerState struct {
	conn         *remoting.Conn // the connection the last full registration used
	lastFull     time.Time
	lastFullTook time.Duration // how long the last full registration took
	needFull     bool
	registered   bool // a registration has succeeded at least once
}

func (r *registrar) peerLoop(ctx context.Context, p *namesrvPeer) {
	t := time.NewTicker(r.s.opts.HeartbeatInterval)
	defer t.Stop()
	var st peerState
	for {
		r.beat(ctx, p, &st, false)
		select {
		case <-ctx.Done():
			r.mu.Lock()
			removed := p.removed
			r.mu.Unlock()
			if removed {
				r.client.CloseConn(p.addr)
			}
			return
		case <-t.C:
		case <-p.kick:
			st.needFull = true
			r.paceTopicRegistration(ctx, p, &st)
		}
	}
}

// beat does one round with one name server: a heartbeat when the last full
// registration is recent and went over the current connection, otherwise
// (or when the heartbeat is refused) a full registration.
func (r *registrar) beat(ctx context.Context, p *namesrvPeer, st *peerState, retried bool) {
	timeout := r.s.opts.NamesrvTimeout
	dctx, cancel := context.WithTimeout(ctx, timeout)
	conn, err := r.client.Conn(dctx, p.addr)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			p.setState(r.s.logger, peerUnreachable, err)
		}
		st.conn = nil
		return
	}
	if conn == st.conn && !st.needFull && time.Since(st.lastFull) < r.s.opts.RegisterInterval {
		resp, err := r.invoke(ctx, p, conn, r.heartbeatRequest(), timeout)
		if err != nil {
			st.conn = nil
			if errors.Is(err, remoting.ErrConnClosed) && !retried && ctx.Err() == nil {
				// The name server went away (restart?): dial again and
				// register now rather than a heartbeat interval later.
				r.beat(ctx, p, st, true)
			}
			return
		}
		if resp.Code == int32(protocol.Success) {
			p.setState(r.s.logger, peerRegistered, nil)
			return
		}
		r.s.logger.Info("name server refused the heartbeat; registering again", "namesrv", p.addr, "code", resp.Code, "remark", resp.Remark)
	}
	if st.registered && conn != st.conn {
		r.s.logger.Info("name server connection re-established; registering again", "namesrv", p.addr)
	}
	// A register carries every topic, so it gets twice the time.
	began := time.Now()
	resp, err := r.invoke(ctx, p, conn, r.registerRequest(), 2*timeout)
	st.lastFullTook = time.Since(began)
	if err != nil {
		st.conn = nil
		return
	}
	if resp.Code != int32(protocol.Success) {
		p.setState(r.s.logger, peerRejected, fmt.Errorf("code %d: %s", resp.Code, resp.Remark))
		st.conn = nil
		return
	}
	st.conn, st.lastFull, st.needFull, st.registered = conn, time.Now(), false, true
	p.setState(r.s.logger, peerRegistered, nil)
}

// invoke sends req and waits up to timeout. A timeout closes the connection,
// so a hung name server is dialled afresh (and registered with in full) next
// time.
func (r *registrar) invoke(ctx context.Context, p *namesrvPeer, conn *remoting.Conn, req *remoting.Command, timeout time.Duration) (*remoting.Command, error) {
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := conn.Invoke(ictx, req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err // shutting down: not the name server's fault
		}
		if errors.Is(err, remoting.ErrTimeout) {
			r.client.CloseConn(p.addr)
		}
		p.setState(r.s.logger, peerUnreachable, err)
		return nil, err
	}
	return resp, nil
}

// setState records the peer's state and logs only when it changes, so a
// name server that stays down costs one line, not one per second.
func (p *namesrvPeer) setState(logger *slog.Logger, state string, err error) {
	p.mu.Lock()
	old := p.state
	p.state = state
	p.mu.Unlock()
	if old == state {
		return
	}
	if state == peerRegistered {
		logger.Info("registered with name server", "namesrv", p.addr)
		return
	}
	if state == peerRejected {
		// A refusal needs a person (a second process with this broker's
		// name and id, a registration too large, an ACL or secret).
		logger.Error("name server refused this broker's registration; retrying every heartbeat interval", "namesrv", p.addr, "err", err)
		return
	}
	logger.Warn("name server "+state+"; retrying every heartbeat interval", "namesrv", p.addr, "err", err)
}

// registerRequest builds a full REGISTER_BROKER with the current topic
// table. The IDC travels as zoneName (and RocketMQ 5's __ZONE_NAME).
func (r *registrar) registerRequest() *remoting.Command {
	w := r.s.topics.snapshot()
	body, _ := json.Marshal(protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: w, FilterServerList: []string{}})
	compressed := false
	if len(body) > compressRegistrationAbove {
		// RocketMQ's compressed form: a tenth of the bytes or less, so
		// many or long-named topics stay far inside the frame limit.
		body, compressed = protocol.EncodeCompressedRegisterBody(w, nil), true
	}
	// The name servers' frame limit, RocketMQ's 16 MiB unless changed.
	if limit := remoting.DefaultMaxFrameSize - 64<<10; len(body) > limit {
		r.tooLarge(len(body), limit, len(w.TopicConfigTable))
	}
	o := r.s.opts
	h := protocol.RegisterBrokerRequestHeader{
		BrokerName: o.BrokerName, BrokerAddr: r.s.addr, ClusterName: o.Cluster, HAServerAddr: r.s.addr,
		BrokerID: r.s.repl.regID.Load(), BodyCRC32: int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF), ZoneName: o.IDC,
		Compressed: compressed, Instance: r.s.instance,
	}
	if h.BrokerID == protocol.MasterID && r.s.repl.controllerMode() {
		// Elected by the controller: name servers that know the
		// controllers give us the master's slot even while the master we
		// replaced still holds it (frozen, or cut off from the controller).
		h.MasterEpoch = r.s.repl.epoch()
	}
	return r.s.signRequest(remoting.NewRequest(int32(protocol.RegisterBroker), h.Ext(), body))
}

// compressRegistrationAbove is the JSON registration size above which the
// compressed form is sent instead.
const compressRegistrationAbove = 1 << 20

// tooLarge logs, at most once a minute, that the registration cannot fit a
// frame: the real cause, which the name servers' refusal would otherwise
// leave to be guessed from a closed connection.
func (r *registrar) tooLarge(size, limit, topics int) {
	now := time.Now()
	if last := r.tooLargeAt.Load(); last != 0 && now.Sub(time.Unix(0, last)) < time.Minute {
		return
	}
	r.tooLargeAt.Store(now.UnixNano())
	r.s.logger.Error("the registration is larger than a frame may be: the name servers will refuse it and this broker's "+
		"routes will go stale; delete unused topics", "bytes", size, "limit", limit, "topics", topics)
}

// heartbeatRequest builds the light BROKER_HEARTBEAT.
func (r *registrar) heartbeatRequest() *remoting.Command {
	o := r.s.opts
	h := protocol.BrokerHeartbeatRequestHeader{ClusterName: o.Cluster, BrokerAddr: r.s.addr, BrokerName: o.BrokerName, BrokerID: r.s.repl.regID.Load()}
	return r.s.signRequest(remoting.NewRequest(int32(protocol.BrokerHeartbeat), h.Ext(), nil))
}

// unregisterRequest builds UNREGISTER_BROKER.
func (r *registrar) unregisterRequest() *remoting.Command {
	o := r.s.opts
	h := protocol.UnregisterBrokerRequestHeader{BrokerName: o.BrokerName, BrokerAddr: r.s.addr, ClusterName: o.Cluster, BrokerID: r.s.repl.regID.Load()}
	return r.s.signRequest(remoting.NewRequest(int32(protocol.UnregisterBroker), h.Ext(), nil))
}
