package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/protocol"
)

// SwitchResult is the outcome of a broker group's switchover.
type SwitchResult struct {
	Broker    string // the group's name
	NewMaster string // the new master's address
	Epoch     int64  // the group's epoch from now on
	LogEnd    int64  // where the old master's log ended (planned switchover)
	Forced    bool
}

// SwitchMaster makes replica id `to` the master of broker group name.
//
// A planned switchover (force false) asks the current master to pause
// writes, wait until the replica holds its whole log, promote it and follow
// it: no acknowledged message is lost; producers are refused (and retry on
// other brokers) for the pause, which timeout bounds (zero: 5 s).
//
// With force, the replica is promoted directly, for a group whose master
// is gone: whatever the old master had acknowledged and the replica had
// not copied is no longer in the group (none with sync replication), and
// the old master truncates it when it returns.
func (a *Client) SwitchMaster(ctx context.Context, name string, to int64, force bool, timeout time.Duration) (*SwitchResult, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	if to < 1 {
		return nil, &client.ConfigError{Field: "to", Reason: fmt.Sprintf("replica id %d: a replica's id is 1 or more", to)}
	}
	brokers, err := a.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	var master, target string
	for _, b := range brokers {
		if b.Name != name || !b.Alive {
			continue
		}
		switch b.ID {
		case protocol.MasterID:
			master = b.Addr
		case to:
			target = b.Addr
		}
	}
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	if force {
		if target == "" {
			return nil, fmt.Errorf("zonemq client: broker %s has no live replica with id %d", name, to)
		}
		h := protocol.ReplicaPromoteRequestHeader{BrokerName: name, LogEnd: -1}
		if err := a.do(ctx, target, req(protocol.ReplicaPromote, h.Ext(), nil)); err != nil {
			return nil, err
		}
		return &SwitchResult{Broker: name, NewMaster: target, Forced: true}, nil
	}
	if master == "" {
		return nil, fmt.Errorf("zonemq client: broker %s has no live master; use a forced switch to promote replica %d", name, to)
	}
	h := protocol.ReplicaSwitchRequestHeader{BrokerName: name, To: to, TimeoutMillis: timeout.Milliseconds()}
	r := req(protocol.ReplicaSwitch, h.Ext(), nil)
	r.Timeout = timeout + 5*time.Second // the switchover's pause, and the answer
	resp, err := a.conn.Call(ctx, master, r)
	if err != nil {
		return nil, err
	}
	res := &SwitchResult{Broker: name, NewMaster: resp.Ext["newMaster"]}
	res.Epoch, _ = strconv.ParseInt(resp.Ext["epoch"], 10, 64)
	res.LogEnd, _ = strconv.ParseInt(resp.Ext["logEnd"], 10, 64)
	return res, nil
}

// BrokerRuntime returns a broker's GET_BROKER_RUNTIME_INFO table: its
// counters, store bounds and, for zonemq brokers, its replication state
// (brokerRole, replicationEpoch, inSyncReplicas, replicas, masterAddr).
func (a *Client) BrokerRuntime(ctx context.Context, addr string) (map[string]string, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	resp, err := a.conn.Call(ctx, addr, req(protocol.GetBrokerRuntimeInfo, nil, nil))
	if err != nil {
		return nil, err
	}
	var kv protocol.KVTable
	if err := json.Unmarshal(resp.Body, &kv); err != nil {
		return nil, fmt.Errorf("zonemq client: runtime info of %s: %w", addr, err)
	}
	return kv.Table, nil
}
