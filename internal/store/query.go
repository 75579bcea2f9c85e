package store

import (
	"errors"
	"math"
	"slices"
	"strings"

	"github.com/zonemq/zonemq/internal/protocol"
)

// defaultQueryMax is QueryByKey's limit when maxNum <= 0.
const defaultQueryMax = 32

// QueryByKey returns up to maxNum messages (<=0 means 32) of topic stored
// between begin and end (ms, inclusive; end <= 0 means no upper bound) that
// carry key among the space-separated words of their KEYS property or as
// their UNIQ_KEY. The newest matches win; they are returned oldest first.
//
// The index is persisted: one sidecar file per commit-log segment under
// Dir/index, repaired by recovery like the consume queues. A lookup scans the
// sidecars of the segments whose time range overlaps [begin, end].
func (s *Store) QueryByKey(topic, key string, maxNum int, begin, end int64) ([]*protocol.MessageExt, error) {
	return s.queryByKey(topic, key, maxNum, begin, end, 0)
}

// QueryRecentByKey is QueryByKey from begin, but it always looks through the
// newest segments (the one being written and the one before), whatever
// their store times say: a lookup for a record written moments ago then
// finds it even if a wall clock was stepped in between (a master's clock
// stepped forward stamps the next records ahead of it; a new master's
// clock may run behind the old one's).
func (s *Store) QueryRecentByKey(topic, key string, maxNum int, begin int64) ([]*protocol.MessageExt, error) {
	return s.queryByKey(topic, key, maxNum, begin, 0, 2)
}

// queryByKey is QueryByKey; the newest recent segments are looked through
// whatever their store times.
func (s *Store) queryByKey(topic, key string, maxNum int, begin, end int64, recent int) ([]*protocol.MessageExt, error) {
	if maxNum <= 0 {
		maxNum = defaultQueryMax
	}
	if end <= 0 {
		end = math.MaxInt64
	}
	h := keyHash(topic, key)
	segs := s.cl.snapshot()
	var out []*protocol.MessageExt
	var corrupt error
	for i := len(segs) - 1; i >= 0 && len(out) < maxNum; i-- {
		g := segs[i]
		always := i >= len(segs)-recent
		if newest := g.newestStoreTime.Load(); !always && newest != 0 && newest < begin {
			break // older segments are older still
		}
		if first := s.firstStoreTime(g); !always && first != 0 && first > end {
			continue
		}
		var offs []int64
		if err := g.index.scan(h, func(off int64) { offs = append(offs, off) }); err != nil {
			return nil, err
		}
		// Newest first within the segment too.
		for j := len(offs) - 1; j >= 0 && len(out) < maxNum; j-- {
			if j+1 < len(offs) && offs[j] == offs[j+1] {
				continue // two keys of one message hash alike
			}
			m, err := s.MessageAt(offs[j])
			if errors.Is(err, ErrCorruptRecord) {
				corrupt = err // logged and counted by MessageAt
				continue
			}
			if err != nil {
				continue // deleted under us
			}
			if m.Topic != topic || !always && (m.StoreTimestamp < begin || m.StoreTimestamp > end) || !hasKey(m.Properties, key) {
				continue
			}
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *protocol.MessageExt) int {
		switch {
		case a.CommitLogOffset < b.CommitLogOffset:
			return -1
		case a.CommitLogOffset > b.CommitLogOffset:
			return 1
		}
		return 0
	})
	if len(out) == 0 && corrupt != nil {
		// A damaged record may have been the match: say so rather than
		// answer "no such message".
		return nil, corrupt
	}
	return out, nil
}

// hasKey reports whether key is one of props' KEYS words or its UNIQ_KEY.
func hasKey(props, key string) bool {
	if v, ok := protocol.Property(props, protocol.PropertyUniqClientMessageID); ok && v == key {
		return true
	}
	if v, ok := protocol.Property(props, protocol.PropertyKeys); ok {
		for _, k := range strings.Split(v, " ") {
			if k == key {
				return true
			}
		}
	}
	return false
}

// firstStoreTime returns (and caches) the store time of g's first record.
func (s *Store) firstStoreTime(g *segment) int64 {
	if t := g.firstStoreTime.Load(); t != 0 {
		return t
	}
	t, err := s.storeTimeOf(g.start)
	if err != nil {
		return 0
	}
	g.firstStoreTime.CompareAndSwap(0, t)
	return t
}
