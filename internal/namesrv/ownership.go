package namesrv

import (
	"errors"
	"fmt"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Registration ownership. Without it any client could send REGISTER_BROKER
// under a real broker's name and id (from another host, in a made-up IDC)
// and have the routes point at it between the real broker's heartbeats, or
// send UNREGISTER_BROKER and drop it. The rule holds with ACL off:
//
//   - a (broker name, id) slot whose broker is live (its connection is open
//     and it has not expired) belongs to the connection it registered over;
//     a registration of that slot from another connection is refused;
//   - the same holds for a live broker address under any name and id;
//   - unregistration, heartbeats and data-version queries from a connection
//     that does not own the broker change nothing.
//
// A replica (same name, another id) registers its own slot from its own
// connection. Two members of a group may swap slots (a switchover: the
// master steps down to the replica's id and the replica becomes id 0): a
// registration refused because its slot is held is remembered for
// ClaimWindow as a claim, and the holder may then take the claimant's slot
// in exchange. Both holders have to ask, so a connection that holds no slot
// the other side wants can never take one. A broker that restarts registers again at once when its old
// connection closed (a crash closes it too); only a broker whose host
// vanished without closing the connection waits out its expiry.

// MaxBrokerTimeout caps the heartbeatTimeoutMillis a broker may ask for, so
// a registration cannot hold its slot for longer than this after its
// broker went silent.
const MaxBrokerTimeout = 2 * time.Minute

// ClaimWindow is how long a refused registration counts as a claim that
// the holder of the claimed slot may answer with a swap; the swap applies
// both registrations at once.
const ClaimWindow = 10 * time.Second

// slotClaim is a registration refused because another live connection
// held its slot, kept whole so that an agreed swap can apply it.
type slotClaim struct {
	brokerName string
	brokerID   int64
	at         time.Time
	header     *protocol.RegisterBrokerRequestHeader
	reg        *brokerRegistration
}

// errRegistrationHeld is returned for a registration or unregistration of
// a live broker from a connection that does not own it.
var errRegistrationHeld = errors.New("registration held by another connection")

// brokerTimeout is the expiry a broker gets: its own heartbeatTimeoutMillis
// within (0, MaxBrokerTimeout], else the name server's default.
func (t *routeTable) brokerTimeout(millis int64) time.Duration {
	if millis <= 0 {
		return t.defaultExpiry
	}
	return min(time.Duration(millis)*time.Millisecond, MaxBrokerTimeout)
}

// heldElsewhere reports whether live belongs to an open connection other
// than conn and has not expired at now.
func heldElsewhere(live *brokerLive, conn *remoting.Conn, now time.Time) bool {
	if live == nil || live.conn == nil || live.conn == conn || connClosed(live.conn) {
		return false
	}
	return now.Sub(live.lastUpdate) <= live.timeout
}

// checkRegisterOwnerLocked refuses h from conn when its (name, id) slot or
// its address is held by another live connection, recording the refusal
// as a claim. When the holder had claimed conn's slot, the swap is agreed
// and the holder's connection is returned, to apply its claim too. Caller
// holds t.mu.
func (t *routeTable) checkRegisterOwnerLocked(h *protocol.RegisterBrokerRequestHeader, conn *remoting.Conn, reg *brokerRegistration, now time.Time) (*remoting.Conn, error) {
	var swapWith *remoting.Conn
	if bd := t.brokerAddrTable[h.BrokerName]; bd != nil {
		if old, ok := bd.BrokerAddrs[h.BrokerID]; ok {
			live := t.brokerLiveTable[old]
			if heldElsewhere(live, conn, now) {
				if t.swapAgreedLocked(live.conn, h.BrokerName, conn, now) {
					swapWith = live.conn
				} else {
					if conn != nil {
						hc := *h
						t.claims[conn] = slotClaim{brokerName: h.BrokerName, brokerID: h.BrokerID, at: now, header: &hc, reg: reg}
					}
					return nil, fmt.Errorf("%w: broker %s id %d is live at %s, registered from %s; another connection may take it only after that one closes or the broker expires (%v)",
						errRegistrationHeld, h.BrokerName, h.BrokerID, old, live.conn.RemoteAddr(), live.timeout)
				}
			}
		}
	}
	if live := t.brokerLiveTable[h.BrokerAddr]; heldElsewhere(live, conn, now) {
		return nil, fmt.Errorf("%w: address %s is live as broker %s id %d, registered from %s; another connection may take it only after that one closes or the broker expires (%v)",
			errRegistrationHeld, h.BrokerAddr, live.brokerName, live.brokerID, live.conn.RemoteAddr(), live.timeout)
	}
	return swapWith, nil
}

// swapAgreedLocked reports whether holder (the connection holding the
// slot conn asks for) recently claimed a slot of group brokerName that conn
// holds: both sides of a switchover asked, so the exchange goes ahead.
// Caller holds t.mu.
func (t *routeTable) swapAgreedLocked(holder *remoting.Conn, brokerName string, conn *remoting.Conn, now time.Time) bool {
	c, ok := t.claims[holder]
	if !ok || conn == nil || c.brokerName != brokerName || now.Sub(c.at) > ClaimWindow {
		return false
	}
	bd := t.brokerAddrTable[brokerName]
	if bd == nil {
		return false
	}
	live := t.brokerLiveTable[bd.BrokerAddrs[c.brokerID]]
	return live != nil && live.conn == conn
}

// ownsLocked reports whether a request about live over conn may change it:
// conn registered it, or nobody live holds it. Caller holds t.mu.
func ownsLocked(live *brokerLive, conn *remoting.Conn, now time.Time) bool {
	return !heldElsewhere(live, conn, now)
}
