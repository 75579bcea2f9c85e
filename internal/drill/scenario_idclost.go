package drill

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/zonemq/zonemq/client/admin"
)

// idcLostStep is the idc-lost scenario (replicated clusters only): every
// server process of idc1 is SIGKILLed and its data directories deleted, and
// idc1's consumers stop with it. What idc1's brokers acknowledged must all
// be consumed from the replicas in the other IDCs while idc1 is gone (no
// message lost or stranded).
//
// The repair is what an operator does after replacing the IDC: start its
// servers on empty disks (an empty broker joins its group as a replica and
// never leads it), promote the replica that holds the group's log
// (admin broker switch --force), and once the new broker has copied it, a
// planned switchover gives the group back to idc1.
func (d *drill) idcLostStep() step {
	i := d.cluster.idcs[0]
	peer := d.cluster.idcs[1]
	group := "broker-" + i.name
	return step{
		name: "idc-lost", failure: "kill",
		description: "SIGKILL every process of " + i.name + " and delete its data",
		fail: func(ctx context.Context) error {
			if err := d.work.stopConsumer(ctx, i.name); err != nil {
				return err
			}
			for _, p := range i.servers() {
				if err := p.kill(); err != nil {
					return err
				}
			}
			return os.RemoveAll(i.dir)
		},
		restore: func(ctx context.Context) error {
			if err := os.MkdirAll(i.dir, 0o755); err != nil {
				return err
			}
			for _, p := range []*proc{i.namesrv, i.addrsrv, i.broker} {
				if err := p.start(ctx); err != nil {
					return err
				}
			}
			for _, p := range i.replicas {
				if err := p.start(ctx); err != nil {
					return err
				}
			}
			giveBack := func() error { return d.giveGroupBack(ctx, group, i, peer) }
			if d.opts.Controller {
				// The controller elected a replica already; the empty
				// broker catches up and the controller gives it the group.
				giveBack = func() error { return d.ctl.failBack(ctx, group, 0, failbackLimit) }
			}
			if err := giveBack(); err != nil {
				return fmt.Errorf("giving %s back to %s: %w", group, i.name, err)
			}
			return d.work.startConsumer(ctx, i)
		},
	}
}

// giveGroupBack promotes group's surviving replica by force, waits until
// the broker of home (started empty) has copied the log, and switches the
// group back to it.
func (d *drill) giveGroupBack(ctx context.Context, group string, home, peer *idcProcs) error {
	cc := clientConfig(peer, d.opts.Logger)
	cc.ClusterSecretFile = d.cluster.secretFile // a promotion is a cluster-member request
	adm, err := admin.New(admin.Config{ClientConfig: cc})
	if err != nil {
		return err
	}
	if err := adm.Start(ctx); err != nil {
		return err
	}
	defer adm.Shutdown(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	// The replica to promote: the group's live member outside home.
	var survivor, homeID int64 = -1, -1
	for survivor < 0 || homeID < 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the group's members did not register (survivor %d, home %d)", survivor, homeID)
		}
		brokers, err := adm.Cluster(ctx)
		if err == nil {
			for _, b := range brokers {
				if b.Name == group && b.Alive && b.ID > 0 {
					if b.Addr == home.broker.addr {
						homeID = b.ID
					} else {
						survivor = b.ID
					}
				}
			}
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	if _, err := adm.SwitchMaster(ctx, group, survivor, true, 0); err != nil {
		return fmt.Errorf("forced promotion of replica %d: %w", survivor, err)
	}
	// The planned switchover waits for the home broker to catch up (it
	// copies the whole log); retry while it is still far behind.
	for {
		_, err := adm.SwitchMaster(ctx, group, homeID, false, 5*time.Second)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("switching back to %s (id %d): %w", home.name, homeID, err)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}
