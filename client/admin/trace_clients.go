package admin

import (
	"context"
	"strings"
)

// identifyTraceClients fills the ClientID and ClientIDC of trace events
// from the clients connected now: a trace record names its client only by
// host (the IP the client put in its id), so each event's group is looked
// up in the brokers' producer or consumer connections
// (GET_PRODUCER_CONNECTION_LIST / GET_CONSUMER_CONNECTION_LIST) and the
// member whose client id starts with that IP names it. The IDC is the one
// the client id carries: a zonemq SDK client's, or a stock client's whose
// instance name ends in "@idc=NAME". Events stay unnamed when the client is
// gone, or when several members of the group share the host and disagree.
func (a *Client) identifyTraceClients(ctx context.Context, evs []TraceEvent, brokers []BrokerStatus) {
	type groupKey struct {
		producer bool
		group    string
	}
	members := map[groupKey][][2]string{} // (client id, IDC), every broker's view
	lookup := func(k groupKey) [][2]string {
		if m, ok := members[k]; ok {
			return m
		}
		var out [][2]string
		for _, b := range brokers {
			if b.ID != 0 || !b.Alive {
				continue
			}
			if k.producer {
				pcs, err := a.ProducerConnections(ctx, b.Addr, k.group)
				if err != nil {
					continue
				}
				for _, p := range pcs {
					out = append(out, [2]string{p.ClientID, p.IDC})
				}
				continue
			}
			gc, err := a.ConsumerConnections(ctx, b.Addr, k.group)
			if err != nil {
				continue
			}
			for _, m := range gc.Members {
				out = append(out, [2]string{m.ClientID, m.IDC})
			}
		}
		members[k] = out
		return out
	}
	for i := range evs {
		e := &evs[i]
		if e.ClientHost == "" || e.Group == "" {
			continue
		}
		host, _, _ := strings.Cut(e.ClientHost, ":")
		var id, idcName string
		ambiguous := false
		for _, m := range lookup(groupKey{producer: e.Type == TracePublish, group: e.Group}) {
			ip, _, _ := strings.Cut(m[0], "@")
			if ip != host {
				continue
			}
			switch {
			case id == "":
				id, idcName = m[0], m[1]
			case id != m[0] && idcName != m[1]:
				ambiguous = true
			}
		}
		if id != "" && !ambiguous {
			e.ClientID, e.ClientIDC = id, idcName
		}
	}
}
