package drill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zonemq/zonemq/internal/powerfs"
)

// Power loss: every IDC's folder of the work directory (its servers' data,
// the controller voter's Raft log included) is a FUSE mount
// (internal/powerfs) over .disk-idcN, and the power fault cuts an IDC's
// power: every process of the IDC is killed, every write not fsynced is
// undone, and after the hold the IDC boots again. Mounted only for a
// campaign that may play power faults; where FUSE is not available the
// kind is left out of the default ones with a notice (and refused when
// asked for by name).

// FaultPower cuts the power of an IDC; FaultDiskFull fills its disk for
// the hold (writes that grow a file fail with ENOSPC, statfs shows no
// free space).
const (
	FaultPower    = "power"
	FaultDiskFull = "disk-full"
)

// powerDisks are the mounts of a campaign, by IDC name.
type powerDisks map[string]*powerfs.FS

// mountPowerDisks mounts every IDC's folder of c.
func mountPowerDisks(c *cluster) (powerDisks, error) {
	disks := powerDisks{}
	for _, i := range c.idcs {
		backing := filepath.Join(c.workDir, ".disk-"+i.name)
		if err := os.MkdirAll(backing, 0o755); err != nil {
			disks.unmount()
			return nil, err
		}
		fs, err := powerfs.Mount(i.dir, backing)
		if err != nil {
			disks.unmount()
			return nil, err
		}
		disks[i.name] = fs
	}
	return disks, nil
}

// unmount detaches every mount; their processes are stopped by then.
func (ds powerDisks) unmount() error {
	var errs []error
	for _, fs := range ds {
		errs = append(errs, fs.Unmount())
	}
	return errors.Join(errs...)
}

// planWantsPower reports whether the campaign may play power faults:
// asked for by name, in the default kinds, or in the plan replayed.
func planWantsPower(c *ChaosOptions) bool {
	if c.Replay != "" {
		plan, err := readChaosPlan(c.Replay)
		return err == nil && slices.ContainsFunc(plan.Events, func(e ChaosEvent) bool { return e.Kind == FaultPower || e.Kind == FaultDiskFull })
	}
	return len(c.Faults) == 0 || slices.Contains(c.Faults, FaultPower) || slices.Contains(c.Faults, FaultDiskFull)
}

// idcProcesses are the fault targets that live in idc (its servers and
// its consumer), sorted: what its power fault locks, kills and restarts.
func idcProcesses(targets map[string]faultable, idc string) []string {
	var out []string
	for name := range targets {
		if strings.HasPrefix(name, idc+"/") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// powerOff kills every process of the IDC and undoes what they had not
// fsynced; the returned function boots the IDC again.
func (d *drill) powerOff(e ChaosEvent) (func(context.Context) error, error) {
	disk := d.power[e.Target]
	if disk == nil {
		return nil, fmt.Errorf("no power-loss disk for %s (FUSE not mounted)", e.Target)
	}
	var idc *idcProcs
	for _, i := range d.cluster.idcs {
		if i.name == e.Target {
			idc = i
		}
	}
	if idc == nil {
		return nil, fmt.Errorf("no IDC %s", e.Target)
	}
	consumer := d.work.consumer(idc.name)
	if consumer != nil {
		consumer.kill()
	}
	var peers []*peerWork
	for _, w := range d.peers {
		if w.idc == idc {
			peers = append(peers, w)
			w.kill()
		}
	}
	for _, p := range idc.servers() {
		p.kill()
	}
	loss, err := disk.PowerLoss()
	if err != nil {
		return nil, err
	}
	d.progress.printf("chaos: %s lost power: %d files lost %d unsynced bytes", e.Target, loss.Files, loss.Bytes)
	return func(ctx context.Context) error {
		// Boot in the cluster's order: name server, address server, brokers.
		boot := append([]*proc{idc.namesrv, idc.addrsrv, idc.broker}, idc.replicas...)
		if idc.proxy != nil {
			boot = append(boot, idc.proxy)
		}
		for _, p := range boot {
			if err := supervised(p.start)(ctx); err != nil {
				return err
			}
		}
		if consumer != nil {
			if err := supervised(consumer.start)(ctx); err != nil {
				return err
			}
		}
		for _, w := range peers {
			if err := supervised(w.start)(ctx); err != nil {
				return err
			}
		}
		return nil
	}, nil
}
