package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/zonemq/zonemq/internal/protocol"
)

// keyIndexEntrySize is one key-index entry: FNV-1a 64 hash of topic and key
// (uint64) and the record's commit-log offset (int64), big-endian.
const keyIndexEntrySize = 16

// keyIndex is a segment's sidecar file listing, in commit-log order, a hash
// of every key (KEYS words and UNIQ_KEY) of the segment's records. It is
// written under Store.putMu, fsynced by the checkpoint, repaired by recovery
// like the consume queues and deleted with its segment. A lookup scans it for
// the hash and confirms each candidate against the record itself.
type keyIndex struct {
	path  string
	file  *os.File
	size  atomic.Int64 // bytes of complete, published entries
	dirty atomic.Bool  // appended since the last sync
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
	x.size.Store(st.Size() - st.Size()%keyIndexEntrySize)
	return x, nil
}

// keyHash hashes a key within its topic.
func keyHash(topic, key string) uint64 {
	h := fnv.New64a()
	io.WriteString(h, topic)
	h.Write([]byte{1})
	io.WriteString(h, key)
	return h.Sum64()
}

// messageKeys returns the keys a message is indexed under: the words of its
// KEYS property and its UNIQ_KEY, without duplicates.
func messageKeys(props string) []string {
	var keys []string
	if v, ok := protocol.Property(props, protocol.PropertyKeys); ok {
		for _, k := range strings.Split(v, " ") {
			if k != "" && !containsString(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if v, ok := protocol.Property(props, protocol.PropertyUniqClientMessageID); ok && v != "" && !containsString(keys, v) {
		keys = append(keys, v)
	}
	return keys
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

// appendLocked writes entries at the end. Caller holds Store.putMu; the
// size is published by the caller via publish once the whole put succeeded.
func (x *keyIndex) appendLocked(entries []byte) error {
	if len(entries) == 0 {
		return nil
	}
	if _, err := x.file.WriteAt(entries, x.size.Load()); err != nil {
		return fmt.Errorf("store: write key index %s: %w", x.path, err)
	}
	return nil
}

// publish makes n more bytes visible to lookups.
func (x *keyIndex) publish(n int) {
	if n > 0 {
		x.size.Add(int64(n))
		x.dirty.Store(true)
	}
}

// sync fsyncs the file if entries were appended since the last sync.
func (x *keyIndex) sync() error {
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
	size := x.size.Load()
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
	x.size.Store(keep * keyIndexEntrySize)
	return int(n - keep), nil
}

// scan calls fn with the offset of every entry whose hash is h.
func (x *keyIndex) scan(h uint64, fn func(off int64)) error {
	size := x.size.Load()
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
	return nil
}

func (x *keyIndex) close() error { return x.file.Close() }
