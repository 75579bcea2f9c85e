// Package idc holds zonemq's IDC (data centre) policy as pure functions: how a
// client id carries its IDC, own-IDC-first ordering, which consumers are
// eligible for a broker's queues, and RocketMQ's average queue allocation.
//
// The package does no I/O and imports nothing from zonemq, so the name
// server, the broker and the SDK all decide from the same code: every
// consumer that is given the same inputs computes the same answer.
//
// IDC names compare case-insensitively (see Same), as RocketMQ compares zone
// names; the empty name means "unknown IDC" and matches nothing.
package idc

import (
	"fmt"
	"strings"
)

// MaxNameLen bounds an IDC name; it travels in every client id and route.
const MaxNameLen = 64

// Same reports whether a and b name the same IDC: equal ignoring case, and
// not empty (an unknown IDC is nobody's own).
func Same(a, b string) bool {
	return a != "" && strings.EqualFold(a, b)
}

// CheckName reports whether name can serve as an IDC name: 1 to MaxNameLen
// characters from [A-Za-z0-9._-]. The limit keeps names safe inside client
// ids ('@'), flag lists (',', '=', ';') and logs.
func CheckName(name string) error {
	if name == "" {
		return fmt.Errorf("idc: empty IDC name")
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("idc: IDC name %q longer than %d characters", name, MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return fmt.Errorf("idc: IDC name %q: character %q not allowed (use letters, digits, '.', '_', '-')", name, c)
		}
	}
	return nil
}
