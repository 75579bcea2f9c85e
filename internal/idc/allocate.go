package idc

import (
	"slices"
	"strings"
)

// EligibleConsumers implements docs/architecture.md §2 flow 5 for one broker: given the broker's IDC, the group's consumer ids
// as that broker reports them, and whether an IDC has a live broker for the topic, it returns (sorted) the consumers of
// the broker's IDC plus those whose own IDC has no live broker for the topic; if that is empty, all consumers (sorted).
// Consumers with no IDC ("" from IDCOfClientID) count as eligible only in the all-consumers fallback.
//
// Duplicate ids are reported once. idcHasLiveBroker is asked at most once per
// distinct IDC (case-insensitively), so a callback whose answer changes while
// EligibleConsumers runs still yields one consistent result; nil means every
// IDC has a live broker. The result is a new slice; consumerIDs is not changed.
func EligibleConsumers(brokerIDC string, consumerIDs []string, idcHasLiveBroker func(idc string) bool) []string {
	all := slices.Clone(consumerIDs)
	slices.Sort(all)
	all = slices.Compact(all)

	live := map[string]bool{} // lower-cased IDC → has a live broker for the topic
	hasLive := func(name string) bool {
		if idcHasLiveBroker == nil {
			return true
		}
		key := strings.ToLower(name)
		v, ok := live[key]
		if !ok {
			v = idcHasLiveBroker(name)
			live[key] = v
		}
		return v
	}

	eligible := make([]string, 0, len(all))
	for _, id := range all {
		own := IDCOfClientID(id)
		if own == "" {
			continue
		}
		if Same(own, brokerIDC) || !hasLive(own) {
			eligible = append(eligible, id)
		}
	}
	if len(eligible) == 0 {
		return all
	}
	return eligible
}

// AllocateAveragely is RocketMQ's AllocateMessageQueueAveragely over n sorted items: it returns the [start,end) index
// range of the items owned by the consumer at index `me` of `consumers` (sorted) — (0,0) if me is not among them.
//
// The first n%len(consumers) consumers get one item more than the rest; when
// there are more consumers than items, the consumers past the n-th own
// nothing, which is also reported as (0,0). The range never exceeds [0,n), so
// items[start:end] is always safe. consumers must be sorted identically by
// every caller (EligibleConsumers' result is); it is not re-sorted here.
func AllocateAveragely(n int, consumers []string, me string) (start, end int) {
	index := slices.Index(consumers, me)
	if n <= 0 || index < 0 {
		return 0, 0
	}
	count := len(consumers)
	mod := n % count
	size := n / count
	if mod > 0 && index < mod {
		size++
	}
	if n <= count {
		size = 1
	}
	if mod > 0 && index < mod {
		start = index * size
	} else {
		start = index*size + mod
	}
	if start >= n {
		return 0, 0
	}
	return start, start + min(size, n-start)
}
