//go:build linux || darwin || freebsd

package store

import "syscall"

// diskUsedRatio returns the used share of the file system holding dir, the
// way df computes Use%: used / (used + available to unprivileged users).
func diskUsedRatio(dir string) (float64, error) {
	used, total, err := diskSpace(dir)
	if err != nil || total == 0 {
		return 0, err
	}
	return float64(used) / float64(total), nil
}

// diskSpace returns the used bytes of the file system holding dir and its
// size as df counts it (used + available to unprivileged users).
func diskSpace(dir string) (used, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	bs := uint64(st.Bsize)
	used = (uint64(st.Blocks) - uint64(st.Bfree)) * bs
	return used, used + uint64(st.Bavail)*bs, nil
}
