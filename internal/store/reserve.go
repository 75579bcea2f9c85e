package store

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// reserveSize is the space the store holds back in Dir/reserve so that
// metadata the broker must write to start — its replication state, a
// checkpoint, a topic-table snapshot — can still be written on a disk that
// sends have filled: on ENOSPC the reserve is released and the write
// retried once. It is recreated when the disk has room again.
const reserveSize = 1 << 20

// diskReserve is the reserve file's state.
type diskReserve struct {
	mu   sync.Mutex
	path string
	held bool
}

// ensure creates the reserve file (written, not sparse, so its blocks are
// really taken) if it is missing. Failure is harmless: there is no reserve.
func (r *diskReserve) ensure() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held {
		return
	}
	if st, err := os.Stat(r.path); err == nil && st.Size() == reserveSize {
		r.held = true
		return
	}
	tmp := r.path + ".tmp"
	err := os.WriteFile(tmp, make([]byte, reserveSize), 0o600)
	if err == nil {
		err = os.Rename(tmp, r.path)
	}
	if err != nil {
		os.Remove(tmp)
		return
	}
	syncDir(filepath.Dir(r.path))
	r.held = true
}

// release deletes the reserve file and reports whether there was one.
func (r *diskReserve) release() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.held {
		return false
	}
	if err := os.Remove(r.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false
	}
	r.held = false
	return true
}

// withReserve runs write; when it fails with ENOSPC it releases the reserve
// (logged at Error, naming what needed it) and runs write once more.
func (s *Store) withReserve(what string, write func() error) error {
	err := write()
	if !errors.Is(err, syscall.ENOSPC) || !s.reserve.release() {
		return err
	}
	s.log.Error("the disk is full: released the store's 1 MiB reserve to write "+what, "dir", s.dir)
	return write()
}
