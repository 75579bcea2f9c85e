package namesrv

import (
	"errors"
	"fmt"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// DefaultClaimHold is how long a broker group's slot stays reserved for the
// data directory (instance) that last registered it, after it was last
// seen: long enough for a broker to restart and recover its store.
const DefaultClaimHold = 5 * time.Minute

// errInstanceClaimed refuses a slot to another data directory while the one
// that held it was seen within the hold.
var errInstanceClaimed = errors.New("broker slot held by another data directory")

// slotKey is one broker slot of a group.
type slotKey struct {
	name string
	id   int64
}

// instanceSeen is the data directory that last registered a slot, where,
// and when.
type instanceSeen struct {
	instance, addr string
	seen           time.Time
}

// checkInstanceLocked refuses h when its slot was registered within hold
// by another instance at another address and h's instance is no recent
// member of the group: a second process started with a copied config
// (issue 22: it made the real master demote itself), whether the first is
// live or restarting. Members swapping ids (a switchover), a promoted
// replica, and a replaced disk at the same address pass. Brokers that send
// no instance (stock RocketMQ) are not checked. Caller holds t.mu.
func (t *routeTable) checkInstanceLocked(h *protocol.RegisterBrokerRequestHeader, now time.Time) error {
	if h.Instance == "" || t.claimHold <= 0 {
		return nil
	}
	prev, ok := t.instances[slotKey{h.BrokerName, h.BrokerID}]
	if !ok || prev.instance == h.Instance || prev.addr == h.BrokerAddr || now.Sub(prev.seen) >= t.claimHold {
		return nil
	}
	if seen, member := t.groupInstances[h.BrokerName][h.Instance]; member && now.Sub(seen) < t.claimHold {
		return nil
	}
	ago := now.Sub(prev.seen).Round(time.Second)
	return fmt.Errorf("%w: %s id %d is the slot of another broker process (data directory %s at %s, last seen %v ago); "+
		"this one (data directory %s at %s) has a copy of its name and id: stop it, or give it its own name or id. "+
		"If the other's data is truly gone, this slot frees %v after it was last seen (--claim-hold)",
		errInstanceClaimed, h.BrokerName, h.BrokerID, prev.instance, prev.addr, ago, h.Instance, h.BrokerAddr,
		(t.claimHold - now.Sub(prev.seen)).Round(time.Second))
}

// noteInstanceLocked records an accepted registration's instance. Caller
// holds t.mu.
func (t *routeTable) noteInstanceLocked(h *protocol.RegisterBrokerRequestHeader, now time.Time) {
	if h.Instance == "" {
		return
	}
	t.instances[slotKey{h.BrokerName, h.BrokerID}] = instanceSeen{instance: h.Instance, addr: h.BrokerAddr, seen: now}
	g := t.groupInstances[h.BrokerName]
	if g == nil {
		g = map[string]time.Time{}
		t.groupInstances[h.BrokerName] = g
	}
	g[h.Instance] = now
	for inst, seen := range g {
		if now.Sub(seen) >= t.claimHold {
			delete(g, inst)
		}
	}
}
