package drill

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// The corrupt fault's damage: what a crash that garbled or lost the last
// writes leaves on a replica's disk. The broker, stopped by SIGKILL,
// verifies its newest segment when it starts again: a cut is a torn tail it
// truncates and fetches again; a flipped bit is a damaged record, and a
// replica moves its data aside and copies the group's log again
// (broker/reseed.go). A broker that is its group's master when the fault
// comes (the controller moved the role) is killed and restarted undamaged:
// its log may hold what no other copy has, and damaging it is a different
// fault (a master's disk lost), which the controller's election covers.

// damageSpan is how much of the newest segment the damage lands in.
const damageSpan = 64 << 10

// damageLog applies e's damage to the broker data directory dir and says
// what it did.
func damageLog(dir string, e ChaosEvent) (string, error) {
	if master, err := isMasterDir(dir); err != nil || master {
		if err != nil {
			return "", err
		}
		return "master now: killed and restarted, not damaged", nil
	}
	path, err := damageTarget(dir, e)
	if err != nil || path == "" {
		return "nothing to damage yet", err
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	size := st.Size()
	if size == 0 {
		return "empty segment: not damaged", nil
	}
	span := min(size, damageSpan)
	pos := size - span + int64(e.DamageAt*float64(span-1))
	return damageAt(path, relPath(dir, path), size, pos, e.Damage)
}

// damageAt cuts the file at path (named name in the progress line, size
// bytes long) at pos, or flips one bit of the byte there, as damage says.
func damageAt(path, name string, size, pos int64, damage string) (string, error) {
	if damage == "truncate" {
		if err := os.Truncate(path, pos); err != nil {
			return "", err
		}
		return fmt.Sprintf("cut %s from %d to %d bytes", name, size, pos), nil
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		return "", err
	}
	b[0] ^= byte(1) << (pos % 8)
	if _, err := f.WriteAt(b[:], pos); err != nil {
		return "", err
	}
	return fmt.Sprintf("flipped bit %d of byte %d of %s (%d bytes)", pos%8, pos, name, size), f.Close()
}

// damageTarget picks the file e damages in dir: the newest commit-log
// segment, or the newest file of one of the queues ("" if none yet).
func damageTarget(dir string, e ChaosEvent) (string, error) {
	if e.DamageFile == "consumequeue" {
		queues, err := filepath.Glob(filepath.Join(dir, "consumequeue", "*", "*"))
		if err != nil || len(queues) == 0 {
			return "", err
		}
		slices.Sort(queues)
		q := queues[min(len(queues)-1, int(e.DamageQueue*float64(len(queues))))]
		files, err := filepath.Glob(filepath.Join(q, "*"))
		if err != nil || len(files) == 0 {
			return "", err
		}
		slices.Sort(files)
		return files[len(files)-1], nil
	}
	segs, err := filepath.Glob(filepath.Join(dir, "commitlog", "*"))
	if err != nil || len(segs) == 0 {
		return "", err
	}
	slices.Sort(segs)
	return segs[len(segs)-1], nil
}

// isMasterDir reads a broker data directory's replication state.
func isMasterDir(dir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config", "replication.json"))
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var st struct {
		Master bool `json:"master"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return false, fmt.Errorf("%s: %w", dir, err)
	}
	return st.Master, nil
}

// relPath is path within dir, for the progress line.
func relPath(dir, path string) string {
	if rel, err := filepath.Rel(dir, path); err == nil {
		return rel
	}
	return path
}

// damageRaft applies e's damage to the Raft log (raft.db) of the controller
// voter whose data directory is dir: a bit flipped, or the file cut short,
// anywhere in it (bbolt places pages anywhere). The voter finds it when it
// starts, moves its Raft state aside and starts empty
// (controller/raftdamage.go) — or, when the damage fell on a free page,
// never notices, as a real disk's damage may go.
func damageRaft(dir string, e ChaosEvent) (string, error) {
	if dir == "" {
		return "no controller voter here: not damaged", nil
	}
	path := filepath.Join(dir, "raft.db")
	st, err := os.Stat(path)
	if os.IsNotExist(err) || err == nil && st.Size() == 0 {
		return "no Raft log yet: not damaged", nil
	}
	if err != nil {
		return "", err
	}
	size := st.Size()
	return damageAt(path, "the Raft log "+path, size, int64(e.DamageAt*float64(size-1)), e.Damage)
}
