package devcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/zonemq/zonemq/internal/controller"
)

// startControllerLocked starts node's voter on its previous addresses
// (or the port scheme) with its data; a new voter waits for
// bootstrapControllers. Caller holds c.mu or is Start.
func (c *Cluster) startControllerLocked(node *idcNode) error {
	o := controller.NewOptions()
	o.Listen = c.listenAddr(node, node.controllerAddr, 9880)
	o.RaftListen = c.listenAddr(node, node.raftAddr, 9881)
	o.NodeID = node.name
	o.DataDir = filepath.Join(c.dataDir, node.name, "controller")
	o.Logger = c.logger
	o.ClusterSecret = c.secret
	s, err := controller.New(o)
	if err != nil {
		return fmt.Errorf("devcluster: %s controller: %w", node.name, err)
	}
	node.controller, node.controllerAddr, node.raftAddr = s, s.Addr(), s.RaftAddr()
	node.controllerDone = run(s.Run)
	return nil
}

// bootstrapControllers makes the voters of a new cluster one Raft
// cluster, once every voter's Raft address is known (ports may be free
// ones). Voters with state (a reused DataDir) refuse, which is fine.
func (c *Cluster) bootstrapControllers() error {
	var peers []controller.Peer
	for _, node := range c.idcs {
		peers = append(peers, controller.Peer{ID: node.name, RaftAddr: node.raftAddr})
	}
	bootstrapped := 0
	for _, node := range c.idcs {
		if err := node.controller.Bootstrap(peers); err == nil {
			bootstrapped++
		}
	}
	if bootstrapped != 0 && bootstrapped != len(c.idcs) {
		return fmt.Errorf("devcluster: only %d of %d controller voters could bootstrap (a reused data dir?)", bootstrapped, len(c.idcs))
	}
	return nil
}

// ControllerAddrs lists every voter's request address, in IDC order
// (none without Options.Controller).
func (c *Cluster) ControllerAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, node := range c.idcs {
		if node.controllerAddr != "" {
			out = append(out, node.controllerAddr)
		}
	}
	return out
}

// WaitMastersElected waits until the controller leader records a live
// master for every broker group (its first heartbeat then carried its
// lease, so it takes writes).
func (c *Cluster) WaitMastersElected(ctx context.Context) error {
	cl := controller.NewClient(c.ControllerAddrs())
	defer cl.Close()
	var last string
	for {
		last = c.mastersMissing(ctx, cl)
		if last == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devcluster: the controller has no live master yet: %s", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// mastersMissing says which group has no live master in the leader's
// view ("" when none).
func (c *Cluster) mastersMissing(ctx context.Context, cl *controller.Client) string {
	for _, addr := range c.ControllerAddrs() {
		st, err := cl.Status(ctx, addr)
		if err != nil || !st.IsLeader {
			continue
		}
		for n := 1; n <= c.IDCs(); n++ {
			ok := false
			for _, g := range st.Groups {
				if g.BrokerName != BrokerName(n) || g.MasterID < 0 {
					continue
				}
				for _, m := range g.Members {
					ok = ok || (m.ID == g.MasterID && m.Alive)
				}
			}
			if !ok {
				return BrokerName(n)
			}
		}
		return ""
	}
	return "no controller leader"
}
