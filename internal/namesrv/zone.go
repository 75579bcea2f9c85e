package namesrv

import (
	"strings"

	"github.com/zonemq/zonemq/internal/protocol"
)

// filterByZone narrows a route to the brokers of zone (compared
// case-insensitively) and their queue data, for a GET_ROUTEINFO_BY_TOPIC in
// zone mode.
//
// It differs from RocketMQ 5's ZoneRouteRPCHook on purpose: when zone has
// no broker that a producer could send to (a master address and a writable
// queue of the topic), the full route is returned instead of a route with no
// usable broker, so a client of a failed IDC fails over to the other IDCs at
// once. RocketMQ also keeps other zones' brokers that have no master; zonemq
// keeps only zone's brokers, since in zonemq each IDC's consumers read their
// own IDC's brokers. orderTopicConf is left as it is. It reports whether the
// route was narrowed.
func filterByZone(r *protocol.TopicRouteData, zone string) (*protocol.TopicRouteData, bool) {
	keep := make(map[string]bool)
	for _, bd := range r.BrokerDatas {
		if strings.EqualFold(bd.ZoneName, zone) {
			keep[bd.BrokerName] = true
		}
	}
	if !zoneWritable(r, keep) {
		return r, false
	}
	out := &protocol.TopicRouteData{
		OrderTopicConf:    r.OrderTopicConf,
		FilterServerTable: map[string][]string{},
		TopicQueueMapping: r.TopicQueueMapping,
	}
	for _, bd := range r.BrokerDatas {
		if !keep[bd.BrokerName] {
			continue
		}
		out.BrokerDatas = append(out.BrokerDatas, bd)
		for _, addr := range bd.BrokerAddrs {
			if fs, ok := r.FilterServerTable[addr]; ok {
				out.FilterServerTable[addr] = fs
			}
		}
	}
	for _, qd := range r.QueueDatas {
		if keep[qd.BrokerName] {
			out.QueueDatas = append(out.QueueDatas, qd)
		}
	}
	return out, true
}

// zoneWritable reports whether one of the kept brokers has a master address
// and a writable queue of the route's topic.
func zoneWritable(r *protocol.TopicRouteData, keep map[string]bool) bool {
	withMaster := make(map[string]bool)
	for _, bd := range r.BrokerDatas {
		if keep[bd.BrokerName] && bd.MasterAddr() != "" {
			withMaster[bd.BrokerName] = true
		}
	}
	for _, qd := range r.QueueDatas {
		if withMaster[qd.BrokerName] && protocol.Writeable(qd.Perm) && qd.WriteQueueNums > 0 {
			return true
		}
	}
	return false
}
