package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// dirLock is the exclusive lock on a data directory: an flock on Dir/lock,
// held by the open file for the life of the Store and released by the kernel
// if the process dies.
type dirLock struct {
	file *os.File
}

// lockDir takes the lock or fails with ErrLocked.
func lockDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: open lock file: %w", err)
	}
	if err := flockExclusive(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s is held by another store (another broker process, or a second Open in this one): %v", ErrLocked, path, err)
	}
	// The pid is for operators only; the flock is the lock.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dirLock{file: f}, nil
}

// unlock releases the lock.
func (l *dirLock) unlock() error {
	if l == nil || l.file == nil {
		return nil
	}
	err := funlock(l.file)
	if cerr := l.file.Close(); err == nil {
		err = cerr
	}
	l.file = nil
	return err
}
