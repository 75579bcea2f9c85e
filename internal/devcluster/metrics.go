package devcluster

import "strconv"

// MetricsEndpoint is one server's Prometheus endpoint.
type MetricsEndpoint struct {
	IDC  string // the IDC the server runs in
	Role string // "addrsrv", "namesrv", "broker" or "replica"
	Name string // the broker's name and id for brokers and replicas; else the IDC
	URL  string // http://ADDR/metrics
}

// MetricsEndpoints lists the running servers that serve metrics (those
// whose Options hooks set MetricsListen), in IDC order: address server,
// name server, broker, then the replicas the IDC hosts.
func (c *Cluster) MetricsEndpoints() []MetricsEndpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []MetricsEndpoint
	add := func(node *idcNode, role, name, addr string) {
		if addr != "" {
			out = append(out, MetricsEndpoint{IDC: node.name, Role: role, Name: name, URL: "http://" + addr + "/metrics"})
		}
	}
	for _, node := range c.idcs {
		if node.addrsrv != nil {
			add(node, "addrsrv", node.name, node.addrsrv.MetricsAddr())
		}
		if node.namesrv != nil {
			add(node, "namesrv", node.name, node.namesrv.MetricsAddr())
		}
		if node.broker != nil {
			add(node, "broker", BrokerName(node.n)+" id 0", node.broker.MetricsAddr())
		}
		for _, r := range node.replicas {
			if r.srv != nil {
				add(node, "replica", BrokerName(r.group)+" id "+strconv.FormatInt(r.id, 10), r.srv.MetricsAddr())
			}
		}
	}
	return out
}
