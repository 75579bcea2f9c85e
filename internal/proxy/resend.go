package proxy

import "sync"

// recentSendsMax is how many message ids the access point remembers.
const recentSendsMax = 1 << 16

// recentSends remembers the ids of the messages the access point sent
// lately. A RocketMQ 5 client resends an unanswered SendMessage with the
// same message id, as a new call; sent as a first attempt it was stored a
// second time in the same broker group (the chaos campaign's v5 workload
// found it). A repeat is sent marked as a resend (client.Message.Resent),
// and the broker answers with the copy the first attempt stored. The
// oldest ids are forgotten first: at most a duplicate, never a loss.
type recentSends struct {
	mu   sync.Mutex
	seen map[string]struct{}
	ring []string // the ids in the order first seen; next is overwritten next
	next int
}

// note records id and reports whether it was sent before.
func (r *recentSends) note(id string) (again bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.seen[id]; ok {
		return true
	}
	if r.seen == nil {
		r.seen = make(map[string]struct{})
	}
	if len(r.ring) < recentSendsMax {
		r.ring = append(r.ring, id)
	} else {
		delete(r.seen, r.ring[r.next])
		r.ring[r.next] = id
		r.next = (r.next + 1) % recentSendsMax
	}
	r.seen[id] = struct{}{}
	return false
}
