package drill

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/zonemq/zonemq/internal/store"
)

// Replica divergence: after the final heal and drain, with every broker
// stopped, each group's copies of the commit log must hold the same bytes
// over the range they all have. The drill opens each copy's store offline,
// as an operator's check would, and compares them chunk by chunk.

// GroupCopies is what the comparison found for one broker group.
type GroupCopies struct {
	Group string `json:"group"`
	// Copies are the members' log ranges [min, max), by data folder.
	Copies []LogRange `json:"copies"`
	// Compared is how many bytes every copy has and were compared;
	// DivergesAt the first offset where two copies differ (-1: none).
	Compared   int64  `json:"comparedBytes"`
	DivergesAt int64  `json:"divergesAt"`
	Detail     string `json:"detail,omitempty"`
}

// LogRange is one copy's commit log.
type LogRange struct {
	Dir string `json:"dir"`
	Min int64  `json:"min"`
	Max int64  `json:"max"`
}

// compareChunk is how much of each copy is read at a time.
const compareChunk = 4 << 20

// compareCopies compares the commit logs in dirs (one group's copies,
// their brokers stopped).
func compareCopies(group string, dirs []string) GroupCopies {
	g := GroupCopies{Group: group, DivergesAt: -1}
	var stores []*store.Store
	defer func() {
		for _, s := range stores {
			s.Close()
		}
	}()
	from, to := int64(0), int64(-1)
	for _, dir := range dirs {
		opts := store.NewOptions()
		opts.Dir = dir
		opts.Logger = slog.New(slog.DiscardHandler)
		s, err := store.Open(opts)
		if err != nil {
			g.Detail = fmt.Sprintf("%s does not open: %v", dir, err)
			return g
		}
		stores = append(stores, s)
		r := LogRange{Dir: dir, Min: s.CommitLogMinOffset(), Max: s.CommitLogMaxOffset()}
		g.Copies = append(g.Copies, r)
		from = max(from, r.Min)
		if to < 0 || r.Max < to {
			to = r.Max
		}
	}
	for off := from; off < to; {
		first, err := stores[0].ReadLog(off, compareChunk)
		if err != nil {
			g.Detail = fmt.Sprintf("%s at %d: %v", dirs[0], off, err)
			return g
		}
		n := min(int64(len(first)), to-off)
		for i, s := range stores[1:] {
			other, err := s.ReadLog(off, int(n))
			if err != nil {
				g.Detail = fmt.Sprintf("%s at %d: %v", dirs[i+1], off, err)
				return g
			}
			n = min(n, int64(len(other)))
			if k := mismatch(first[:n], other[:n]); k >= 0 {
				g.DivergesAt = off + int64(k)
				g.Detail = fmt.Sprintf("%s and %s differ at commit-log offset %d", dirs[0], dirs[i+1], g.DivergesAt)
				return g
			}
		}
		if n <= 0 {
			g.Detail = fmt.Sprintf("no progress at %d", off)
			return g
		}
		off += n
		g.Compared += n
	}
	return g
}

// mismatch is the first index where a and b differ (-1: equal).
func mismatch(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// compareReplicas stops every broker and compares each group's copies.
func (d *drill) compareReplicas() []GroupCopies {
	groups := map[string][]string{}
	for _, i := range d.cluster.idcs {
		for _, p := range append([]*proc{i.broker}, i.replicas...) {
			if err := p.terminate(10 * time.Second); err != nil {
				p.kill()
			}
			name := argAfter(p.args, "--name")
			groups[name] = append(groups[name], argAfter(p.args, "--data"))
		}
	}
	var names []string
	for n, dirs := range groups {
		if len(dirs) > 1 {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []GroupCopies
	for _, n := range names {
		out = append(out, compareCopies(n, groups[n]))
	}
	return out
}
