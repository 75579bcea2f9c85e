package store

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// blankMarkerLen is the end-of-segment marker: TOTALSIZE int32 (the rest of
// the segment) and protocol.BlankMagicCode. A record is placed in a segment
// only if the marker still fits after it, as RocketMQ does.
const blankMarkerLen = 8

// segment is one commit-log file. Records never straddle two segments; the
// file grows as records are written (it is not preallocated) and ends with a
// blank marker once the next record no longer fits.
type segment struct {
	start int64 // global commit-log offset of the file's first byte
	size  int64 // capacity: Options.SegmentSize
	path  string
	file  *os.File
	index *keyIndex // the segment's key index (sidecar file)

	// Store timestamps (ms) of the first and newest records, 0 until known.
	// newest drives retention; both bound QueryByKey's segment scan.
	firstStoreTime  atomic.Int64
	newestStoreTime atomic.Int64
}

// openSegment opens (or, with create, creates) the segment starting at start
// and its key-index sidecar.
func openSegment(logDir, indexDir string, start, size int64, create bool) (*segment, error) {
	path := filepath.Join(logDir, offsetName(start))
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: open commit-log segment: %w", err)
	}
	idx, err := openKeyIndex(filepath.Join(indexDir, offsetName(start)), create)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &segment{start: start, size: size, path: path, file: f, index: idx}, nil
}

// end is the global offset just past the segment's capacity.
func (g *segment) end() int64 { return g.start + g.size }

// fileSize returns the current length of the file.
func (g *segment) fileSize() (int64, error) {
	st, err := g.file.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// noteStoreTime records a record's store timestamp.
func (g *segment) noteStoreTime(ts int64) {
	g.firstStoreTime.CompareAndSwap(0, ts)
	if ts > g.newestStoreTime.Load() {
		g.newestStoreTime.Store(ts)
	}
}

// writeBlankMarker ends the segment at relative position rel.
func (g *segment) writeBlankMarker(rel int64) error {
	var b [blankMarkerLen]byte
	binary.BigEndian.PutUint32(b[0:], uint32(int32(g.size-rel)))
	binary.BigEndian.PutUint32(b[4:], protocol.BlankMagicCode)
	_, err := g.file.WriteAt(b[:], rel)
	return err
}

// sealTime stamps the file's mtime with the newest record's store time, so
// that after a restart retention can age the segment without scanning it.
func (g *segment) sealTime() {
	if ts := g.newestStoreTime.Load(); ts > 0 {
		t := time.UnixMilli(ts)
		os.Chtimes(g.path, t, t)
	}
}

// close closes the segment's files.
func (g *segment) close() error {
	err := g.file.Close()
	if g.index != nil {
		if ierr := g.index.close(); err == nil {
			err = ierr
		}
	}
	return err
}

// remove closes and deletes the segment's files. A reader still holding the
// segment gets os.ErrClosed, which it reports as a removed message.
func (g *segment) remove() error {
	g.close()
	err := os.Remove(g.path)
	if g.index != nil {
		if ierr := os.Remove(g.index.path); err == nil && !os.IsNotExist(ierr) {
			err = ierr
		}
	}
	return err
}
