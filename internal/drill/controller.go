package drill

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zonemq/zonemq/internal/controller"
	"github.com/zonemq/zonemq/internal/ledger"
	"github.com/zonemq/zonemq/internal/member"
	"github.com/zonemq/zonemq/internal/protocol"
)

// Controller mode (Options.Controller): every IDC's name server also runs
// a failover-controller voter (`zonemq namesrv --controller`), one voter
// per IDC, and every broker reports to them (`--controller`), so the
// controller, not an operator, elects a group's new master.
const (
	drillControllerPort = 29880
	drillRaftPort       = 29881
)

// controllerArgs are the name-server flags of IDC n's embedded voter.
func controllerArgs(ip, name, dir string, peers []string, portOffset int) []string {
	return []string{"--controller",
		"--controller-listen", fmt.Sprintf("%s:%d", ip, drillControllerPort+portOffset),
		"--raft-listen", fmt.Sprintf("%s:%d", ip, drillRaftPort+portOffset),
		"--controller-id", name, "--raft-peers", strings.Join(peers, ","), "--bootstrap",
		"--controller-data", filepath.Join(dir, "controller")}
}

// controllerView reads and drives the controller as an operator's admin
// tool does.
type controllerView struct {
	client *controller.Client
	addrs  []string // every voter's request address, IDC order
}

// newControllerView dials the voters at addrs through dial (nil: directly).
func newControllerView(addrs []string, secret *member.Secret, dial dialFunc) *controllerView {
	return &controllerView{client: controller.NewClientWithOptions(addrs,
		controller.ClientOptions{ClusterSecret: secret, Dial: dial}), addrs: addrs}
}

func (v *controllerView) close() { v.client.Close() }

// status returns the leader's view when a leader answers, else the first
// voter's that answers (the replicated state, without liveness).
func (v *controllerView) status(ctx context.Context) (*protocol.ControllerStatus, error) {
	var any *protocol.ControllerStatus
	var errs []error
	for _, a := range v.addrs {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		st, err := v.client.Status(cctx, a)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st.IsLeader {
			return st, nil
		}
		if any == nil {
			any = st
		}
	}
	if any != nil {
		return any, nil
	}
	return nil, errors.Join(errs...)
}

// statusGroup finds a group in a status.
func statusGroup(st *protocol.ControllerStatus, name string) *protocol.ControllerGroup {
	for i := range st.Groups {
		if st.Groups[i].BrokerName == name {
			return &st.Groups[i]
		}
	}
	return nil
}

// leaderIDC is the IDC (voter id) of the controller's Raft leader.
func (v *controllerView) leaderIDC(ctx context.Context, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	for {
		st, err := v.status(ctx)
		if err == nil && st.Leader != "" {
			return st.Leader, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no controller leader within %s (%v)", limit, err)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return "", err
		}
	}
}

// waitEpochAbove waits until group's epoch exceeds epoch, and returns the
// new master's address.
func (v *controllerView) waitEpochAbove(ctx context.Context, group string, epoch int64, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	for {
		st, err := v.status(ctx)
		if err == nil {
			if g := statusGroup(st, group); g != nil && g.Epoch > epoch {
				return g.MasterAddr, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%s: no new master within %s", group, limit)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return "", err
		}
	}
}

// failBack makes broker id master of group again once it is back in the
// in-sync set (a planned switch through the controller: nothing
// acknowledged can be lost), and waits until it is.
func (v *controllerView) failBack(ctx context.Context, group string, id int64, limit time.Duration) error {
	_, err := v.failBackOrForce(ctx, group, id, limit, false)
	return err
}

// failBackOrForce is failBack that, with mayForce, does what
// docs/controller.md tells an operator to do with a group that cannot elect
// (its master refuses the role and no other member is in its in-sync set:
// the chaos campaign saw a new master lose its disk before any replica
// joined it): when broker id holds at least as much log as every member,
// so that nothing any copy holds can be lost, and it is still not in sync
// halfway through limit, it forces the election of id (ELECT with force). It
// reports whether it forced one.
func (v *controllerView) failBackOrForce(ctx context.Context, group string, id int64, limit time.Duration, mayForce bool) (forced bool, err error) {
	began := time.Now()
	deadline := began.Add(limit)
	var last error
	for {
		st, err := v.status(ctx)
		if err == nil {
			g := statusGroup(st, group)
			switch {
			case g == nil:
				last = fmt.Errorf("the controller has no group %s", group)
			case g.MasterID == id:
				return forced, nil
			case !slices.Contains(g.InSync, id) && mayForce && !forced && time.Since(began) > limit/2 && holdsMost(g, id):
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				var ans *protocol.ControllerElectResponseHeader
				ans, _, last = v.client.Elect(cctx, &protocol.ControllerElectRequestHeader{
					Cluster: g.Cluster, BrokerName: group, To: id, Force: true})
				cancel()
				if last == nil {
					forced = true
					if ans.MayLoseBytes > 0 {
						return forced, fmt.Errorf("forcing broker %d of %s master may have lost %d bytes", id, group, ans.MayLoseBytes)
					}
				}
			case !slices.Contains(g.InSync, id):
				last = fmt.Errorf("broker %d of %s not in sync yet (in-sync %v)", id, group, g.InSync)
			default:
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				_, _, last = v.client.Elect(cctx, &protocol.ControllerElectRequestHeader{
					Cluster: g.Cluster, BrokerName: group, To: id})
				cancel()
			}
		} else {
			last = err
		}
		if time.Now().After(deadline) {
			return forced, fmt.Errorf("giving %s back to broker %d: %w", group, id, last)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return forced, err
		}
	}
}

// holdsMost reports whether member id of g is up and its log ends at or
// past every member's.
func holdsMost(g *protocol.ControllerGroup, id int64) bool {
	var mine *protocol.ControllerMember
	for i := range g.Members {
		if g.Members[i].ID == id {
			mine = &g.Members[i]
		}
	}
	if mine == nil || !mine.Alive {
		return false
	}
	for _, m := range g.Members {
		if m.LogEnd > mine.LogEnd {
			return false
		}
	}
	return true
}

// history is every group's epoch history, for the ledger checker.
func (v *controllerView) history(ctx context.Context) ([]ledger.Epoch, error) {
	st, err := v.status(ctx)
	if err != nil {
		return nil, err
	}
	var out []ledger.Epoch
	for _, g := range st.Groups {
		for _, h := range g.History {
			e := ledger.Epoch{Group: g.BrokerName, Epoch: h.Epoch, MasterID: h.MasterID, Addr: h.Addr}
			if h.ElectedAtMillis > 0 {
				e.At = time.UnixMilli(h.ElectedAtMillis)
			}
			out = append(out, e)
		}
	}
	return out, nil
}
