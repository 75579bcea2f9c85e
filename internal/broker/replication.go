package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/wallclock"
)

// A broker group is the brokers that share a name: one master (registered
// as id 0) and replicas (ids 1..n), each in any IDC. The master owns the
// write position; every replica copies its commit log byte for byte over the
// broker port (protocol.ReplicaHello/Fetch/SyncMeta, docs/replication.md)
// and serves reads, so consumers keep reading a group whose master is gone.
//
// Epochs: every time a broker becomes master it starts a new epoch, recorded
// with the log offset it starts at. A replica that returns tells the master
// its last epoch and log end; the master answers where that epoch ended in
// its own log, and the replica cuts anything past that point (a tail the
// group never acknowledged) before it follows.

// Replication modes (Options.Replication).
const (
	ReplicationAsync = "async"
	ReplicationSync  = "sync"
)

// replicationStateMetadata is the store metadata name of the role and the
// epoch history.
const replicationStateMetadata = "replication"

// replicationState is what survives a restart: the role (a switchover may
// have changed it from what --id says), the id registered with the name
// servers, and the epoch history of the log.
type replicationState struct {
	Master       bool                  `json:"master"`
	RegisteredID int64                 `json:"registeredId"`
	Epochs       []protocol.EpochEntry `json:"epochs"`
	// MustCatchUp says why the broker's log may lack what the group
	// acknowledged — it moved its damaged log aside (reseed.go), or its
	// store lost records it had reported durable — until it has copied the
	// group's log up to where a master's ended when it first followed one
	// since; "" otherwise. Such a broker must not lead. Kept on disk so that
	// a restart meanwhile does not forget it (the chaos campaign saw a
	// reseeded replica power-cycled, then elected with an empty log).
	MustCatchUp string `json:"mustCatchUp,omitempty"`
}

// Errors of the replicated send path; putErrorResponse maps them to codes.
var (
	// errNotMaster refuses a write on a replica.
	errNotMaster = errors.New("broker: this broker is a replica")
	// errTooFewReplicas refuses a sync send before storing it: fewer
	// copies are in sync than MinInsyncReplicas.
	errTooFewReplicas = errors.New("broker: too few in-sync replicas")
	// errReplicaTimeout: the message is stored on the master but the
	// in-sync replicas did not confirm it in time.
	errReplicaTimeout = errors.New("broker: replicas did not confirm in time")
	// errWritesPaused refuses writes while a switchover hands the group to
	// another master.
	errWritesPaused = errors.New("broker: writes paused for a switchover")
)

// replication is a broker's part in its group: its role, epochs, and on a
// master the replicas it serves; on a replica the loops that follow the
// master (replica.go).
type replication struct {
	s *Server

	mu       sync.Mutex
	state    replicationState
	paused   bool         // master: writes refused during a switchover
	pausedAt time.Time    // when paused was last set
	metaMu   sync.Mutex   // replica: one SYNC_META exchange at a time
	curEpoch atomic.Int64 // lastEpoch(), for readers without mu (noteEpochLocked)
	follow   string       // replica: the master's address, "" while unknown
	roleGen  uint64       // bumped at every role change; loops restart on it
	roleCh   chan struct{}
	replicas map[int64]*replicaPeer // master: replicas by id

	master atomic.Bool  // mirrors state.Master for the hot path
	regID  atomic.Int64 // mirrors state.RegisteredID

	// ackCh is closed (and replaced) whenever a replica's acknowledged
	// offset or the in-sync set changes; sync sends wait on it.
	ackMu sync.Mutex
	ackCh chan struct{}
	// dataCh is closed (and replaced) when the log grows while a fetch is
	// parked; parked counts those fetches so puts skip the lock otherwise.
	dataMu sync.Mutex
	dataCh chan struct{}
	parked atomic.Int32

	// dirtyOffsets are consumer offsets committed on this broker while it
	// was a replica, to be merged into the master's (never moving back).
	dirtyMu      sync.Mutex
	dirtyOffsets map[offsetKey]struct{}
	metaVersions [2]protocol.DataVersion // topics, groups last applied from the master

	client *remoting.Client // replica: connections to the master

	// fresh: the data directory had no replication state (a new broker,
	// or one whose disk was replaced).
	fresh bool
	// catchUpTo (replica, while state.MustCatchUp) is the master's log end
	// at the HELLO since the mark was set: once the log reaches it, the
	// broker holds what the group acknowledged and may lead again. -1 when
	// there is nothing to catch up (the fetch loop then takes no lock).
	catchUpTo atomic.Int64
	// refusedLead is set once the broker has refused the master role
	// (controller.go, leadRefusalLocked), so it says so once.
	refusedLead atomic.Bool

	// Controller mode (controller.go): the lease end (monoNanos) and the
	// controller leader last heard from (guarded by mu).
	leaseUntil atomic.Int64
	ctrlLeader string
	ctrlClient *remoting.Client // connections to the controller's voters
	// ctrlKick asks the controller loop to report now (one slot): a
	// broker just elected asks for its lease at once, not a heartbeat
	// interval later.
	ctrlKick chan struct{}
	// committedSync (master, controller mode; guarded by mu) is the
	// group's in-sync set as the controller last committed it, broker
	// identities, this master included; nil while unknown. A replica
	// this master dropped from its own set stays one that sends wait for
	// until the controller has dropped it too (ackSetLocked).
	committedSync []int64
}

// offsetKey names one consumer offset.
type offsetKey struct {
	group, topic string
	queueID      int32
}

// replicaPeer is a master's view of one replica.
type replicaPeer struct {
	id       int64
	addr     string
	idc      string
	conn     *remoting.Conn
	acked    int64     // the replica's log end at its last fetch
	caughtUp time.Time // last time acked reached the master's end
	inSync   bool
	lastSeen time.Time
	metaAt   time.Time // when the snapshot of its last SYNC_META was taken
}

// newReplication loads the role and epochs; a master starts a new epoch at
// the end of its log.
func newReplication(s *Server) (*replication, error) {
	r := &replication{
		s: s, replicas: map[int64]*replicaPeer{}, roleCh: make(chan struct{}),
		ackCh: make(chan struct{}), dataCh: make(chan struct{}), dirtyOffsets: map[offsetKey]struct{}{},
		ctrlKick: make(chan struct{}, 1),
	}
	found, err := s.store.LoadMetadata(replicationStateMetadata, &r.state)
	if err != nil {
		return nil, fmt.Errorf("loading the replication state: %w", err)
	}
	if !found {
		r.state = replicationState{Master: s.opts.BrokerID == protocol.MasterID, RegisteredID: s.opts.BrokerID}
		r.fresh = s.store.CommitLogMaxOffset() == 0
	} else if r.state.Master != (s.opts.BrokerID == protocol.MasterID) {
		s.logger.Warn("the data directory's role differs from --id (a switchover changed it); keeping the data directory's",
			"master", r.state.Master, "registeredId", r.state.RegisteredID, "id", s.opts.BrokerID)
	}
	switch {
	case s.reseeded:
		r.state.MustCatchUp = "it is copying its log again after damage"
	case s.store.LostDurableRecords() && r.controllerMode():
		// Another copy holds them (with the controller, groups have
		// replicas); alone, the broker goes on with what it has.
		r.state.MustCatchUp = "its store lost records it had reported durable (a damaged disk)"
	}
	if why := r.leadRefusalLocked(); why != "" && r.state.Master && r.controllerMode() {
		// A master that lost records since its epoch began starts as a
		// replica: the controller elects another member, and this one
		// copies back what it lost.
		s.logger.Error("this broker was master but may lack acknowledged messages: starting as a replica; "+
			"the controller elects another member", "why", why, "logEnd", s.store.CommitLogMaxOffset())
		r.state = replicationState{RegisteredID: r.replicaRegID(), Epochs: r.state.Epochs, MustCatchUp: r.state.MustCatchUp}
	}
	if r.state.Master {
		r.state.RegisteredID = protocol.MasterID
	}
	if err := r.persistLocked(); err != nil {
		return nil, err
	}
	r.master.Store(r.state.Master)
	r.regID.Store(r.state.RegisteredID)
	r.noteEpochLocked()
	return r, nil
}

// start runs before the broker serves. A master first asks the name
// servers whether its group already has another live master (a replica was
// promoted while this one was down): then it steps down to follow it, so
// the group never has two. Otherwise it begins a new epoch at the end of its
// log.
func (r *replication) start(ctx context.Context) error {
	if !r.master.Load() {
		return nil
	}
	if r.controllerMode() {
		// The controller decides; a master reports at its own epoch and
		// writes only once the controller grants it a lease.
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.state.Epochs) == 0 {
			r.startEpochLocked(nextEpoch(0))
		}
		return r.persistLocked()
	}
	other, ids, addrs := r.liveGroup(ctx)
	if other == "" && r.fresh && r.anyHasData(ctx, addrs) {
		// An empty data directory must not lead a group whose replicas
		// hold data: it would make them drop it. It follows instead, and
		// an operator promotes a replica (admin broker switch --force).
		r.s.logger.Warn("this broker's data directory is empty but its group has live replicas and no master; "+
			"starting as a replica: promote one with 'zonemq admin broker switch --force'", "replicas", len(ids))
		other = "(none yet)"
	}
	if other != "" {
		id := int64(1)
		for ids[id] {
			id++
		}
		if r.s.opts.BrokerID != protocol.MasterID && !ids[r.s.opts.BrokerID] {
			id = r.s.opts.BrokerID
		}
		if other != "(none yet)" {
			// A master gives up its role only to a successor its epoch
			// history proves: a promoted replica carries this broker's
			// epochs. A process that merely took the name (issue 22: a
			// squatter made a restarting master demote itself for good)
			// does not, and this broker stays master, refused by the name
			// servers until that process goes.
			if err := r.provenSuccessor(ctx, other, id); err != nil {
				r.s.logger.Error("another broker claims this group's master slot but its epoch history does not show it "+
					"succeeded this one; staying master (stop the other process, or switch the group explicitly)",
					"claimant", other, "err", err)
				r.mu.Lock()
				defer r.mu.Unlock()
				r.startEpochLocked(nextEpoch(r.lastEpoch()))
				return r.persistLocked()
			}
		}
		r.s.logger.Warn("another broker of the group is master now; starting as its replica",
			"master", other, "registeredId", id)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.setRoleLocked(false, id)
		return r.persistLocked()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.startEpochLocked(nextEpoch(r.lastEpoch()))
	return r.persistLocked()
}

// provenSuccessor asks the live master at addr, as a replica would (HELLO
// on a connection of its own, closed after), for its epoch history, and
// checks that following it would drop nothing its history does not prove
// (checkTruncation).
func (r *replication) provenSuccessor(ctx context.Context, addr string, id int64) error {
	s := r.s
	end := s.store.CommitLogMaxOffset()
	history := r.epochs()
	if end == 0 {
		return nil // an empty log has nothing to lose
	}
	h := protocol.ReplicaHelloRequestHeader{BrokerName: s.opts.BrokerName, ReplicaID: id, ReplicaAddr: s.addr,
		IDC: s.opts.IDC, LastEpoch: epochOf(history, end), LogEnd: end, SegmentSize: s.store.SegmentSize()}
	po := remoting.ClientOptions{DialTimeout: s.opts.NamesrvTimeout, Logger: s.logger}
	if s.opts.NamesrvTLS != nil {
		po.Dial = remoting.TLSDialer(s.opts.NamesrvTLS, nil)
	}
	probe := remoting.NewClient(po)
	defer probe.Close()
	ictx, cancel := context.WithTimeout(ctx, 2*s.opts.NamesrvTimeout)
	defer cancel()
	resp, err := probe.Invoke(ictx, addr, s.signRequest(remoting.NewRequest(int32(protocol.ReplicaHello), h.Ext(), nil)))
	if err != nil {
		return err
	}
	if resp.Code != int32(protocol.Success) {
		return &protocol.Error{Code: protocol.ResponseCode(resp.Code), Remark: resp.Remark}
	}
	var rh protocol.ReplicaHelloResponseHeader
	if err := rh.SetExt(resp.ExtFields); err != nil {
		return err
	}
	var theirs []protocol.EpochEntry
	if err := json.Unmarshal(resp.Body, &theirs); err != nil {
		return fmt.Errorf("its epoch history: %w", err)
	}
	if err := checkTruncation(history, end, rh, theirs); err != nil {
		return err
	}
	if rh.Epoch <= epochOf(history, end) {
		return fmt.Errorf("it is at epoch %d, not later than this broker's %d", rh.Epoch, epochOf(history, end))
	}
	return nil
}

// nextEpoch is the epoch of a master that starts on its own (a restart, a
// forced promotion): above every epoch it knows and at least the Unix time
// in seconds, so that a master started on an empty disk cannot reuse an
// epoch number of the group's earlier history; its replicas then see an
// epoch it never had and refuse to drop their data for it.
func nextEpoch(last int64) int64 {
	return max(last+1, wallclock.Now().Unix())
}

// liveGroup asks the name servers for this group's live master at another
// address, and which ids the group's live brokers use.
func (r *replication) liveGroup(ctx context.Context) (string, map[int64]bool, []string) {
	req := r.s.signRequest(remoting.NewRequest(int32(protocol.GetBrokerClusterInfo), nil, nil))
	ids := map[int64]bool{}
	var addrs []string
	other := ""
	for _, ns := range r.s.startupNamesrvs(ctx) {
		ictx, cancel := context.WithTimeout(ctx, r.s.opts.NamesrvTimeout)
		resp, err := r.s.namesrvs.client.Invoke(ictx, ns, req)
		cancel()
		if err != nil || resp.Code != int32(protocol.Success) {
			continue
		}
		info, err := protocol.DecodeClusterLiveInfo(resp.Body)
		if err != nil {
			continue
		}
		bd, ok := info.BrokerAddrTable[r.s.opts.BrokerName]
		if !ok {
			continue
		}
		for id, a := range bd.BrokerAddrs {
			if a == r.s.addr {
				continue
			}
			if _, live := info.BrokerLiveTable[a]; !live {
				continue
			}
			ids[id] = true
			if !slices.Contains(addrs, a) {
				addrs = append(addrs, a)
			}
			if id == protocol.MasterID {
				other = a
			}
		}
	}
	return other, ids, addrs
}

// anyHasData asks the group's live members for their log end: an empty
// broker must not lead a group whose replicas hold messages. A member that
// does not answer counts as holding data (the safe side).
func (r *replication) anyHasData(ctx context.Context, addrs []string) bool {
	for _, a := range addrs {
		ictx, cancel := context.WithTimeout(ctx, r.s.opts.NamesrvTimeout)
		resp, err := r.client.Invoke(ictx, a, r.s.signRequest(remoting.NewRequest(int32(protocol.GetBrokerRuntimeInfo), nil, nil)))
		cancel()
		if err != nil || resp.Code != int32(protocol.Success) {
			return true
		}
		var kv protocol.KVTable
		if err := json.Unmarshal(resp.Body, &kv); err != nil || kv.Table["commitLogMaxOffset"] != "0" {
			return true
		}
	}
	return false
}

// startEpochLocked records that epoch e writes the log from its current end.
// Caller holds mu (or runs before the broker serves).
func (r *replication) startEpochLocked(e int64) {
	end := r.s.store.CommitLogMaxOffset()
	// An epoch that wrote nothing is replaced rather than kept, so the
	// history stays short across restarts of an idle master.
	if n := len(r.state.Epochs); n > 0 && r.state.Epochs[n-1].StartOffset == end {
		r.state.Epochs[n-1].Epoch = e
	} else {
		r.state.Epochs = append(r.state.Epochs, protocol.EpochEntry{Epoch: e, StartOffset: end})
	}
	r.noteEpochLocked()
}

// noteEpochLocked publishes the history's last epoch to curEpoch after any
// change of r.state.Epochs. Caller holds mu.
func (r *replication) noteEpochLocked() { r.curEpoch.Store(r.lastEpoch()) }

func (r *replication) persistLocked() error {
	if err := r.s.store.SaveMetadata(replicationStateMetadata, r.state); err != nil {
		return fmt.Errorf("persisting the replication state: %w", err)
	}
	return nil
}

// lastEpoch is the newest epoch in the history (0 when empty).
func (r *replication) lastEpoch() int64 {
	if n := len(r.state.Epochs); n > 0 {
		return r.state.Epochs[n-1].Epoch
	}
	return 0
}

// epoch returns the current epoch without taking mu: every send answer
// carries it.
func (r *replication) epoch() int64 { return r.curEpoch.Load() }

// epochs returns a copy of the history.
func (r *replication) epochs() []protocol.EpochEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]protocol.EpochEntry(nil), r.state.Epochs...)
}

// epochOf returns the epoch that wrote the record just below end: the
// newest entry starting before end (0 for an empty log).
func epochOf(history []protocol.EpochEntry, end int64) int64 {
	e := int64(0)
	for _, h := range history {
		if h.StartOffset < end {
			e = h.Epoch
		}
	}
	return e
}

// epochEnd returns where epoch e's part of the log ends according to
// history (the start of the first later epoch, or logEnd for the current
// one), and whether history covers e at all.
func epochEnd(history []protocol.EpochEntry, e, logEnd int64) (int64, bool) {
	covered := false
	for _, h := range history {
		if h.Epoch <= e {
			covered = true
			continue
		}
		return h.StartOffset, covered
	}
	return logEnd, covered
}

// IsMaster reports whether the broker is its group's master now.
func (s *Server) IsMaster() bool { return s.isMaster() }

// InSyncReplicas is, on a master, how many replicas are in its in-sync set.
func (s *Server) InSyncReplicas() int {
	s.repl.mu.Lock()
	defer s.repl.mu.Unlock()
	return s.repl.inSyncLocked()
}

// isMaster reports whether the broker is its group's master now.
func (s *Server) isMaster() bool { return s.repl.master.Load() }

// roleChanged returns a channel closed at the next role change.
func (r *replication) roleChanged() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.roleCh
}

// setRoleLocked switches the role and wakes every loop that depends on it.
// Caller holds mu.
func (r *replication) setRoleLocked(master bool, regID int64) {
	if r.state.Master && !master && r.s.extra.locks != nil {
		// A demoted master's locks are no one's any more: the new master
		// grants them (its lock table is the one that counts now).
		r.s.extra.locks.clear()
	}
	r.state.Master = master
	r.state.RegisteredID = regID
	r.committedSync = nil // a new role learns the set from its next lease
	r.master.Store(master)
	r.regID.Store(regID)
	r.roleGen++
	close(r.roleCh)
	r.roleCh = make(chan struct{})
}

// signalAcks wakes sync sends waiting for replicas.
func (r *replication) signalAcks() {
	r.ackMu.Lock()
	close(r.ackCh)
	r.ackCh = make(chan struct{})
	r.ackMu.Unlock()
	if r.s.syncAcks != nil {
		r.s.syncAcks.signal()
	}
}

func (r *replication) ackChan() <-chan struct{} {
	r.ackMu.Lock()
	defer r.ackMu.Unlock()
	return r.ackCh
}

// notifyData wakes parked fetches; called by the store on every append, so
// it costs one atomic load when no fetch is parked.
func (r *replication) notifyData() {
	if r.parked.Load() == 0 {
		return
	}
	r.dataMu.Lock()
	close(r.dataCh)
	r.dataCh = make(chan struct{})
	r.dataMu.Unlock()
}

func (r *replication) dataChan() <-chan struct{} {
	r.dataMu.Lock()
	defer r.dataMu.Unlock()
	return r.dataCh
}

// noteOffsetCommit remembers, on a replica, a consumer offset committed
// here, so the master learns it (consumers commit to a replica while their
// group's master is gone).
func (s *Server) noteOffsetCommit(group, topic string, queueID int32) {
	if s.isMaster() {
		return
	}
	r := s.repl
	r.dirtyMu.Lock()
	r.dirtyOffsets[offsetKey{group, topic, queueID}] = struct{}{}
	r.dirtyMu.Unlock()
}

// checkWritable refuses writes on a replica, during a switchover, and in
// sync mode when too few copies are in sync (before anything is stored, so
// nothing is acknowledged on one copy).
func (r *replication) checkWritable() error {
	if !r.master.Load() {
		return errNotMaster
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paused {
		return errWritesPaused
	}
	if r.controllerMode() && !r.leaseValid() {
		return errLeaseExpired
	}
	if r.s.opts.Replication == ReplicationSync {
		if copies := 1 + r.inSyncLocked(); copies < r.s.opts.MinInsyncReplicas {
			return fmt.Errorf("%w: %d in-sync copies, min-insync-replicas is %d", errTooFewReplicas, copies, r.s.opts.MinInsyncReplicas)
		}
	}
	return nil
}

// inSyncLocked counts the in-sync replicas. Caller holds mu.
func (r *replication) inSyncLocked() int {
	n := 0
	for _, p := range r.replicas {
		if p.inSync {
			n++
		}
	}
	return n
}

// startupNamesrvs lists the name servers known before the registration
// loops run: the configured ones and those the address servers list now.
func (s *Server) startupNamesrvs(ctx context.Context) []string {
	addrs := s.namesrvs.addrList()
	if len(s.opts.AddrsrvURLs) == 0 {
		return addrs
	}
	client := &http.Client{Timeout: s.opts.NamesrvTimeout}
	seen := map[string]bool{}
	for _, a := range addrs {
		seen[a] = true
	}
	for _, u := range s.opts.AddrsrvURLs {
		more, err := fetchNamesrvs(ctx, client, u)
		if err != nil {
			continue
		}
		for _, a := range more {
			if !seen[a] {
				seen[a] = true
				addrs = append(addrs, a)
			}
		}
	}
	return addrs
}
