package acl

import (
	"fmt"
	"strings"
)

// Perm is a permission on a topic or group, RocketMQ ACL 1.0's bit set.
type Perm uint8

// The permissions. DENY wins over everything; Any is what a request needs
// when either PUB or SUB will do.
const (
	Deny Perm = 1 << iota
	Any
	Pub
	Sub
)

// ParsePerm reads "DENY", "PUB", "SUB", "PUB|SUB" or "SUB|PUB".
func ParsePerm(s string) (Perm, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "DENY":
		return Deny, nil
	case "PUB":
		return Pub, nil
	case "SUB":
		return Sub, nil
	case "PUB|SUB", "SUB|PUB":
		return Pub | Sub, nil
	}
	return 0, fmt.Errorf("permission %q is not DENY, PUB, SUB or PUB|SUB", s)
}

// String renders p as the file spells it.
func (p Perm) String() string {
	switch {
	case p&Deny != 0:
		return "DENY"
	case p&(Pub|Sub) == Pub|Sub:
		return "PUB|SUB"
	case p&Pub != 0:
		return "PUB"
	case p&Sub != 0:
		return "SUB"
	case p&Any != 0:
		return "ANY"
	}
	return "NONE"
}

// allows reports whether an account holding owned may do what needs.
func (owned Perm) allows(needs Perm) bool {
	if owned&Deny != 0 {
		return false
	}
	if needs&Any != 0 {
		return owned&(Pub|Sub) != 0
	}
	return needs&owned == needs
}
