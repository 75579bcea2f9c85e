package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// nameDigits is the width of segment and consume-queue file names: the
// zero-padded start offset, as RocketMQ names its files.
const nameDigits = 20

// offsetName returns the 20-digit file name of a file starting at off.
func offsetName(off int64) string {
	return fmt.Sprintf("%020d", off)
}

// parseOffsetName parses a 20-digit file name; ok is false for any other name.
func parseOffsetName(name string) (int64, bool) {
	if len(name) != nameDigits {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(name, 10, 64)
	return v, err == nil
}

// writeFileAtomic replaces path with data: write a temp file in the same
// directory, fsync it, rename it over path, fsync the directory. A crash
// leaves either the old or the new content, never a mix.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmpName, path); err != nil {
		return err
	}
	ok = true
	return syncDir(dir)
}

// syncDir fsyncs a directory so that creations, renames and removals in it
// survive a crash.
// SyncDir makes the entries of dir (creations, renames) durable, as the
// store does for its own folders.
func SyncDir(dir string) error { return syncDir(dir) }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	// Some file systems refuse fsync on a directory; nothing more can be done there.
	if errors.Is(err, os.ErrInvalid) {
		return nil
	}
	return err
}

// fileExists reports whether path exists (errors other than not-exist count as existing,
// so that a permission problem is not mistaken for a clean state).
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil || !errors.Is(err, os.ErrNotExist)
}
