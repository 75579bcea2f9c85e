package protocol

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The controller (docs/controller.md) decides which broker of a group is
// master, replicated with Raft among its voters. Brokers and operators talk
// to it with zonemq's own request codes, outside RocketMQ's ranges and the
// replication codes (91xx). Only the Raft leader answers heartbeats and
// elections; another voter answers SERVICE_NOT_AVAILABLE with the leader's
// address in the "leaderAddr" ext field (ControllerNotLeaderHeader), and
// the caller resends there.
const (
	// ControllerBrokerHeartbeat is a broker's report to the controller
	// leader; the answer names the group's master and grants a lease to
	// the master the controller agrees on.
	ControllerBrokerHeartbeat RequestCode = 9201
	// ControllerGetStatus asks any voter for its view: voters, leader,
	// term and every group's master, epoch, in-sync set and members.
	ControllerGetStatus RequestCode = 9202
	// ControllerElect is an operator's switchover to a given broker id or
	// a forced election.
	ControllerElect RequestCode = 9203
)

func init() {
	requestNames[ControllerBrokerHeartbeat] = "ZONEMQ_CONTROLLER_BROKER_HEARTBEAT"
	requestNames[ControllerGetStatus] = "ZONEMQ_CONTROLLER_GET_STATUS"
	requestNames[ControllerElect] = "ZONEMQ_CONTROLLER_ELECT"
}

// Broker roles as a ControllerHeartbeatRequestHeader reports them.
const (
	RoleMaster  = "master"
	RoleReplica = "replica"
)

// ControllerHeartbeatRequestHeader is a broker's report. BrokerID is the
// broker's configured identity (--id), which never changes with its role.
type ControllerHeartbeatRequestHeader struct {
	Cluster    string
	BrokerName string
	BrokerID   int64
	Addr       string
	IDC        string
	// Epoch is the broker's current epoch (its epoch history's last).
	Epoch int64
	// LogEnd is the end of the broker's log.
	LogEnd int64
	// Role is RoleMaster or RoleReplica: what the broker acts as now.
	Role string
	// InSyncIDs is a master's in-sync replica ids, comma-separated (see
	// FormatIDs); a replica leaves it empty.
	InSyncIDs string
	// NoLead, when set, is why the broker will not take the master role
	// now (it may lack acknowledged messages): the controller does not
	// elect it. Older controllers ignore it; the broker refuses anyway.
	NoLead string
	// MinInSync is a master's --min-insync-replicas with sync replication
	// (0 otherwise): with fewer copies in sync it acknowledges nothing, so
	// the controller keeps the members it drops then as eligible for
	// master. Older controllers ignore it.
	MinInSync int64
}

// Ext implements Header.
func (h *ControllerHeartbeatRequestHeader) Ext() map[string]string {
	w := ExtWriter{}.Str("cluster", h.Cluster).Str("brokerName", h.BrokerName).Int("brokerId", h.BrokerID).
		Str("addr", h.Addr).OptStr("idc", h.IDC).Int("epoch", h.Epoch).Int("logEnd", h.LogEnd).
		Str("role", h.Role).OptStr("inSyncIds", h.InSyncIDs).OptStr("noLead", h.NoLead)
	if h.MinInSync != 0 {
		w.Int("minInSync", h.MinInSync)
	}
	return w
}

// SetExt implements Header.
func (h *ControllerHeartbeatRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Cluster = r.String("cluster")
	h.BrokerName = r.String("brokerName")
	h.BrokerID = r.Int64("brokerId")
	h.Addr = r.String("addr")
	h.IDC = r.OptString("idc")
	h.Epoch = r.Int64("epoch")
	h.LogEnd = r.Int64("logEnd")
	h.Role = r.String("role")
	h.InSyncIDs = r.OptString("inSyncIds")
	h.NoLead = r.OptString("noLead")
	h.MinInSync = r.OptInt64("minInSync", 0)
	return r.Err()
}

// ControllerHeartbeatResponseHeader names the group's master as the
// controller decided it. LeaseMillis > 0 only for the broker that is that
// master at that epoch: it may accept writes for LeaseMillis counted from
// when it sent the heartbeat. MasterID is -1 while the group has none.
type ControllerHeartbeatResponseHeader struct {
	MasterID    int64
	MasterAddr  string
	Epoch       int64
	LeaseMillis int64
	// InSyncIDs rides on a lease: the group's in-sync set as committed
	// (FormatIDs, the master included). A master counts a replica it
	// dropped from its own set until the controller has dropped it too.
	// Empty from a controller older than the field.
	InSyncIDs string
}

// Ext implements Header.
func (h *ControllerHeartbeatResponseHeader) Ext() map[string]string {
	return ExtWriter{}.Int("masterId", h.MasterID).OptStr("masterAddr", h.MasterAddr).Int("epoch", h.Epoch).
		Int("leaseMillis", h.LeaseMillis).OptStr("inSyncIds", h.InSyncIDs)
}

// SetExt implements Header.
func (h *ControllerHeartbeatResponseHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.MasterID = r.Int64("masterId")
	h.MasterAddr = r.OptString("masterAddr")
	h.Epoch = r.Int64("epoch")
	h.LeaseMillis = r.Int64("leaseMillis")
	h.InSyncIDs = r.OptString("inSyncIds")
	return r.Err()
}

// ControllerNotLeaderHeader rides on the SERVICE_NOT_AVAILABLE answer of
// a voter that is not the Raft leader: LeaderAddr is the leader's request
// address, empty while no leader is known.
type ControllerNotLeaderHeader struct {
	LeaderAddr string
}

// Ext implements Header.
func (h *ControllerNotLeaderHeader) Ext() map[string]string {
	return ExtWriter{}.OptStr("leaderAddr", h.LeaderAddr)
}

// SetExt implements Header.
func (h *ControllerNotLeaderHeader) SetExt(ext map[string]string) error {
	h.LeaderAddr = NewExtReader(ext).OptString("leaderAddr")
	return nil
}

// ControllerElectRequestHeader asks for a new master of a group. To >= 0
// switches to that broker id; To < 0 lets the controller pick the live
// member with the highest log end. Without Force the pick must be in the
// in-sync set; with Force any live member will do, and the answer says how
// much may be lost.
type ControllerElectRequestHeader struct {
	Cluster    string
	BrokerName string
	To         int64
	Force      bool
}

// Ext implements Header.
func (h *ControllerElectRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("cluster", h.Cluster).Str("brokerName", h.BrokerName).Int("to", h.To).Bool("force", h.Force)
}

// SetExt implements Header.
func (h *ControllerElectRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Cluster = r.String("cluster")
	h.BrokerName = r.String("brokerName")
	h.To = r.OptInt64("to", -1)
	h.Force = r.OptBool("force", false)
	return r.Err()
}

// ControllerElectResponseHeader is the elected master. MayLoseBytes is how
// far the last log end the controller knew of the group (any member's)
// lies beyond the new master's: what a forced election may have lost
// (always 0 for an in-sync pick).
type ControllerElectResponseHeader struct {
	MasterID     int64
	MasterAddr   string
	Epoch        int64
	MayLoseBytes int64
}

// Ext implements Header.
func (h *ControllerElectResponseHeader) Ext() map[string]string {
	return ExtWriter{}.Int("masterId", h.MasterID).OptStr("masterAddr", h.MasterAddr).Int("epoch", h.Epoch).
		Int("mayLoseBytes", h.MayLoseBytes)
}

// SetExt implements Header.
func (h *ControllerElectResponseHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.MasterID = r.Int64("masterId")
	h.MasterAddr = r.OptString("masterAddr")
	h.Epoch = r.Int64("epoch")
	h.MayLoseBytes = r.Int64("mayLoseBytes")
	return r.Err()
}

// FormatIDs renders broker ids as the comma-separated list InSyncIDs
// carries, sorted.
func FormatIDs(ids []int64) string {
	sorted := slices.Sorted(slices.Values(ids))
	parts := make([]string, len(sorted))
	for i, id := range sorted {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ",")
}

// MaxInSyncIDs bounds the ids a heartbeat may list (a broker group is a
// handful of brokers; the bound keeps a bad report cheap).
const MaxInSyncIDs = 64

// ParseIDs reads a FormatIDs list: sorted, without duplicates; empty is
// the empty set.
func ParseIDs(s string) ([]int64, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxInSyncIDs {
		return nil, fmt.Errorf("%d ids, more than %d", len(parts), MaxInSyncIDs)
	}
	ids := make([]int64, 0, len(parts))
	for _, p := range parts {
		id, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("broker id %q is not a non-negative integer", p)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// ControllerStatus is the body of CONTROLLER_GET_STATUS's answer: the
// answering voter's view. Only the leader's view has Alive and LastSeenMillis
// (liveness is kept in the leader's memory, never replicated).
type ControllerStatus struct {
	NodeID     string            `json:"nodeId"`
	Leader     string            `json:"leader"`
	LeaderAddr string            `json:"leaderAddr"`
	IsLeader   bool              `json:"isLeader"`
	Term       uint64            `json:"term"`
	Voters     []ControllerVoter `json:"voters"`
	Groups     []ControllerGroup `json:"groups"`
	Commit     uint64            `json:"commitIndex"`
	Applied    uint64            `json:"appliedIndex"`
}

// ControllerVoter is one Raft server.
type ControllerVoter struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	// Addr is its request address, once it has led (learnt through Raft).
	Addr     string `json:"addr,omitempty"`
	Suffrage string `json:"suffrage"`
}

// ControllerGroup is one broker group's replicated state.
type ControllerGroup struct {
	Cluster    string             `json:"cluster"`
	BrokerName string             `json:"brokerName"`
	MasterID   int64              `json:"masterId"`
	MasterAddr string             `json:"masterAddr"`
	Epoch      int64              `json:"epoch"`
	InSync     []int64            `json:"inSync"`
	Members    []ControllerMember `json:"members"`
	// History is every master the group had, oldest first (the last 256):
	// a master's acknowledgements are valid only at its epoch.
	History []ControllerEpoch `json:"history"`
	// Floor is the least log end of the in-sync members at the last
	// election: a member reporting less lost data and is no candidate.
	Floor int64 `json:"floor,omitempty"`
	// Eligible are members out of the in-sync set that still hold
	// everything acknowledged (they left it while it was below the master's
	// --min-insync-replicas): candidates for master too.
	Eligible []int64 `json:"eligible,omitempty"`
}

// ControllerEpoch is one master of a group: broker MasterID at Addr holds
// Epoch from ElectedAtMillis (Unix ms, the leader's clock; 0 if unknown).
type ControllerEpoch struct {
	Epoch           int64  `json:"epoch"`
	MasterID        int64  `json:"masterId"`
	Addr            string `json:"addr"`
	ElectedAtMillis int64  `json:"electedAtMillis"`
}

// ControllerMember is one broker of a group as last committed, plus the
// leader's liveness view.
type ControllerMember struct {
	ID     int64  `json:"id"`
	Addr   string `json:"addr"`
	IDC    string `json:"idc"`
	LogEnd int64  `json:"logEnd"`
	// Alive and LastSeenMillis come from the leader's memory (0/false in a
	// follower's view).
	Alive          bool  `json:"alive"`
	LastSeenMillis int64 `json:"lastSeenMillis,omitempty"`
}
