//go:build linux || darwin || freebsd

package store

import "syscall"

// diskUsedRatio returns the used share of the file system holding dir, the
// way df computes Use%: used / (used + available to unprivileged users).
func diskUsedRatio(dir string) (float64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	used := uint64(st.Blocks) - uint64(st.Bfree)
	total := used + uint64(st.Bavail)
	if total == 0 {
		return 0, nil
	}
	return float64(used) / float64(total), nil
}
