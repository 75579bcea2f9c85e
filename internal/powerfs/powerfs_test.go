package powerfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/zonemq/zonemq/internal/testutil"
)

// mount mounts a fresh backing directory, or skips where FUSE is not
// available.
func mount(t *testing.T) (*FS, string) {
	t.Helper()
	dir, backing := t.TempDir(), t.TempDir()
	p, err := Mount(dir, backing)
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("no FUSE here: %v", err)
	}
	testutil.NoError(t, err, "mount")
	t.Cleanup(func() { testutil.NoError(t, p.Unmount(), "unmount") })
	return p, dir
}

func write(t *testing.T, f *os.File, s string, off int64) {
	t.Helper()
	_, err := f.WriteAt([]byte(s), off)
	testutil.NoError(t, err, "write")
}

// A power loss keeps what was fsynced and undoes the rest: appends past
// the synced size, overwrites of synced bytes, a truncation, a file never
// synced; a file written to a temporary name, fsynced and renamed keeps
// its contents under the new name.
func TestPowerLossUndoesWhatWasNotSynced(t *testing.T) {
	p, dir := mount(t)
	log := filepath.Join(dir, "log")
	f, err := os.OpenFile(log, os.O_RDWR|os.O_CREATE, 0o644)
	testutil.NoError(t, err)
	write(t, f, "durable-", 0)
	testutil.NoError(t, f.Sync(), "fsync")
	write(t, f, "lost-tail", 8) // past the synced size
	write(t, f, "XX", 2)        // over synced bytes
	testutil.NoError(t, f.Truncate(4), "truncate")
	write(t, f, "again", 4)
	testutil.NoError(t, f.Close())

	testutil.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	never := filepath.Join(dir, "sub", "never-synced")
	testutil.NoError(t, os.WriteFile(never, []byte("gone"), 0o644))

	// Replaced twice by write-temporary, fsync, rename: the last one stays,
	// whole (the replaced files' records must not touch it).
	tmp, final := filepath.Join(dir, "meta.tmp"), filepath.Join(dir, "meta.json")
	for _, v := range []string{`{"v":"first, longer"}`, `{"v":1}`} {
		g, err := os.Create(tmp)
		testutil.NoError(t, err)
		write(t, g, v, 0)
		testutil.NoError(t, g.Sync())
		testutil.NoError(t, g.Close())
		testutil.NoError(t, os.Rename(tmp, final))
		got, err := os.ReadFile(final) // opened: tracked
		testutil.NoError(t, err)
		testutil.Equal(t, string(got), v)
	}

	loss, err := p.PowerLoss()
	testutil.NoError(t, err, "power loss")
	testutil.True(t, loss.Files >= 2 && loss.Bytes > 0, "something was undone", loss)

	got, err := os.ReadFile(log)
	testutil.NoError(t, err)
	testutil.Equal(t, string(got), "durable-", "the log as last fsynced")
	got, err = os.ReadFile(never)
	testutil.NoError(t, err)
	testutil.Equal(t, string(got), "", "a file never fsynced is empty")
	got, err = os.ReadFile(final)
	testutil.NoError(t, err)
	testutil.Equal(t, string(got), `{"v":1}`, "synced, then renamed: kept")

	// A second power loss with nothing written since changes nothing.
	loss, err = p.PowerLoss()
	testutil.NoError(t, err)
	testutil.Equal(t, loss.Files, 0, "nothing left to undo")
}

// A full disk refuses writes that grow a file and reports no free space;
// overwrites still work, and everything works again once it is not full.
func TestFullDiskRefusesGrowth(t *testing.T) {
	p, dir := mount(t)
	path := filepath.Join(dir, "data")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	testutil.NoError(t, err)
	defer f.Close()
	write(t, f, "0123456789", 0)
	p.SetFull(true)
	_, err = f.WriteAt([]byte("more"), 10)
	testutil.True(t, errors.Is(err, syscall.ENOSPC), "growing a file on a full disk", err)
	write(t, f, "ab", 0) // within the file: fine
	var st syscall.Statfs_t
	testutil.NoError(t, syscall.Statfs(dir, &st))
	testutil.Equal(t, st.Bavail, uint64(0), "no free blocks reported")
	// What a truncation frees, growth may use again, and no more.
	testutil.NoError(t, f.Truncate(6), "truncate on a full disk")
	write(t, f, "6789", 6)
	_, err = f.WriteAt([]byte("x"), 10)
	testutil.True(t, errors.Is(err, syscall.ENOSPC), "only the freed space", err)
	p.SetFull(false)
	write(t, f, "more", 10)
	got, _ := os.ReadFile(path)
	testutil.Equal(t, string(got), "ab23456789more")
}

// File systems reuse inode numbers: a file created after another was
// removed must be tracked as itself (its fsync once failed, naming the
// removed file's path), many times over.
func TestPowerLossTracksReusedInodes(t *testing.T) {
	p, dir := mount(t)
	final := filepath.Join(dir, "offsets.json")
	for i := range 200 {
		tmp, err := os.CreateTemp(dir, ".offsets.tmp*")
		testutil.NoError(t, err)
		write(t, tmp, fmt.Sprintf(`{"n":%d}`, i), 0)
		testutil.NoError(t, tmp.Sync(), "fsync of a new file", i)
		testutil.NoError(t, tmp.Close())
		testutil.NoError(t, os.Rename(tmp.Name(), final))
		if i%2 == 0 {
			scratch := filepath.Join(dir, "scratch")
			testutil.NoError(t, os.WriteFile(scratch, []byte("x"), 0o644))
			testutil.NoError(t, os.Remove(scratch))
		}
	}
	_, err := p.PowerLoss()
	testutil.NoError(t, err)
	got, err := os.ReadFile(final)
	testutil.NoError(t, err)
	testutil.Equal(t, string(got), `{"n":199}`, "the last fsynced version")
}
