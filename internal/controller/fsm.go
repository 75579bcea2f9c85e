package controller

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"

	"github.com/hashicorp/raft"
)

// The replicated state: what every voter agrees on, changed only by
// commands committed through Raft. Liveness (last seen, leases) is not
// here: it is the leader's memory (liveness.go), rebuilt by a new leader.

// groupKey names a broker group: cluster and broker name.
type groupKey struct {
	Cluster string `json:"cluster"`
	Name    string `json:"name"`
}

func (k groupKey) String() string { return k.Cluster + "/" + k.Name }

// groupMember is a broker of a group as last committed.
type groupMember struct {
	Addr   string `json:"addr"`
	IDC    string `json:"idc"`
	LogEnd int64  `json:"logEnd"`
}

// group is one broker group's replicated state.
type group struct {
	Key groupKey `json:"key"`
	// MasterID is the master's configured broker id, -1 while there is
	// none.
	MasterID   int64  `json:"masterId"`
	MasterAddr string `json:"masterAddr"`
	// Epoch only grows: every election adds one.
	Epoch int64 `json:"epoch"`
	// LeasedEpoch is the last epoch whose master was granted a lease: a
	// leader may renew it at once, but a master elected at a later epoch
	// gets its first lease only once the previous master's lapsed.
	LeasedEpoch int64 `json:"leasedEpoch"`
	// InSync is the in-sync set, master included, sorted.
	InSync  []int64                `json:"inSync"`
	Members map[int64]*groupMember `json:"members"`
	// History is every master the group had, oldest first, at most
	// maxHistory entries (the oldest dropped): what a checker needs to
	// tell a fenced master's acknowledgement from a valid one. Snapshots
	// written before it existed restore with an empty history.
	History []epochRecord `json:"history,omitempty"`
	// Floor is the least log end of the live in-sync members when the
	// current master was elected: each held at least that much, and
	// holds more since, unless its disk lost data (an empty disk put in,
	// a damaged log moved aside). A member that reports less is no
	// candidate (pickMaster). Unlike the leader's memory of a member's
	// longest log (liveness.shrunk), it survives a change of leader. 0 for
	// an adopted master and in snapshots from before it existed.
	Floor int64 `json:"floor,omitempty"`
	// Eligible are members out of the in-sync set that still hold
	// everything the group acknowledged, candidates for master as the
	// set's members are (Kafka's eligible leader replicas, KIP-966): each
	// left the set while the set was below the master's
	// --min-insync-replicas, when the master acknowledges nothing. The
	// chaos campaign saw a group whose set shrank to its master alone (a
	// replica stopped), the master's disk then damaged: no candidate for
	// good, while the stopped replica held every acknowledged message.
	// Emptied when the set reaches min-insync-replicas again (sends are
	// acknowledged again).
	Eligible []int64 `json:"eligible,omitempty"`
}

// epochRecord is one master of a group: from epoch Epoch on, broker
// MasterID at Addr, committed at AtMillis (the leader's clock, Unix ms; 0
// for entries logged before the field existed).
type epochRecord struct {
	Epoch    int64  `json:"epoch"`
	MasterID int64  `json:"masterId"`
	Addr     string `json:"addr"`
	AtMillis int64  `json:"atMillis"`
}

// maxHistory bounds a group's epoch history.
const maxHistory = 256

// record appends a new master to g's history, dropping the oldest beyond
// maxHistory.
func (g *group) record(at int64) {
	g.History = append(g.History, epochRecord{Epoch: g.Epoch, MasterID: g.MasterID, Addr: g.MasterAddr, AtMillis: at})
	if n := len(g.History); n > maxHistory {
		g.History = slices.Clone(g.History[n-maxHistory:])
	}
}

func (g *group) clone() *group {
	c := *g
	c.InSync = slices.Clone(g.InSync)
	c.Eligible = slices.Clone(g.Eligible)
	c.History = slices.Clone(g.History)
	c.Members = make(map[int64]*groupMember, len(g.Members))
	for id, m := range g.Members {
		mc := *m
		c.Members[id] = &mc
	}
	return &c
}

func (g *group) inSync(id int64) bool { return slices.Contains(g.InSync, id) }

// eligible reports whether id is one of the group's eligible members.
func (g *group) eligible(id int64) bool { return slices.Contains(g.Eligible, id) }

// eligibleAfter is the eligible set once the in-sync set went from old to
// now under a master acknowledging with minInSync copies: the members that
// left while now is below minInSync join it, members in now leave it, and
// it is empty once now holds minInSync copies (or minInSync is not known).
func eligibleAfter(old, now, eligible []int64, minInSync int) []int64 {
	if minInSync <= 1 || len(now) >= minInSync {
		return nil
	}
	var out []int64
	for _, id := range slices.Concat(eligible, old) {
		if !slices.Contains(now, id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// fsmState is everything the FSM holds, as snapshots store it.
type fsmState struct {
	Groups []*group `json:"groups"`
	// APIAddrs maps a voter's Raft id to its request address; a voter
	// records its own when it becomes leader, so followers can point
	// callers at it.
	APIAddrs map[string]string `json:"apiAddrs"`
}

// Command types.
const (
	cmdReport  = "report"
	cmdElect   = "elect"
	cmdLease   = "lease"
	cmdAPIAddr = "apiAddr"
)

// command is one Raft log entry, JSON-encoded.
type command struct {
	Type string   `json:"type"`
	Key  groupKey `json:"key"`

	// report: a member's address, IDC and log end; AdoptMaster makes it
	// master of a group without one at Epoch; InSync (when non-nil) is the
	// current master's in-sync set at Epoch when SetInSync.
	ID          int64   `json:"id"`
	Addr        string  `json:"addr,omitempty"`
	IDC         string  `json:"idc,omitempty"`
	LogEnd      int64   `json:"logEnd,omitempty"`
	AdoptMaster bool    `json:"adoptMaster,omitempty"`
	Epoch       int64   `json:"epoch"`
	InSync      []int64 `json:"inSync,omitempty"`
	SetInSync   bool    `json:"setInSync,omitempty"`
	// MinInSync is the master's --min-insync-replicas with SetInSync
	// (group.Eligible); 0 from a broker that does not say.
	MinInSync int `json:"minInSync,omitempty"`

	// elect: ID becomes master at FromEpoch+1, and LogEnd the group's
	// Floor; refused when the group moved on since the leader decided.
	// KeepOld keeps the old master in the in-sync set (applyElectLocked);
	// entries written before it existed drop it.
	FromEpoch int64 `json:"fromEpoch,omitempty"`
	KeepOld   bool  `json:"keepOld,omitempty"`

	// apiAddr: voter NodeID serves requests at Addr.
	NodeID string `json:"nodeId,omitempty"`

	// At is when the leader proposed the command (Unix ms): the time an
	// adopted or elected master enters the epoch history. Every voter
	// applies the same value, so the state stays deterministic.
	At int64 `json:"at,omitempty"`
}

// errStale is an elect or lease command that lost a race with another
// change of the group.
var errStale = errors.New("the group changed since the decision")

// fsm implements raft.FSM over fsmState.
type fsm struct {
	mu       sync.RWMutex
	groups   map[groupKey]*group
	apiAddrs map[string]string
}

func newFSM() *fsm {
	return &fsm{groups: map[groupKey]*group{}, apiAddrs: map[string]string{}}
}

// Apply implements raft.FSM. It returns nil or an error (the answer of
// raft.ApplyFuture.Response).
func (f *fsm) Apply(entry *raft.Log) any {
	var c command
	if err := json.Unmarshal(entry.Data, &c); err != nil {
		// A committed entry we cannot read is a bug or a newer version:
		// skip it rather than wedge every voter.
		return fmt.Errorf("controller: undecodable log entry %d: %w", entry.Index, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch c.Type {
	case cmdReport:
		return f.applyReportLocked(&c)
	case cmdElect:
		return f.applyElectLocked(&c)
	case cmdLease:
		g := f.groups[c.Key]
		if g == nil || g.Epoch != c.Epoch || g.MasterID != c.ID {
			return errStale
		}
		g.LeasedEpoch = c.Epoch
		return nil
	case cmdAPIAddr:
		f.apiAddrs[c.NodeID] = c.Addr
		return nil
	}
	return fmt.Errorf("controller: unknown command %q in log entry %d", c.Type, entry.Index)
}

// applyReportLocked records a member and, as the command says, adopts a
// master or sets the in-sync set. Caller holds f.mu.
func (f *fsm) applyReportLocked(c *command) error {
	g := f.groups[c.Key]
	if g == nil {
		g = &group{Key: c.Key, MasterID: -1, Members: map[int64]*groupMember{}}
		f.groups[c.Key] = g
	}
	g.Members[c.ID] = &groupMember{Addr: c.Addr, IDC: c.IDC, LogEnd: c.LogEnd}
	if c.AdoptMaster {
		if g.MasterID >= 0 || c.Epoch < g.Epoch {
			return errStale
		}
		// A group the controller has not decided for yet: the broker
		// that says it is master is, at its own epoch, and is leased
		// (there was no master before it to fence).
		g.MasterID, g.MasterAddr, g.Epoch, g.LeasedEpoch = c.ID, c.Addr, c.Epoch, c.Epoch
		g.InSync = []int64{c.ID}
		g.record(c.At)
	}
	if c.ID == g.MasterID {
		g.MasterAddr = c.Addr
	}
	if c.SetInSync {
		if c.ID != g.MasterID || c.Epoch != g.Epoch {
			return errStale
		}
		set := append(slices.Clone(c.InSync), c.ID)
		slices.Sort(set)
		old := g.InSync
		g.InSync = slices.Compact(set)
		g.Eligible = eligibleAfter(old, g.InSync, g.Eligible, c.MinInSync)
	}
	return nil
}

// applyElectLocked makes c.ID master at c.FromEpoch+1. Caller holds f.mu.
func (f *fsm) applyElectLocked(c *command) error {
	g := f.groups[c.Key]
	if g == nil || g.Epoch != c.FromEpoch {
		return errStale
	}
	m := g.Members[c.ID]
	if m == nil {
		return fmt.Errorf("broker %d is not a member of %s", c.ID, c.Key)
	}
	// The set keeps its replicas, with the new master, until the new
	// master's first report, which is committed before its first lease:
	// nothing is acknowledged at the new epoch before, so the members that
	// held everything acknowledged still do, and one of them can be elected
	// instead if the new master never takes the role (it died at once, or
	// refused: the chaos campaign saw a group left with a set of one
	// refusing broker, for ever). With KeepOld the old master stays too: it
	// wrote everything its epoch acknowledged, and the campaign saw a group
	// whose only other in-sync copy was damaged wait for ever while the old
	// master was back with the whole log (pickMaster still checks its log
	// against the floor). Otherwise it rejoins when the new master reports
	// it in sync.
	old := g.MasterID
	set := slices.Clone(g.InSync)
	if !c.KeepOld {
		set = slices.DeleteFunc(set, func(id int64) bool { return id == old })
	}
	g.InSync = slices.Compact(slices.Sorted(slices.Values(append(set, c.ID))))
	g.Eligible = slices.DeleteFunc(slices.Clone(g.Eligible), func(id int64) bool { return id == c.ID })
	if len(g.Eligible) == 0 {
		g.Eligible = nil
	}
	g.MasterID, g.MasterAddr = c.ID, m.Addr
	g.Epoch = c.FromEpoch + 1
	g.Floor = max(c.LogEnd, 0)
	g.record(c.At)
	return nil
}

// group returns a copy of the group's state, or nil.
func (f *fsm) group(k groupKey) *group {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if g := f.groups[k]; g != nil {
		return g.clone()
	}
	return nil
}

// allGroups returns copies of every group, sorted by key.
func (f *fsm) allGroups() []*group {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*group, 0, len(f.groups))
	for _, g := range f.groups {
		out = append(out, g.clone())
	}
	slices.SortFunc(out, func(a, b *group) int {
		return cmp.Or(cmp.Compare(a.Key.Cluster, b.Key.Cluster), cmp.Compare(a.Key.Name, b.Key.Name))
	})
	return out
}

// groupCount is how many groups the FSM holds.
func (f *fsm) groupCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.groups)
}

// apiAddr is the request address voter id recorded, if any.
func (f *fsm) apiAddr(id string) string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.apiAddrs[id]
}

// Snapshot implements raft.FSM: a deep copy taken under the lock, written
// out by Persist without it.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	st := fsmState{APIAddrs: maps.Clone(f.apiAddrs)}
	for _, g := range f.groups {
		st.Groups = append(st.Groups, g.clone())
	}
	return &snapshot{state: st}, nil
}

// Restore implements raft.FSM: replace everything with the snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var st fsmState
	if err := json.NewDecoder(rc).Decode(&st); err != nil {
		return fmt.Errorf("controller: reading snapshot: %w", err)
	}
	groups := make(map[groupKey]*group, len(st.Groups))
	for _, g := range st.Groups {
		if g.Members == nil {
			g.Members = map[int64]*groupMember{}
		}
		groups[g.Key] = g
	}
	if st.APIAddrs == nil {
		st.APIAddrs = map[string]string{}
	}
	f.mu.Lock()
	f.groups, f.apiAddrs = groups, st.APIAddrs
	f.mu.Unlock()
	return nil
}

// snapshot is a point-in-time copy of the FSM.
type snapshot struct{ state fsmState }

// Persist implements raft.FSMSnapshot.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(&s.state); err != nil {
		sink.Cancel()
		return fmt.Errorf("controller: writing snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *snapshot) Release() {}
