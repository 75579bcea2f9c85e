// Package powerfs mounts a directory through FUSE so that a test can cut
// the power under the programs that write to it: every byte written since
// its file was last fsynced is undone, as after a real power loss with a
// disk that honours fsync and nothing else.
//
// The mount passes every call through to a backing directory (go-fuse's
// loopback file system) and remembers, per file, its size at the last
// fsync and the old contents of every synced byte overwritten since.
// PowerLoss puts those bytes back and cuts every file to its synced size.
// Directory operations (create, rename, unlink) are durable at once — as
// on a file system that journals metadata synchronously — so a file
// created and never fsynced survives a power loss empty, and the
// write-to-temporary, fsync, rename pattern keeps what it wrote.
//
// It needs Linux, /dev/fuse and the right to mount (root); Mount returns
// ErrUnavailable elsewhere. The drill's power fault uses it
// (internal/drill, docs/disaster-recovery.md).
package powerfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// ErrUnavailable means FUSE cannot be mounted here.
var ErrUnavailable = errors.New("powerfs: FUSE is not available (needs Linux, /dev/fuse and root)")

// FS is a mounted directory whose power can be cut.
type FS struct {
	dir, backing string
	server       *fuse.Server

	mu    sync.Mutex
	files map[uint64]*record // by the backing file's inode number

	// full makes the disk look full (SetFull); free is then the space
	// freed since (truncations, unlinks), which later growth may use.
	full    atomic.Bool
	spaceMu sync.Mutex
	free    int64
}

// SetFull makes the disk full, or no longer. While full it has no free
// space but what is freed meanwhile (a file truncated or removed): a write
// that grows a file beyond that, and any allocation, fail with ENOSPC;
// overwrites within a file succeed; statfs reports the free space left.
func (p *FS) SetFull(full bool) {
	p.spaceMu.Lock()
	p.free = 0
	p.full.Store(full)
	p.spaceMu.Unlock()
}

// refuseGrowth is ENOSPC when the disk is full and writing [off, off+n)
// to the file at path would grow it beyond the free space; otherwise it
// takes the growth from the free space.
func (p *FS) refuseGrowth(path string, off, n int64) syscall.Errno {
	if !p.full.Load() {
		return 0
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return syscall.ENOSPC
	}
	growth := off + n - st.Size
	if growth <= 0 {
		return 0
	}
	p.spaceMu.Lock()
	defer p.spaceMu.Unlock()
	if growth > p.free {
		return syscall.ENOSPC
	}
	p.free -= growth
	return 0
}

// freed returns n bytes to the free space of a full disk.
func (p *FS) freed(n int64) {
	if n <= 0 || !p.full.Load() {
		return
	}
	p.spaceMu.Lock()
	p.free += n
	p.spaceMu.Unlock()
}

// resize accounts for truncating the file at path to size: shrinking
// frees space, growing takes it (ENOSPC beyond the free space).
func (p *FS) resize(path string, size int64) syscall.Errno {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0 // the truncate itself will say
	}
	if size < st.Size {
		p.freed(st.Size - size)
		return 0
	}
	return p.refuseGrowth(path, st.Size, size-st.Size)
}

// record is what a power loss does to one file.
type record struct {
	mu     sync.Mutex // serialises a write's capture with the write
	ino    uint64     // the backing file's inode
	path   string     // backing path, kept up to date across renames
	synced int64      // size at the last fsync
	undo   []undo     // old contents of synced bytes overwritten since
}

type undo struct {
	off int64
	old []byte
}

// Loss is what a power loss undid.
type Loss struct {
	Files int   // files changed back
	Bytes int64 // bytes of unsynced data dropped or put back
}

// Mount serves backing at dir (both must exist) until Unmount.
func Mount(dir, backing string) (*FS, error) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	p := &FS{dir: dir, backing: backing, files: map[uint64]*record{}}
	root := &fs.LoopbackRoot{Path: backing}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, err
	}
	root.Dev = uint64(st.Dev)
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, fs: p}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	zero := time.Duration(0)
	server, err := fs.Mount(dir, root.RootNode, &fs.Options{
		// No caching of names or attributes: a power loss changes sizes
		// under the kernel's feet.
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{FsName: "zonemq-powerfs", Name: "powerfs", DirectMount: true,
			DirectMountStrict: true, MaxBackground: 64},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	p.server = server
	return p, nil
}

// unmountWait bounds how long Unmount waits for the kernel to end the
// connection.
const unmountWait = 10 * time.Second

// Unmount detaches the mount and stops serving. A mount still in use —
// open files, or a copy of the mount in another mount namespace (`ip netns
// exec` makes one per process) — is detached lazily: it goes on serving
// what still refers to it, until that ends.
func (p *FS) Unmount() error {
	done := make(chan error, 1)
	go func() { done <- p.server.Unmount() }()
	select {
	case err := <-done:
		if err == nil {
			return nil
		}
	case <-time.After(unmountWait):
	}
	err := syscall.Unmount(p.dir, syscall.MNT_DETACH)
	if errors.Is(err, syscall.EINVAL) {
		return nil // already unmounted here; others still refer to it
	}
	return err
}

// PowerLoss undoes every write not fsynced since. The programs writing to
// the mount must be stopped first (killed: their buffers die with them).
func (p *FS) PowerLoss() (Loss, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var loss Loss
	var errs []error
	for ino, r := range p.files {
		r.mu.Lock()
		n, err := r.rollBack()
		r.mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
		if n > 0 {
			loss.Files++
			loss.Bytes += n
		}
		delete(p.files, ino)
	}
	return loss, errors.Join(errs...)
}

// rollBack applies r's undo log and cuts the file to its synced size,
// returning how many bytes changed. Caller holds r.mu.
func (r *record) rollBack() (int64, error) {
	f, err := os.OpenFile(r.path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil // unlinked since: gone either way
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Ino != r.ino {
		return 0, nil // the path names another file now: this one was replaced
	}
	var n int64
	for i := len(r.undo) - 1; i >= 0; i-- {
		u := r.undo[i]
		if _, err := f.WriteAt(u.old, u.off); err != nil {
			return n, err
		}
		n += int64(len(u.old))
	}
	if st.Size() != r.synced {
		n += max(st.Size()-r.synced, 0)
		if err := f.Truncate(r.synced); err != nil {
			return n, err
		}
	}
	r.undo = nil
	return n, f.Sync()
}

// record returns the record of the file with inode ino at path, starting
// one (synced at size, what it holds now) the first time. A record of a
// file that is gone — its inode number now another file's, as file
// systems reuse them — is replaced; so is any record when fresh (a file
// just created).
func (p *FS) record(ino uint64, path string, size int64, fresh bool) *record {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.files[ino]
	if r != nil && !fresh && r.path != path {
		var st syscall.Stat_t
		if err := syscall.Stat(r.path, &st); err != nil || st.Ino != ino {
			r = nil // stale: the inode number was reused
		}
	}
	if r == nil || fresh {
		r = &record{ino: ino, path: path, synced: size}
		p.files[ino] = r
	}
	return r
}

// unlinked forgets the record of the file with inode ino at path.
func (p *FS) unlinked(ino uint64, path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.files[ino]; r != nil && r.path == path {
		delete(p.files, ino)
	}
}

// renamed moves the records at from (a file or a directory) to to; a file
// that to replaced is gone.
func (p *FS) renamed(from, to string, moved uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ino, r := range p.files {
		if r.path == to && ino != moved {
			delete(p.files, ino)
		}
	}
	for _, r := range p.files {
		r.mu.Lock()
		if r.path == from {
			r.path = to
		} else if rest, ok := strings.CutPrefix(r.path, from+"/"); ok {
			r.path = filepath.Join(to, rest) // a file of a renamed folder
		}
		r.mu.Unlock()
	}
}

// capture remembers the synced bytes of [off, off+n) before they change.
// Caller holds r.mu.
func (r *record) capture(off, n int64) error {
	end := min(off+n, r.synced)
	if off >= end {
		return nil
	}
	f, err := os.Open(r.path)
	if err != nil {
		return err
	}
	defer f.Close()
	old := make([]byte, end-off)
	k, err := f.ReadAt(old, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	// Bytes past the end now were cut by an earlier truncate, whose own
	// undo entry holds them.
	r.undo = append(r.undo, undo{off: off, old: old[:k]})
	return nil
}

// node is a loopback node whose files are tracked.
type node struct {
	fs.LoopbackNode
	fs *FS
}

// backingPath is the node's path in the backing directory.
func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}

// track returns the record of the node's file and its backing path.
func (n *node) track() (*record, error) {
	path := n.backingPath()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return nil, err
	}
	return n.fs.record(st.Ino, path, st.Size, false), nil
}

var (
	_ fs.NodeOpener    = (*node)(nil)
	_ fs.NodeCreater   = (*node)(nil)
	_ fs.NodeSetattrer = (*node)(nil)
	_ fs.NodeRenamer   = (*node)(nil)
	_ fs.NodeStatfser  = (*node)(nil)
	_ fs.NodeUnlinker  = (*node)(nil)
)

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	path := filepath.Join(n.backingPath(), name)
	var st syscall.Stat_t
	statErr := syscall.Lstat(path, &st)
	if errno := n.LoopbackNode.Unlink(ctx, name); errno != 0 {
		return errno
	}
	if statErr == nil {
		n.fs.unlinked(st.Ino, path)
		if st.Nlink <= 1 {
			n.fs.freed(st.Size)
		}
	}
	return 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	if errno := n.LoopbackNode.Statfs(ctx, out); errno != 0 {
		return errno
	}
	if n.fs.full.Load() && out.Bsize > 0 {
		n.fs.spaceMu.Lock()
		free := uint64(n.fs.free) / uint64(out.Bsize)
		n.fs.spaceMu.Unlock()
		out.Bfree, out.Bavail = free, free
	}
	return 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	r, err := n.track()
	if err != nil {
		return nil, 0, fs.ToErrno(err)
	}
	if flags&syscall.O_TRUNC != 0 {
		r.mu.Lock()
		err := r.capture(0, r.synced)
		r.mu.Unlock()
		if err != nil {
			return nil, 0, fs.ToErrno(err)
		}
	}
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &file{LoopbackFile: fh.(*fs.LoopbackFile), r: r, fs: n.fs}, fl, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ch, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	// A new file: nothing of it is durable until it is fsynced.
	r := n.fs.record(out.Ino, filepath.Join(n.backingPath(), name), 0, true)
	return ch, &file{LoopbackFile: fh.(*fs.LoopbackFile), r: r, fs: n.fs}, fl, 0
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok && f == nil {
		r, err := n.track()
		if err != nil {
			return fs.ToErrno(err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := r.capture(int64(size), r.synced); err != nil {
			return fs.ToErrno(err)
		}
		if errno := n.fs.resize(r.path, int64(size)); errno != 0 {
			return errno
		}
	}
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	from := filepath.Join(n.backingPath(), name)
	to := filepath.Join(n.RootData.Path, newParent.EmbeddedInode().Path(n.Root()), newName)
	var st syscall.Stat_t
	if err := syscall.Lstat(from, &st); err != nil {
		return fs.ToErrno(err)
	}
	if errno := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags); errno != 0 {
		return errno
	}
	n.fs.renamed(from, to, st.Ino)
	return 0
}

// file is a loopback file handle whose writes are recorded.
type file struct {
	*fs.LoopbackFile
	r  *record
	fs *FS
}

// PassthroughFd refuses the kernel's FUSE passthrough, which would send
// reads and writes straight to the backing file, past Write.
func (f *file) PassthroughFd() (int, bool) { return -1, false }

func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	if errno := f.fs.refuseGrowth(f.r.path, off, int64(len(data))); errno != 0 {
		return 0, errno
	}
	if err := f.r.capture(off, int64(len(data))); err != nil {
		return 0, fs.ToErrno(err)
	}
	return f.LoopbackFile.Write(ctx, data, off)
}

func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	var n int64
	for _, d := range data {
		n += int64(len(d))
	}
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	if errno := f.fs.refuseGrowth(f.r.path, off, n); errno != 0 {
		return 0, errno
	}
	if err := f.r.capture(off, n); err != nil {
		return 0, fs.ToErrno(err)
	}
	return f.LoopbackFile.Writev(ctx, data, off)
}

func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	if errno := f.LoopbackFile.Fsync(ctx, flags); errno != 0 {
		return errno
	}
	var st syscall.Stat_t
	if err := syscall.Stat(f.r.path, &st); err != nil {
		return fs.ToErrno(err)
	}
	f.r.synced, f.r.undo = st.Size, nil
	return 0
}

func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok {
		f.r.mu.Lock()
		defer f.r.mu.Unlock()
		if err := f.r.capture(int64(size), f.r.synced); err != nil {
			return fs.ToErrno(err)
		}
		if errno := f.fs.resize(f.r.path, int64(size)); errno != 0 {
			return errno
		}
	}
	return f.LoopbackFile.Setattr(ctx, in, out)
}

func (f *file) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	if f.fs.full.Load() {
		return syscall.ENOSPC
	}
	// Punching or zeroing a range changes its bytes; growing a file is
	// undone by the cut to the synced size.
	if err := f.r.capture(int64(off), int64(size)); err != nil {
		return fs.ToErrno(err)
	}
	return f.LoopbackFile.Allocate(ctx, off, size, mode)
}
