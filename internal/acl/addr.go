package acl

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// addrMatcher matches a client's IP against one white-list entry. The
// entry forms are RocketMQ's: "*" (everyone), an exact address, IPv4 with
// "*" for an octet ("192.168.0.*"), a range in the last octet
// ("192.168.0.1-100") or a set ("192.168.0.{1,2,3}"); plus CIDR
// ("10.1.0.0/16"). An empty entry matches nobody.
type addrMatcher func(ip net.IP) bool

// parseAddrPattern compiles one white-list entry.
func parseAddrPattern(s string) (addrMatcher, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return func(net.IP) bool { return false }, nil
	case s == "*" || s == "*.*.*.*":
		return func(net.IP) bool { return true }, nil
	case strings.Contains(s, "/"):
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			return nil, fmt.Errorf("white address %q: %w", s, err)
		}
		return n.Contains, nil
	}
	if ip := net.ParseIP(s); ip != nil {
		return ip.Equal, nil
	}
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return nil, fmt.Errorf("white address %q is not an IP, a CIDR or an IPv4 pattern like 192.168.0.* / 192.168.0.1-9 / 192.168.0.{1,2}", s)
	}
	var octets [4]func(byte) bool
	for i, p := range parts {
		m, err := parseOctet(p)
		if err != nil {
			return nil, fmt.Errorf("white address %q: %w", s, err)
		}
		octets[i] = m
	}
	return func(ip net.IP) bool {
		v4 := ip.To4()
		if v4 == nil {
			return false
		}
		for i := range 4 {
			if !octets[i](v4[i]) {
				return false
			}
		}
		return true
	}, nil
}

// parseOctet compiles "*", "n", "a-b" or "{a,b,c}".
func parseOctet(p string) (func(byte) bool, error) {
	if p == "*" {
		return func(byte) bool { return true }, nil
	}
	if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
		set := map[byte]bool{}
		for _, v := range strings.Split(p[1:len(p)-1], ",") {
			n, err := octet(v)
			if err != nil {
				return nil, err
			}
			set[n] = true
		}
		return func(b byte) bool { return set[b] }, nil
	}
	if lo, hi, ok := strings.Cut(p, "-"); ok {
		a, err := octet(lo)
		if err != nil {
			return nil, err
		}
		b, err := octet(hi)
		if err != nil {
			return nil, err
		}
		if a > b {
			return nil, fmt.Errorf("range %s runs backwards", p)
		}
		return func(x byte) bool { return x >= a && x <= b }, nil
	}
	n, err := octet(p)
	if err != nil {
		return nil, err
	}
	return func(b byte) bool { return b == n }, nil
}

func octet(s string) (byte, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > 255 {
		return 0, fmt.Errorf("%q is not an octet (0-255)", s)
	}
	return byte(n), nil
}

// hostIP extracts the IP of a "host:port" remote address.
func hostIP(remote string) net.IP {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	return net.ParseIP(host)
}
