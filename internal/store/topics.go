package store

import "sort"

// Topics returns the topics that have at least one consume queue, sorted.
// The broker compares it with its topic table at start: a queue on disk
// whose topic the table lacks means the table lost data.
func (s *Store) Topics() []string {
	s.queuesMu.RLock()
	defer s.queuesMu.RUnlock()
	out := make([]string, 0, len(s.queues))
	for t, qs := range s.queues {
		if len(qs) > 0 {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}
