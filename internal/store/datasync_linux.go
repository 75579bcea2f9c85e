//go:build linux

package store

import (
	"os"
	"syscall"
)

// datasync flushes f's data (and the metadata needed to read it back, such as
// its size) to disk. fdatasync skips timestamps, which an append-only file
// does not need.
func datasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
