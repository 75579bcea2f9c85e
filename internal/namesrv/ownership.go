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
// connection. A broker that restarts registers again at once when its old
// connection closed (a crash closes it too); only a broker whose host
// vanished without closing the connection waits out its expiry.

// MaxBrokerTimeout caps the heartbeatTimeoutMillis a broker may ask for, so
// a registration cannot hold its slot for longer than this after its
// broker went silent.
const MaxBrokerTimeout = 2 * time.Minute

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
// its address is held by another live connection. Caller holds t.mu.
func (t *routeTable) checkRegisterOwnerLocked(h *protocol.RegisterBrokerRequestHeader, conn *remoting.Conn, now time.Time) error {
	if bd := t.brokerAddrTable[h.BrokerName]; bd != nil {
		if old, ok := bd.BrokerAddrs[h.BrokerID]; ok {
			if live := t.brokerLiveTable[old]; heldElsewhere(live, conn, now) {
				return fmt.Errorf("%w: broker %s id %d is live at %s, registered from %s; another connection may take it only after that one closes or the broker expires (%v)",
					errRegistrationHeld, h.BrokerName, h.BrokerID, old, live.conn.RemoteAddr(), live.timeout)
			}
		}
	}
	if live := t.brokerLiveTable[h.BrokerAddr]; heldElsewhere(live, conn, now) {
		return fmt.Errorf("%w: address %s is live as broker %s id %d, registered from %s; another connection may take it only after that one closes or the broker expires (%v)",
			errRegistrationHeld, h.BrokerAddr, live.brokerName, live.brokerID, live.conn.RemoteAddr(), live.timeout)
	}
	return nil
}

// ownsLocked reports whether a request about live over conn may change it:
// conn registered it, or nobody live holds it. Caller holds t.mu.
func ownsLocked(live *brokerLive, conn *remoting.Conn, now time.Time) bool {
	return !heldElsewhere(live, conn, now)
}
