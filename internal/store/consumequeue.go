package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
)

// cqEntrySize is one consume-queue entry: commit-log offset int64, record
// size int32, tag hash int64, big-endian (RocketMQ's CQ_STORE_UNIT_SIZE).
const cqEntrySize = 20

// cqTailFlushEntries is how many entries a queue gathers in memory before
// they are written to its file.
const cqTailFlushEntries = 512

// cqEntry is a decoded consume-queue entry.
type cqEntry struct {
	phys int64
	size int32
	tags int64
}

func putCQEntry(b []byte, e cqEntry) {
	binary.BigEndian.PutUint64(b[0:], uint64(e.phys))
	binary.BigEndian.PutUint32(b[8:], uint32(e.size))
	binary.BigEndian.PutUint64(b[12:], uint64(e.tags))
}

func getCQEntry(b []byte) cqEntry {
	return cqEntry{
		phys: int64(binary.BigEndian.Uint64(b[0:])),
		size: int32(binary.BigEndian.Uint32(b[8:])),
		tags: int64(binary.BigEndian.Uint64(b[12:])),
	}
}

// blank reports an all-zero entry: a hole left before a rebuilt queue's
// first entry (no record is smaller than the fixed header).
func (e cqEntry) blank() bool { return e.size <= 0 }

// consumeQueue indexes one topic/queue: entry q is the q-th message of the
// queue. Files hold perFile entries each and grow as written.
//
// Concurrency: appends run under Store.putMu and publish by storing
// maxOffset after the entry is in the tail; readers never look past
// maxOffset. tailMu guards the in-memory tail and every write to the files;
// mu guards the files slice (appends that add a file, retention that removes
// old ones). Readers take tailMu or mu only to copy from the tail or to pick
// a file, then read with ReadAt. Truncation and reset happen in recovery only.
type consumeQueue struct {
	topic   string
	queueID int32
	dir     string
	perFile int64
	handles *handleCache // shared by every queue of the store

	mu    sync.RWMutex
	files []*cqFile

	minOffset atomic.Int64 // first readable entry (older ones point at deleted segments)
	maxOffset atomic.Int64 // next entry to be written

	// The tail: entries [tailStart, maxOffset) are kept in memory and written
	// to the files in one batch once cqTailFlushEntries have gathered, at a
	// checkpoint, or before a truncation. Appends then cost no syscall, and
	// readers of the newest entries copy them from here. Entries below
	// tailStart are in the files. tailMu guards tail, tailStart and writes
	// to the files.
	tailMu    sync.Mutex
	tail      []byte
	tailStart int64
	// deferDirSync: new files skip their directory fsyncs because the
	// caller syncs the whole file system next (cqsync.go). Guarded by tailMu.
	deferDirSync bool

	// lastPhysEnd is the end of the record the last entry points at.
	// Caller holds Store.putMu (or runs recovery).
	lastPhysEnd int64
	// syncedOffset: entries below are fsynced. Touched by the checkpoint only.
	syncedOffset int64
}

func newConsumeQueue(root, topic string, queueID int32, perFile int, handles *handleCache) *consumeQueue {
	return &consumeQueue{
		topic:   topic,
		queueID: queueID,
		dir:     filepath.Join(root, topic, strconv.Itoa(int(queueID))),
		perFile: int64(perFile),
		handles: handles,
	}
}

// loadConsumeQueue opens the files of an existing queue directory, trims a
// partial or blank tail, and computes its offsets. Entries pointing past the
// commit log and entries pointing below its start are handled later by
// recovery (truncateTo) and correctMin.
func loadConsumeQueue(root, topic string, queueID int32, perFile int, handles *handleCache, log func(msg string, args ...any)) (*consumeQueue, error) {
	q := newConsumeQueue(root, topic, queueID, perFile, handles)
	des, err := os.ReadDir(q.dir)
	if err != nil {
		return nil, fmt.Errorf("store: read consume-queue dir: %w", err)
	}
	fileBytes := q.perFile * cqEntrySize
	for _, de := range des {
		name := de.Name()
		if de.IsDir() || name[0] == '.' {
			continue
		}
		byteOff, ok := parseOffsetName(name)
		if !ok || byteOff%fileBytes != 0 {
			return nil, fmt.Errorf("%w: unexpected file %s in consume queue %s (a file name is its start offset × 20, a multiple of %d)", ErrCorrupt, name, q.dir, fileBytes)
		}
		// Descriptors are opened on demand (handleCache), not here.
		q.files = append(q.files, &cqFile{start: byteOff / cqEntrySize, path: filepath.Join(q.dir, name), handles: q.handles})
	}
	sort.Slice(q.files, func(i, j int) bool { return q.files[i].start < q.files[j].start })
	if len(q.files) == 0 {
		return q, nil
	}
	for i := 1; i < len(q.files); i++ {
		if q.files[i].start != q.files[i-1].start+q.perFile {
			q.close()
			return nil, fmt.Errorf("%w: consume queue %s has a gap between files %s and %s", ErrCorrupt, q.dir, filepath.Base(q.files[i-1].path), filepath.Base(q.files[i].path))
		}
	}
	// A file before the last should be full; if one is short (its tail was
	// never made durable), the queue ends there and recovery re-dispatches.
	end := int64(-1)
	for i, f := range q.files {
		fileSize, err := f.size()
		if err != nil {
			q.close()
			return nil, err
		}
		n := fileSize / cqEntrySize
		if n > q.perFile {
			n = q.perFile
		}
		if i < len(q.files)-1 && n == q.perFile {
			continue
		}
		n, err = q.trimBlankTail(f, n)
		if err != nil {
			q.close()
			return nil, err
		}
		end = f.start + n
		if i < len(q.files)-1 {
			log("consume queue file is short; dropping the files after it (recovery re-dispatches their messages)",
				"queue", q.dir, "file", filepath.Base(f.path), "entries", n, "filesDropped", len(q.files)-1-i)
			for _, later := range q.files[i+1:] {
				later.close()
				os.Remove(later.path)
			}
			q.files = q.files[:i+1]
		}
		if fileSize != n*cqEntrySize {
			if err := f.truncate(n * cqEntrySize); err != nil {
				q.close()
				return nil, fmt.Errorf("store: truncate consume-queue file: %w", err)
			}
		}
		break
	}
	q.maxOffset.Store(end)
	q.tailStart = end
	// The first readable entry: skip a hole of blank entries (a rebuilt
	// queue), found by binary search since holes only form a prefix.
	first := q.files[0]
	lo, hi := first.start, min(end, first.start+q.perFile)
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, err := q.entryAt(mid)
		if err != nil {
			q.close()
			return nil, err
		}
		if e.blank() {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	q.minOffset.Store(lo)
	if err := q.refreshLastPhysEnd(); err != nil {
		q.close()
		return nil, err
	}
	return q, nil
}

// trimBlankTail returns n minus the blank entries at the end of f's first n.
func (q *consumeQueue) trimBlankTail(f *cqFile, n int64) (int64, error) {
	var b [cqEntrySize]byte
	for n > 0 {
		if err := f.readAt(b[:], (n-1)*cqEntrySize); err != nil {
			return 0, fmt.Errorf("store: read consume-queue file: %w", err)
		}
		if !getCQEntry(b[:]).blank() {
			break
		}
		n--
	}
	return n, nil
}

// refreshLastPhysEndAfter recomputes lastPhysEnd after a truncation to off,
// reading the file directly: the caller holds tailMu and the tail is empty.
func (q *consumeQueue) refreshLastPhysEndAfter(off int64) {
	q.lastPhysEnd = 0
	if off <= q.minOffset.Load() {
		return
	}
	f := q.fileFor(off - 1)
	if f == nil {
		return
	}
	var b [cqEntrySize]byte
	if err := f.readAt(b[:], (off-1-f.start)*cqEntrySize); err == nil {
		e := getCQEntry(b[:])
		q.lastPhysEnd = e.phys + int64(e.size)
	}
}

// refreshLastPhysEnd recomputes lastPhysEnd from the last entry.
func (q *consumeQueue) refreshLastPhysEnd() error {
	max := q.maxOffset.Load()
	q.lastPhysEnd = 0
	if max > q.minOffset.Load() {
		e, err := q.entryAt(max - 1)
		if err != nil {
			return err
		}
		q.lastPhysEnd = e.phys + int64(e.size)
	}
	return nil
}

// fileFor returns the file holding entry off, or nil.
func (q *consumeQueue) fileFor(off int64) *cqFile {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.fileForLocked(off)
}

func (q *consumeQueue) fileForLocked(off int64) *cqFile {
	if len(q.files) == 0 {
		return nil
	}
	i := (off - q.files[0].start)
	if i < 0 {
		return nil
	}
	i /= q.perFile
	if i >= int64(len(q.files)) {
		return nil
	}
	return q.files[i]
}

// entryAt reads entry off, which must be below the max offset.
func (q *consumeQueue) entryAt(off int64) (cqEntry, error) {
	var b [cqEntrySize]byte
	n, err := q.readEntries(off, b[:])
	if err != nil {
		return cqEntry{}, err
	}
	if n == 0 {
		return cqEntry{}, fmt.Errorf("%w: consume queue %s/%d has no entry %d", ErrNotFound, q.topic, q.queueID, off)
	}
	return getCQEntry(b[:]), nil
}

// readEntries reads entries from `from` into buf (a multiple of 20 bytes),
// stopping at the max offset, at the end of from's file and at the boundary
// between file and tail, and returns how many it read.
func (q *consumeQueue) readEntries(from int64, buf []byte) (int, error) {
	n := int64(len(buf) / cqEntrySize)
	if maxOff := q.maxOffset.Load(); from+n > maxOff {
		n = maxOff - from
	}
	if n <= 0 || from < 0 {
		return 0, nil
	}
	q.tailMu.Lock()
	if ts := q.tailStart; from >= ts {
		avail := int64(len(q.tail)/cqEntrySize) - (from - ts)
		n = min(n, avail)
		if n > 0 {
			copy(buf, q.tail[(from-ts)*cqEntrySize:(from-ts+n)*cqEntrySize])
		}
		q.tailMu.Unlock()
		return int(max(n, 0)), nil
	} else if from+n > ts {
		n = ts - from
	}
	q.tailMu.Unlock()
	f := q.fileFor(from)
	if f == nil {
		return 0, fmt.Errorf("%w: consume queue %s/%d has no file for offset %d", ErrNotFound, q.topic, q.queueID, from)
	}
	if end := f.start + q.perFile; from+n > end {
		n = end - from
	}
	if err := f.readAt(buf[:n*cqEntrySize], (from-f.start)*cqEntrySize); err != nil {
		return 0, fmt.Errorf("%w: consume queue %s/%d offset %d: %v", ErrNotFound, q.topic, q.queueID, from, err)
	}
	return int(n), nil
}

// nextFileStart returns the first offset of the file after the one that
// would hold off (RocketMQ's rollNextFile).
func (q *consumeQueue) nextFileStart(off int64) int64 {
	return off - off%q.perFile + q.perFile
}

// appendLocked adds encoded entries for offsets first, first+1, … to the
// tail; nothing is visible before publishLocked. The entries are kept even
// when writing a full tail to the files fails: the error is returned for
// the log, and the write is retried by the next flush. Caller holds
// Store.putMu (or runs recovery).
func (q *consumeQueue) appendLocked(first int64, entries []byte) error {
	q.tailMu.Lock()
	defer q.tailMu.Unlock()
	if want := q.tailStart + int64(len(q.tail)/cqEntrySize); first != want {
		return fmt.Errorf("store: consume queue %s/%d: entry %d appended where %d was expected", q.topic, q.queueID, first, want)
	}
	q.tail = append(q.tail, entries...)
	if len(q.tail) >= cqTailFlushEntries*cqEntrySize {
		return q.flushTailLocked()
	}
	return nil
}

// flushTail writes the tail to the files and drops its buffer, so that
// thousands of idle queues hold no memory between checkpoints.
func (q *consumeQueue) flushTail() error {
	q.tailMu.Lock()
	defer q.tailMu.Unlock()
	if err := q.flushTailLocked(); err != nil {
		return err
	}
	q.tail = nil
	return nil
}

// flushTailLocked writes the tail to the files. Caller holds tailMu.
func (q *consumeQueue) flushTailLocked() error {
	if len(q.tail) == 0 {
		return nil
	}
	if err := q.writeFiles(q.tailStart, q.tail); err != nil {
		return err
	}
	q.tailStart += int64(len(q.tail) / cqEntrySize)
	q.tail = q.tail[:0] // readers copy under tailMu, so the array is reusable
	return nil
}

// writeFiles writes encoded entries for offsets first, first+1, … to the
// files, creating them as needed. Caller holds tailMu.
func (q *consumeQueue) writeFiles(first int64, entries []byte) error {
	for len(entries) > 0 {
		f, err := q.fileForWrite(first)
		if err != nil {
			return err
		}
		n := min(int64(len(entries)/cqEntrySize), f.start+q.perFile-first)
		if err := f.writeAt(entries[:n*cqEntrySize], (first-f.start)*cqEntrySize); err != nil {
			return fmt.Errorf("store: write consume queue %s: %w", f.path, err)
		}
		entries = entries[n*cqEntrySize:]
		first += n
	}
	return nil
}

// fileForWrite returns the file for entry off, creating it (and the queue
// directory) when off starts a new file. Caller holds tailMu.
func (q *consumeQueue) fileForWrite(off int64) (*cqFile, error) {
	if f := q.fileFor(off); f != nil {
		return f, nil
	}
	start := off - off%q.perFile
	if n := len(q.files); n > 0 && q.files[n-1].start+q.perFile != start {
		return nil, fmt.Errorf("store: consume queue %s: entry %d does not follow file %s", q.dir, off, filepath.Base(q.files[n-1].path))
	}
	newDir := !fileExists(q.dir)
	if newDir {
		if err := os.MkdirAll(q.dir, 0o755); err != nil {
			return nil, fmt.Errorf("store: create consume-queue dir: %w", err)
		}
	}
	path := filepath.Join(q.dir, offsetName(start*cqEntrySize))
	file, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: create consume-queue file: %w", err)
	}
	// A lost directory entry would lose the queue: make the names durable.
	if !q.deferDirSync {
		if newDir {
			syncDir(filepath.Dir(filepath.Dir(q.dir)))
			syncDir(filepath.Dir(q.dir))
		}
		syncDir(q.dir)
	}
	f := &cqFile{start: start, path: path, handles: q.handles}
	q.handles.adopt(f, file)
	q.handles.release(f)
	q.mu.Lock()
	q.files = append(q.files, f)
	q.mu.Unlock()
	return f, nil
}

// publishLocked makes entries below max visible. Caller holds Store.putMu.
func (q *consumeQueue) publishLocked(max, lastPhysEnd int64) {
	q.maxOffset.Store(max)
	q.lastPhysEnd = lastPhysEnd
}

// truncateTo drops entries at and after off. The file holding off is kept
// (emptied if need be), so the queue's max offset survives a restart.
// Caller holds Store.putMu (or runs recovery).
func (q *consumeQueue) truncateTo(off int64) error {
	if off >= q.maxOffset.Load() {
		return nil
	}
	q.tailMu.Lock()
	defer q.tailMu.Unlock()
	if err := q.flushTailLocked(); err != nil {
		return err
	}
	q.tailStart = min(q.tailStart, off)
	defer q.refreshLastPhysEndAfter(off)
	q.mu.Lock()
	var keep []*cqFile
	var drop []*cqFile
	for _, f := range q.files {
		if f.start <= off || f.start == q.files[0].start {
			keep = append(keep, f)
		} else {
			drop = append(drop, f)
		}
	}
	q.files = keep
	q.mu.Unlock()
	for _, f := range drop {
		f.close()
		os.Remove(f.path)
	}
	if len(drop) > 0 {
		syncDir(q.dir)
	}
	// The cut is made durable at once: the log is refilled from the
	// master next, and a power loss that brought the dropped entries back
	// would leave them pointing at other records of the refilled log, a
	// queue one entry longer than its records that no fetch can continue
	// (the chaos campaign: "record at 20186206 has queue offset 1503 …,
	// the local queue is at 1504", for good).
	if f := q.fileFor(off); f != nil {
		if err := f.truncate((off - f.start) * cqEntrySize); err != nil {
			return fmt.Errorf("store: truncate consume-queue file: %w", err)
		}
		if err := f.datasync(); err != nil {
			return fmt.Errorf("store: fsync truncated consume-queue file: %w", err)
		}
	}
	q.maxOffset.Store(off)
	if q.minOffset.Load() > off {
		q.minOffset.Store(off)
	}
	if q.syncedOffset > off {
		q.syncedOffset = off
	}
	return nil
}

// correctMin deletes files (never the last) whose entries all point below
// clMin, then moves minOffset to the first entry at or above clMin. It
// returns the files deleted. Caller holds Store.maintMu.
func (q *consumeQueue) correctMin(clMin int64) (int, error) {
	deleted := 0
	for {
		q.mu.RLock()
		if len(q.files) < 2 {
			q.mu.RUnlock()
			break
		}
		f := q.files[0]
		q.mu.RUnlock()
		last := f.start + q.perFile - 1
		e, err := q.entryAt(last)
		if err != nil {
			return deleted, err
		}
		if e.blank() || e.phys+int64(e.size) > clMin {
			break
		}
		q.mu.Lock()
		q.files = q.files[1:]
		q.mu.Unlock()
		if q.minOffset.Load() < f.start+q.perFile {
			q.minOffset.Store(f.start + q.perFile)
		}
		f.close()
		if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return deleted, err
		}
		deleted++
	}
	// Binary search: commit-log offsets grow along a queue.
	lo, hi := q.minOffset.Load(), q.maxOffset.Load()
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, err := q.entryAt(mid)
		if err != nil {
			return deleted, err
		}
		if !e.blank() && e.phys >= clMin {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo > q.minOffset.Load() {
		q.minOffset.Store(lo)
	}
	return deleted, nil
}

// sync writes the tail, fsyncs the files holding entries added since the
// last sync and returns the max offset it covered. Caller holds
// Store.maintMu.
func (q *consumeQueue) sync() (int64, error) {
	max := q.maxOffset.Load()
	if max <= q.syncedOffset {
		return max, nil
	}
	// Entries below max are in the tail at least (published after append).
	if err := q.flushTail(); err != nil {
		return 0, err
	}
	q.mu.RLock()
	var files []*cqFile
	for _, f := range q.files {
		if f.start+q.perFile > q.syncedOffset && f.start < max {
			files = append(files, f)
		}
	}
	q.mu.RUnlock()
	for _, f := range files {
		if err := f.datasync(); err != nil && !errors.Is(err, os.ErrClosed) {
			return 0, fmt.Errorf("store: fsync consume queue %s: %w", f.path, err)
		}
	}
	q.syncedOffset = max
	return max, nil
}

// close closes the queue's files.
func (q *consumeQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, f := range q.files {
		f.close()
	}
}

// resetTo deletes every file of a queue with no readable entry and makes it
// start (empty) at off. Recovery only.
func (q *consumeQueue) resetTo(off int64) error {
	q.mu.Lock()
	files := q.files
	q.files = nil
	q.mu.Unlock()
	for _, f := range files {
		f.close()
		if err := os.Remove(f.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	q.tailMu.Lock()
	q.tail, q.tailStart = nil, off
	q.tailMu.Unlock()
	q.minOffset.Store(off)
	q.maxOffset.Store(off)
	q.syncedOffset = off
	q.lastPhysEnd = 0
	return nil
}
