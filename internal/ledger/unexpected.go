package ledger

import "fmt"

// position is where a message was stored: its group (broker name), queue
// and queue offset.
type position struct {
	group  string
	queue  int
	offset int64
}

func (p position) String() string { return fmt.Sprintf("%s/%d@%d", p.group, p.queue, p.offset) }

// checkUnexpected counts, in the style of Jepsen's queue checker, the
// deliveries no correct run makes: of a key never sent, and of one key
// from two positions of one group (a value at two offsets of one log). It
// also splits the duplicates by cause. A key at positions in two groups is
// a duplicate, not unexpected: a producer whose attempt went unanswered
// cannot know whether it was stored and sends it to another group (the
// same message id); no server moves a message between groups. Within one
// group a retry is answered with the stored copy, so a second copy there
// is a fault.
func checkUnexpected(in Input, r *Result) {
	sent := make(map[string]bool, len(in.Acks)+len(in.Unacked))
	for _, a := range in.Acks {
		sent[a.Key] = true
	}
	for _, k := range in.Unacked {
		sent[k] = true
	}
	seen := make(map[string][]position, len(in.Consumptions))
	for _, c := range in.Consumptions {
		if !sent[c.Key] {
			r.Unexpected++
			addExample(&r.UnexpectedExamples, fmt.Sprintf("%s delivered to %s from %s/%d@%d but never sent",
				c.Key, c.Consumer, c.Group, c.Queue, c.Offset))
			continue
		}
		p := position{c.Group, c.Queue, c.Offset}
		ps := seen[c.Key]
		other, inGroup := sameGroup(ps, p)
		switch {
		case len(ps) == 0:
		case containsPosition(ps, p):
			addCause(r, "redelivered")
		case inGroup:
			addCause(r, "stored twice in one group")
			r.Unexpected++
			if len(ps) == 1 {
				r.StoredTwice++
			}
			addExample(&r.UnexpectedExamples, fmt.Sprintf("%s delivered from %s and from %s: stored twice in one group", c.Key, other, p))
		default:
			// A send is stored in one group, unless an attempt went
			// unanswered and the retry went to another: at least once.
			addCause(r, "resent to another group")
			if len(ps) == 1 {
				r.StoredTwice++
			}
		}
		if !containsPosition(ps, p) {
			seen[c.Key] = append(ps, p)
		}
	}
}

func containsPosition(ps []position, p position) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

func addCause(r *Result, cause string) {
	if r.DuplicateCauses == nil {
		r.DuplicateCauses = map[string]int{}
	}
	r.DuplicateCauses[cause]++
}

// sameGroup reports whether one of ps is in p's group.
// sameGroup returns the position of ps in p's group, if there is one.
func sameGroup(ps []position, p position) (position, bool) {
	for _, q := range ps {
		if q.group == p.group {
			return q, true
		}
	}
	return position{}, false
}
