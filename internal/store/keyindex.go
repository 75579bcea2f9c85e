package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/zonemq/zonemq/internal/protocol"
)

// keyIndexEntrySize is one key-index entry: FNV-1a 64 hash of topic and key
// (uint64) and the record's commit-log offset (int64), big-endian.
const keyIndexEntrySize = 16

// keyIndexFlushBytes is how many bytes of entries a key index gathers in
// memory before writing them.
const keyIndexFlushBytes = 64 << 10

// keyIndex is a segment's sidecar file listing, in commit-log order, a hash
// of every key (KEYS words and UNIQ_KEY) of the segment's records. Entries
// gather in memory and are written in batches (when 64 KiB have gathered,
// when the segment is sealed, at every checkpoint); lookups see both. It is
// fsynced by the checkpoint, repaired by recovery like the consume queues and
// deleted with its segment. A lookup scans it for the hash and confirms each
// candidate against the record itself.
type keyIndex struct {
	path string
	file *os.File

	mu      sync.Mutex // guards pending, written and writes to the file
	pending []byte     // entries not yet written
	written int64      // bytes of complete entries in the file

	dirty atomic.Bool // written since the last fsync
}

func openKeyIndex(path string, create bool) (*keyIndex, error) {
	flags := os.O_RDWR | os.O_CREATE
	if create {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: open key index: %w", err)
	}
	x := &keyIndex{path: path, file: f}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	x.written = st.Size() - st.Size()%keyIndexEntrySize
	return x, nil
}

// keyHash hashes a key within its topic.
func keyHash(topic, key string) uint64 {
	// FNV-1a, 64 bits, by hand: hash/fnv's Hash64 costs allocations per
	// message (the hasher and each string's bytes). Same values: they are
	// on disk.
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(topic); i++ {
		h = (h ^ uint64(topic[i])) * prime64
	}
	h = (h ^ 1) * prime64
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * prime64
	}
	return h
}

// messageKeys returns the keys a message is indexed under: the words of its
// KEYS property and its UNIQ_KEY, without duplicates; and the UNIQ_KEY
// alone ("" without one).
func messageKeys(props string) (keys []string, uniq string) {
	if v, ok := protocol.Property(props, protocol.PropertyKeys); ok {
		for v != "" {
			var k string
			k, v, _ = strings.Cut(v, " ")
			if k != "" && !containsString(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if v, ok := protocol.Property(props, protocol.PropertyUniqClientMessageID); ok && v != "" {
		uniq = v
		if !containsString(keys, v) {
			keys = append(keys, v)
		}
	}
	return keys, uniq
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// appendKeyEntries appends one entry per hash for the record at off.
func appendKeyEntries(dst []byte, hashes []uint64, off int64) []byte {
	for _, h := range hashes {
		dst = binary.BigEndian.AppendUint64(dst, h)
		dst = binary.BigEndian.AppendUint64(dst, uint64(off))
	}
	return dst
}

// appendLocked adds entries; lookups see them at once. The entries are
// kept even if writing a full buffer fails (the error is returned for the
// log; the next flush retries). Caller holds Store.putMu (or runs recovery).
func (x *keyIndex) appendLocked(entries []byte) error {
	if len(entries) == 0 {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.pending = append(x.pending, entries...)
	if len(x.pending) >= keyIndexFlushBytes {
		return x.writePendingLocked()
	}
	return nil
}

// writePendingLocked writes the gathered entries. Caller holds mu.
func (x *keyIndex) writePendingLocked() error {
	if len(x.pending) == 0 {
		return nil
	}
	if _, err := x.file.WriteAt(x.pending, x.written); err != nil {
		return fmt.Errorf("store: write key index %s: %w", x.path, err)
	}
	x.written += int64(len(x.pending))
	x.pending = x.pending[:0]
	x.dirty.Store(true)
	return nil
}

// flush writes the gathered entries.
func (x *keyIndex) flush() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.writePendingLocked()
}

// sync writes the gathered entries and fsyncs the file if it changed.
func (x *keyIndex) sync() error {
	if err := x.flush(); err != nil {
		return err
	}
	if !x.dirty.Swap(false) {
		return nil
	}
	if err := datasync(x.file); err != nil {
		x.dirty.Store(true)
		return fmt.Errorf("store: fsync key index %s: %w", x.path, err)
	}
	return nil
}

// truncateFrom drops every entry for a record at or past off (recovery
// re-adds them from the commit log) and returns how many it dropped.
func (x *keyIndex) truncateFrom(off int64) (int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.writePendingLocked(); err != nil {
		return 0, err
	}
	size := x.written
	n := size / keyIndexEntrySize
	var e [keyIndexEntrySize]byte
	keep := n
	// Entries are in commit-log order: walk back from the end.
	for keep > 0 {
		if _, err := x.file.ReadAt(e[:], (keep-1)*keyIndexEntrySize); err != nil {
			return 0, fmt.Errorf("store: read key index %s: %w", x.path, err)
		}
		if int64(binary.BigEndian.Uint64(e[8:])) < off {
			break
		}
		keep--
	}
	st, err := x.file.Stat()
	if err != nil {
		return 0, err
	}
	if keep*keyIndexEntrySize != st.Size() {
		if err := x.file.Truncate(keep * keyIndexEntrySize); err != nil {
			return 0, fmt.Errorf("store: truncate key index %s: %w", x.path, err)
		}
	}
	x.written = keep * keyIndexEntrySize
	return int(n - keep), nil
}

// scan calls fn with the offset of every entry whose hash is h.
func (x *keyIndex) scan(h uint64, fn func(off int64)) error {
	x.mu.Lock()
	size := x.written
	pending := append([]byte(nil), x.pending...)
	x.mu.Unlock()
	buf := make([]byte, 64<<10)
	for pos := int64(0); pos < size; {
		n := min(int64(len(buf)), size-pos)
		if _, err := x.file.ReadAt(buf[:n], pos); err != nil {
			if errors.Is(err, os.ErrClosed) {
				return nil // the segment was deleted under us
			}
			return fmt.Errorf("store: read key index %s: %w", x.path, err)
		}
		for i := int64(0); i+keyIndexEntrySize <= n; i += keyIndexEntrySize {
			if binary.BigEndian.Uint64(buf[i:]) == h {
				fn(int64(binary.BigEndian.Uint64(buf[i+8:])))
			}
		}
		pos += n
	}
	for i := 0; i+keyIndexEntrySize <= len(pending); i += keyIndexEntrySize {
		if binary.BigEndian.Uint64(pending[i:]) == h {
			fn(int64(binary.BigEndian.Uint64(pending[i+8:])))
		}
	}
	return nil
}

func (x *keyIndex) close() error { return x.file.Close() }

// tail returns the hashes of the index's last n entries at most, oldest
// first.
func (x *keyIndex) tail(n int) ([]uint64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.writePendingLocked(); err != nil {
		return nil, err
	}
	from := max(0, x.written-int64(n)*keyIndexEntrySize)
	buf := make([]byte, x.written-from)
	if _, err := x.file.ReadAt(buf, from); err != nil {
		return nil, fmt.Errorf("store: read key index %s: %w", x.path, err)
	}
	out := make([]uint64, 0, len(buf)/keyIndexEntrySize)
	for i := 0; i+keyIndexEntrySize <= len(buf); i += keyIndexEntrySize {
		out = append(out, binary.BigEndian.Uint64(buf[i:]))
	}
	return out, nil
}
