package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zonemq/zonemq/internal/idc"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// nameServer is one entry of the address server's /v1/namesrvs answer.
type nameServer struct {
	Addr  string `json:"addr"`
	IDC   string `json:"idc"`
	Alive bool   `json:"alive"`
}

func nameServerIDC(n nameServer) string { return n.IDC }

// nameServers knows every IDC's name servers, orders them own IDC first,
// fails over between them at once, and keeps a heartbeat (zonemq request
// 9001) to each, which both tells the name server the client is alive and
// keeps a warm connection the client can fail over to without dialling.
type nameServers struct {
	c    *core
	http *http.Client
	// rotation spreads clients of one IDC over its name servers; it is
	// fixed per client so a client sticks to the same one while it works.
	rotation int

	mu        sync.Mutex
	list      []nameServer         // the latest list, as the address server gave it
	suspect   map[string]time.Time // failed since its last good heartbeat
	answered  map[string]time.Time // last good heartbeat
	inflight  map[string]bool      // heartbeats under way
	watched   map[*remoting.Conn]bool
	lastFetch time.Time
	// unanswered is when the address servers stopped answering (zero while
	// they answer); reminded is when that was last logged.
	unanswered, reminded time.Time

	refreshCh chan struct{}
}

func newNameServers(c *core) *nameServers {
	n := &nameServers{
		c:         c,
		rotation:  rand.IntN(1 << 16),
		suspect:   map[string]time.Time{},
		answered:  map[string]time.Time{},
		inflight:  map[string]bool{},
		watched:   map[*remoting.Conn]bool{},
		refreshCh: make(chan struct{}, 1),
	}
	dial := c.cfg.Dial
	if dial == nil {
		d := &net.Dialer{Timeout: c.cfg.DialTimeout}
		if c.cfg.LocalIP != "" {
			d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(c.cfg.LocalIP)}
		}
		dial = d.DialContext
	}
	n.http = &http.Client{
		Timeout: c.cfg.RequestTimeout,
		// TLS also verifies https:// address servers (same CA as the cluster).
		Transport: &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute,
			TLSClientConfig: c.cfg.TLS},
	}
	for _, a := range c.cfg.NamesrvAddrs {
		n.list = append(n.list, nameServer{Addr: a, Alive: true})
	}
	return n
}

// refresh re-reads the list from the address servers. If none answers, the
// last list is kept (the configured NamesrvAddrs before the first answer);
// it is an error only when no name server is known at all.
func (n *nameServers) refresh(ctx context.Context) error {
	var lastErr error
	for _, base := range n.c.cfg.AddrsrvURLs {
		list, err := n.fetch(ctx, base)
		if err != nil {
			lastErr = err
			continue
		}
		n.mu.Lock()
		changed := !equalNameServers(n.list, list)
		n.list = list
		n.lastFetch = time.Now()
		down := n.unanswered
		n.unanswered, n.reminded = time.Time{}, time.Time{}
		n.mu.Unlock()
		if !down.IsZero() {
			n.c.logger.Info("an address server answers again", "from", base, "silentFor", time.Since(down).Round(time.Second))
		}
		if changed {
			n.c.logger.Info("name-server list", "from", base, "list", list)
		}
		return nil
	}
	now := time.Now()
	n.mu.Lock()
	known := len(n.list)
	first := n.unanswered.IsZero()
	if first {
		n.unanswered = now
	}
	since := n.unanswered
	remind := !first && now.Sub(n.reminded) >= addrsrvReminder
	if first || remind {
		n.reminded = now
	}
	n.mu.Unlock()
	switch {
	case known == 0:
		// The caller gets this as an error: logging it too would say it
		// twice.
		return fmt.Errorf("%w: %v", ErrNoNameServer, lastErr)
	case lastErr == nil || ctx.Err() != nil:
		// Not when ctx ended: a refresh cut short by shutdown is no news.
	case first:
		// A whole IDC's outage silences its address server for as long as
		// it lasts: say it once, then remind, rather than every refresh.
		n.c.logger.Warn("no address server answered; keeping the last name-server list", "err", lastErr, "known", known)
	case remind:
		n.c.logger.Warn("still no address server answers; keeping the last name-server list", "since", since.Format(time.TimeOnly),
			"err", lastErr, "known", known)
	}
	return nil
}

// addrsrvReminder is how often a client whose address servers all stay
// silent says so again.
const addrsrvReminder = time.Minute

func (n *nameServers) fetch(ctx context.Context, base string) ([]nameServer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/namesrvs", nil)
	if err != nil {
		return nil, err
	}
	resp, err := n.http.Do(req)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || strings.Contains(err.Error(), "malformed HTTP") {
			// A name server reads "GET " as a frame length and drops the
			// connection: the usual cause is the two flags swapped.
			return nil, fmt.Errorf("address server %s: %w (no HTTP answer: is it a name server? --addrsrv wants an address "+
				"server's http://host:port, a name server's host:port goes to --namesrv)", base, err)
		}
		return nil, fmt.Errorf("address server %s: %w", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("address server %s: %w", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("address server %s: HTTP %d", base, resp.StatusCode)
	}
	var list []nameServer
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("address server %s: bad /v1/namesrvs body: %w", base, err)
	}
	out := list[:0]
	for _, ns := range list {
		if _, _, err := net.SplitHostPort(ns.Addr); err == nil {
			out = append(out, ns)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("address server %s lists no name server", base)
	}
	return out, nil
}

func equalNameServers(a, b []nameServer) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// triggerRefresh asks the refresh loop to re-read the list now.
func (n *nameServers) triggerRefresh() {
	select {
	case n.refreshCh <- struct{}{}:
	default:
	}
}

// refreshLoop re-reads the list every AddrsrvRefreshInterval and on demand.
func (n *nameServers) refreshLoop(ctx context.Context) {
	if len(n.c.cfg.AddrsrvURLs) == 0 {
		return
	}
	t := time.NewTicker(n.c.cfg.AddrsrvRefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.refreshCh:
			// Many failures at once ask for one refresh; one per 100 ms is
			// plenty, and keeps a dead address server from being hammered.
			n.mu.Lock()
			wait := 100*time.Millisecond - time.Since(n.lastFetch)
			n.mu.Unlock()
			if wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
		}
		rctx, cancel := context.WithTimeout(ctx, n.c.cfg.RequestTimeout*time.Duration(len(n.c.cfg.AddrsrvURLs)))
		n.refresh(rctx)
		cancel()
	}
}

// addrs lists every known name server.
func (n *nameServers) addrs() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]string, len(n.list))
	for i, ns := range n.list {
		out[i] = ns.Addr
	}
	return out
}

// candidates orders the name servers for a request: alive and not suspect
// first (own IDC first), then those the address server reports down, then
// those that failed us since their last good heartbeat. Nothing is left out:
// when everything looks down, trying is still better than giving up. A name
// server that answered our heartbeat within the last two intervals counts as
// alive whatever the address server said at its last refresh: a returning
// name server is preferred again within a second, not at the next refresh.
func (n *nameServers) candidates() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	recent := time.Now().Add(-2 * n.c.cfg.ClientHeartbeatInterval)
	var good, down, bad []nameServer
	for _, ns := range n.list {
		switch _, sus := n.suspect[ns.Addr]; {
		case sus:
			bad = append(bad, ns)
		case ns.Alive || n.answered[ns.Addr].After(recent):
			good = append(good, ns)
		default:
			down = append(down, ns)
		}
	}
	out := make([]string, 0, len(n.list))
	seen := map[string]bool{}
	for _, group := range [][]nameServer{good, down, bad} {
		for _, ns := range n.rotate(idc.OwnFirst(group, nameServerIDC, n.c.cfg.IDC)) {
			if !seen[ns.Addr] {
				seen[ns.Addr] = true
				out = append(out, ns.Addr)
			}
		}
	}
	return out
}

// rotate turns the own-IDC run and the rest of an own-first list by the
// client's rotation, spreading clients over equivalent name servers.
func (n *nameServers) rotate(list []nameServer) []nameServer {
	own := 0
	for own < len(list) && idc.Same(list[own].IDC, n.c.cfg.IDC) {
		own++
	}
	out := make([]nameServer, 0, len(list))
	for _, part := range [][]nameServer{list[:own], list[own:]} {
		if len(part) == 0 {
			continue
		}
		r := n.rotation % len(part)
		out = append(out, part[r:]...)
		out = append(out, part[:r]...)
	}
	return out
}

// current is the name server the next request goes to first.
func (n *nameServers) current() string {
	if c := n.candidates(); len(c) > 0 {
		return c[0]
	}
	return ""
}

func (n *nameServers) markSuspect(addr string, err error) {
	n.mu.Lock()
	_, was := n.suspect[addr]
	if !was {
		n.suspect[addr] = time.Now()
	}
	n.mu.Unlock()
	if !was {
		// Handled by moving to the next one: information, not a warning.
		n.c.logger.Info("name server failed; moving to the next", "namesrv", addr, "namesrvIDC", n.idcOf(addr), "why", err)
		n.triggerRefresh()
	}
}

func (n *nameServers) clearSuspect(addr string) {
	n.mu.Lock()
	n.answered[addr] = time.Now()
	_, was := n.suspect[addr]
	delete(n.suspect, addr)
	n.mu.Unlock()
	if was {
		n.c.logger.Info("name server answers again", "namesrv", addr)
	}
}

// invoke sends a request built by build to the best name server, and on a
// failure (no answer, broken connection) to the next one at once. An answer
// with any response code is a success here; the caller reads the code.
func (n *nameServers) invoke(ctx context.Context, build func() *remoting.Command) (*remoting.Command, string, error) {
	cands := n.candidates()
	if len(cands) == 0 {
		return nil, "", ErrNoNameServer
	}
	var lastErr error
	for _, addr := range cands {
		resp, err := n.c.invoke(ctx, addr, build(), n.c.cfg.RequestTimeout)
		if err == nil {
			return resp, addr, nil
		}
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		if errors.Is(err, ErrShutdown) {
			return nil, "", err
		}
		lastErr = err
		n.markSuspect(addr, err)
	}
	return nil, "", fmt.Errorf("%w: %v", ErrNoNameServer, lastErr)
}

// heartbeatLoop sends the client heartbeat to every name server of every
// IDC every ClientHeartbeatInterval — alive or not, so a returning name
// server is noticed within one interval. Failures are silent (stock name
// servers answer REQUEST_CODE_NOT_SUPPORTED, which counts as alive).
func (n *nameServers) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(n.c.cfg.ClientHeartbeatInterval)
	defer t.Stop()
	for {
		for _, addr := range n.addrs() {
			n.mu.Lock()
			busy := n.inflight[addr]
			n.inflight[addr] = true
			n.mu.Unlock()
			if busy {
				continue
			}
			n.c.wg.Add(1)
			go func() {
				defer n.c.wg.Done()
				n.heartbeat(ctx, addr)
				n.mu.Lock()
				delete(n.inflight, addr)
				n.mu.Unlock()
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (n *nameServers) heartbeat(ctx context.Context, addr string) {
	hb := protocol.ClientHeartbeat{ClientID: n.c.id(), IDC: n.c.cfg.IDC, Role: n.c.role, Groups: n.c.groups()}
	_, err := n.c.invoke(ctx, addr, request(protocol.ClientHeartbeatToNamesrv, nil, hb.Encode()), n.c.cfg.RequestTimeout)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		n.c.logger.Debug("name-server heartbeat failed", "namesrv", addr, "err", err)
		n.markSuspect(addr, err)
		return
	}
	n.clearSuspect(addr)
	n.watch(addr)
}

// watch marks the name server suspect the moment its connection closes: a
// dead process is noticed through its closed connection, before any timer.
func (n *nameServers) watch(addr string) {
	cn, ok := n.c.rc.ConnIfOpen(addr)
	if !ok {
		return
	}
	n.mu.Lock()
	if n.watched[cn] {
		n.mu.Unlock()
		return
	}
	n.watched[cn] = true
	n.mu.Unlock()
	cn.OnClose(func(cn *remoting.Conn) {
		n.mu.Lock()
		delete(n.watched, cn)
		n.mu.Unlock()
		if n.c.ctx.Err() == nil {
			n.markSuspect(addr, cn.Err())
		}
	})
}

// idcOf is the IDC the address servers list addr in ("" if unknown).
func (n *nameServers) idcOf(addr string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ns := range n.list {
		if ns.Addr == addr {
			return ns.IDC
		}
	}
	return ""
}
