package controller

import (
	"errors"
	"fmt"
	"time"
)

// Elections: the leader's lease check (automatic, in-sync set only) and
// the operator's switch or forced election. Every election is one Raft
// commit; without a majority it fails and nothing changes.

// checkLeases elects a new master for every group whose master has been
// silent longer than the lease timeout.
func (s *Server) checkLeases() {
	for _, g := range s.fsm.allGroups() {
		if g.MasterID >= 0 {
			s.checkLease(g.Key)
		}
	}
}

// checkLease elects a new master for key if its master's lease lapsed.
// It holds decideMu from the decision to the commit, so no lease is
// granted in between to the master being replaced.
func (s *Server) checkLease(key groupKey) {
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	g := s.fsm.group(key)
	now := s.now()
	if g == nil || g.MasterID < 0 ||
		now.Sub(s.live.masterSilentSince(g.Key, g.MasterID, g.Epoch)) <= s.opts.MasterLeaseTimeout ||
		s.live.leaseActive(g.Key, g.Epoch, now) {
		return
	}
	pick, _, err := s.pickMaster(g, now, false)
	if err != nil {
		if s.live.block(g.Key, err.Error()) {
			s.logger.Warn("master lease lapsed but no one can be elected", "group", g.Key.String(),
				"master", g.MasterID, "epoch", g.Epoch, "why", err)
		}
		return
	}
	if err := s.elect(g, pick, "lease lapsed", false); err != nil {
		s.logger.Warn("election failed", "group", g.Key.String(), "candidate", pick, "err", err)
	}
}

// errNoCandidate says no member qualifies for master.
var errNoCandidate = errors.New("no candidate")

// pickMaster chooses a new master for g other than its current one: the
// live member with the highest log end (lowest id on a tie), from the
// in-sync set or its eligible members (group.Eligible), and never one whose
// log shrank (liveness.shrunk) unless force, nor one that said it will not
// lead. It also returns the highest log end the leader
// knows of in the group (what a forced pick may fall short of).
func (s *Server) pickMaster(g *group, now time.Time, force bool) (int64, int64, error) {
	best, bestEnd, known := int64(-1), int64(-1), int64(0)
	for id, m := range g.Members {
		alive, logEnd, _ := s.live.alive(g.Key, id, now, s.opts.MasterLeaseTimeout)
		known = max(known, m.LogEnd, logEnd)
		if id == g.MasterID || !alive || s.live.noLead(g.Key, id) != "" ||
			(!force && (!g.inSync(id) && !g.eligible(id) || s.live.shrunk(g.Key, id) || logEnd < g.Floor)) {
			// A member whose log shrank since it last reported (its disk
			// lost data, its log was moved aside) may lack what the group
			// acknowledged: the chaos campaign saw one elected with a
			// damaged log and every other copy then cut to match it. One
			// that says it will not lead would refuse the role. One below
			// the group's floor lost data even if this leader never heard
			// it report more.
			continue
		}
		if logEnd > bestEnd || (logEnd == bestEnd && id < best) {
			best, bestEnd = id, logEnd
		}
	}
	if best < 0 {
		what := "in-sync replica"
		if force {
			what = "member"
		}
		return -1, known, fmt.Errorf("%w: no live %s other than master %d (in-sync set %v, eligible %v)",
			errNoCandidate, what, g.MasterID, g.InSync, g.Eligible)
	}
	return best, known, nil
}

// elect commits id as g's master at g.Epoch+1, with the group's floor: the
// least log end of its live in-sync members now other than the old master
// (the new master's alone when forced). Each of them holds everything the
// group acknowledged, so the floor is at least that much; the old master
// may have lost a tail it acknowledged (the reason it is replaced), so it
// does not lower the floor. An unforced election keeps the old master in
// the set (applyElectLocked). Caller holds decideMu.
func (s *Server) elect(g *group, id int64, reason string, force bool) error {
	now := s.now()
	floor := int64(-1)
	for mid := range g.Members {
		if counts := mid == id || !force && mid != g.MasterID && (g.inSync(mid) || g.eligible(mid)); !counts {
			continue
		}
		if alive, logEnd, _ := s.live.alive(g.Key, mid, now, s.opts.MasterLeaseTimeout); alive && (floor < 0 || logEnd < floor) {
			floor = logEnd
		}
	}
	if err := s.apply(command{Type: cmdElect, Key: g.Key, ID: id, FromEpoch: g.Epoch, LogEnd: max(floor, 0), KeepOld: !force}); err != nil {
		return err
	}
	s.live.elected(g.Key, s.now())
	s.logger.Warn("new master elected", "group", g.Key.String(), "master", id, "epoch", g.Epoch+1,
		"previous", g.MasterID, "reason", reason, "forced", force)
	return nil
}
