package idc

import "strings"

// clientIDMarker introduces the IDC inside a client id. Stock brokers treat a
// client id as an opaque string (they only compare and sort it), so an extra
// '@'-separated part is carried through unchanged.
const clientIDMarker = "idc="

// FormatClientID returns a RocketMQ client id that carries the client's IDC in a way stock brokers tolerate:
// "<ip>@<instance>@idc=<idc>" (idc "" → "<ip>@<instance>").
//
// idc should pass CheckName; an IDC name containing '@' cannot be read back.
func FormatClientID(ip, instance, idc string) string {
	if idc == "" {
		return ip + "@" + instance
	}
	return ip + "@" + instance + "@" + clientIDMarker + idc
}

// IDCOfClientID returns the IDC a client id carries, or "" for stock clients.
//
// The IDC is the last '@'-separated part that starts with "idc=", looked for
// only from the third part on, so a stock id "<ip>@<instance>" never yields an
// IDC even when its instance name happens to start with "idc=".
func IDCOfClientID(id string) string {
	parts := strings.Split(id, "@")
	for i := len(parts) - 1; i >= 2; i-- {
		if v, ok := strings.CutPrefix(parts[i], clientIDMarker); ok {
			return v
		}
	}
	return ""
}
