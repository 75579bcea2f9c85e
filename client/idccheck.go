package client

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zonemq/zonemq/internal/idc"
)

// checkIDC refuses a configured IDC that the address servers' list does not
// name, listing the IDCs it does name. It checks nothing when the list did
// not come from an address server (NamesrvAddrs only: their IDCs are
// unknown) or when ClientConfig.AllowUnknownIDC is set.
func (n *nameServers) checkIDC() error {
	cfg := n.c.cfg
	if cfg.IDC == "" || cfg.AllowUnknownIDC {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lastFetch.IsZero() {
		return nil
	}
	var known []string
	for _, ns := range n.list {
		if ns.IDC == "" {
			continue
		}
		if idc.Same(ns.IDC, cfg.IDC) {
			return nil
		}
		if !slices.Contains(known, ns.IDC) {
			known = append(known, ns.IDC)
		}
	}
	if len(known) == 0 {
		return nil // the address servers name no IDC at all
	}
	slices.Sort(known)
	return fmt.Errorf("%w %q: the address servers know %s (a client-only IDC needs AllowUnknownIDC)",
		ErrUnknownIDC, cfg.IDC, strings.Join(known, ", "))
}
