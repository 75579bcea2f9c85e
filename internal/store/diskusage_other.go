//go:build !(linux || darwin || freebsd)

package store

// diskUsedRatio is not implemented here; the disk guard is then inactive.
func diskUsedRatio(string) (float64, error) { return 0, nil }

// diskSpace is not implemented here; the disk guard is then inactive.
func diskSpace(string) (used, total uint64, err error) { return 0, 0, nil }
