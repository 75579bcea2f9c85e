package namesrv

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// MaxClients bounds the client registry; a heartbeat from a new client
// beyond it gets SYSTEM_BUSY.
const MaxClients = 100_000

// errRegistryFull is a new client's heartbeat when MaxClients are known.
var errRegistryFull = fmt.Errorf("the name server already tracks %d clients", MaxClients)

// clientEntry is one live client.
type clientEntry struct {
	info protocol.ClientInfo
	seen time.Time
	conn *remoting.Conn
}

// clientRegistry tracks the producers and consumers that send heartbeats
// (code 9001), keyed by client id. Fields below mu are guarded by it.
type clientRegistry struct {
	mu      sync.Mutex
	clients map[string]*clientEntry
	byConn  map[*remoting.Conn]map[string]struct{}
}

func newClientRegistry() *clientRegistry {
	return &clientRegistry{
		clients: make(map[string]*clientEntry),
		byConn:  make(map[*remoting.Conn]map[string]struct{}),
	}
}

// heartbeat records or refreshes a client. It reports whether the client
// is new.
func (r *clientRegistry) heartbeat(hb *protocol.ClientHeartbeat, conn *remoting.Conn, now time.Time) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if conn != nil && connClosed(conn) {
		return false, errConnClosed
	}
	e := r.clients[hb.ClientID]
	isNew := e == nil
	if isNew {
		if len(r.clients) >= MaxClients {
			return false, errRegistryFull
		}
		e = &clientEntry{}
		r.clients[hb.ClientID] = e
	}
	e.info = protocol.ClientInfo{
		ClientHeartbeat: protocol.ClientHeartbeat{
			ClientID: hb.ClientID, IDC: hb.IDC, Role: hb.Role, Groups: slices.Clone(hb.Groups),
		},
		LastSeen: now.UnixMilli(),
	}
	e.seen = now
	if conn != nil {
		e.info.Addr = conn.RemoteAddr()
	}
	if e.conn != conn {
		r.untrackLocked(hb.ClientID, e.conn)
		e.conn = conn
		if conn != nil {
			set := r.byConn[conn]
			if set == nil {
				set = make(map[string]struct{})
				r.byConn[conn] = set
			}
			set[hb.ClientID] = struct{}{}
		}
	}
	return isNew, nil
}

// untrackLocked forgets that id came over conn. Caller holds r.mu.
func (r *clientRegistry) untrackLocked(id string, conn *remoting.Conn) {
	if set := r.byConn[conn]; set != nil {
		delete(set, id)
		if len(set) == 0 {
			delete(r.byConn, conn)
		}
	}
}

// connClosedRemove drops the clients whose latest heartbeat came over conn.
func (r *clientRegistry) connClosedRemove(conn *remoting.Conn) []protocol.ClientInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []protocol.ClientInfo
	for id := range r.byConn[conn] {
		if e := r.clients[id]; e != nil && e.conn == conn {
			out = append(out, e.info)
			delete(r.clients, id)
		}
	}
	delete(r.byConn, conn)
	return out
}

// expire drops clients silent for longer than ttl.
func (r *clientRegistry) expire(now time.Time, ttl time.Duration) []protocol.ClientInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []protocol.ClientInfo
	for id, e := range r.clients {
		if now.Sub(e.seen) > ttl {
			out = append(out, e.info)
			r.untrackLocked(id, e.conn)
			delete(r.clients, id)
		}
	}
	return out
}

// list returns the live clients, of idc only when it is not empty
// (case-insensitive), sorted by IDC then client id.
func (r *clientRegistry) list(idc string) []protocol.ClientInfo {
	r.mu.Lock()
	out := make([]protocol.ClientInfo, 0, len(r.clients))
	for _, e := range r.clients {
		if idc == "" || strings.EqualFold(e.info.IDC, idc) {
			ci := e.info
			ci.Groups = slices.Clone(ci.Groups)
			out = append(out, ci)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b protocol.ClientInfo) int {
		if c := strings.Compare(a.IDC, b.IDC); c != 0 {
			return c
		}
		return strings.Compare(a.ClientID, b.ClientID)
	})
	return out
}

// isRegistryFull reports whether err is the registry's capacity error.
func isRegistryFull(err error) bool { return errors.Is(err, errRegistryFull) }
