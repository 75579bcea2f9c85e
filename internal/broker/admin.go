package broker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// handleGetBrokerRuntimeInfo serves GET_BROKER_RUNTIME_INFO: a KVTable of
// figures for admin tools, named like RocketMQ's where one exists.
func (s *Server) handleGetBrokerRuntimeInfo(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	producerGroups, consumerGroups, clients := s.registry.counts()
	uptime := time.Since(s.bootTime)
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	table := map[string]string{
		"brokerVersionDesc":     "zonemq",
		"brokerVersion":         i(int64(remoting.Version)),
		"brokerName":            s.opts.BrokerName,
		"brokerId":              i(s.opts.BrokerID),
		"brokerAddr":            s.addr,
		"clusterName":           s.opts.Cluster,
		"idc":                   s.opts.IDC,
		"bootTimestamp":         i(s.bootTime.UnixMilli()),
		"runtime":               fmt.Sprintf("[ %d days, %d hours, %d minutes, %d seconds ]", int(uptime.Hours())/24, int(uptime.Hours())%24, int(uptime.Minutes())%60, int(uptime.Seconds())%60),
		"msgPutTotalSinceBoot":  i(s.putCount.Load()),
		"pullRequestsSinceBoot": i(s.pullCount.Load()),
		"parkedPulls":           strconv.Itoa(s.pulls.parked()),
		"commitLogMinOffset":    i(s.store.CommitLogMinOffset()),
		"commitLogMaxOffset":    i(s.store.CommitLogMaxOffset()),
		"commitLogDiskRatio":    strconv.FormatFloat(s.store.DiskUsedRatio(), 'f', 4, 64),
		"diskMaxUsedRatio":      strconv.FormatFloat(s.store.DiskMaxUsedRatio(), 'f', 4, 64),
		"topicCount":            strconv.Itoa(s.topics.len()),
		"producerGroupCount":    strconv.Itoa(producerGroups),
		"consumerGroupCount":    strconv.Itoa(consumerGroups),
		"clientConnectionCount": strconv.Itoa(clients),
		"namesrvRegistered":     s.namesrvs.describe(),
		"corruptRecordReads":    i(s.store.CorruptRecords()),
	}
	s.repl.describe(table)
	s.metrics.runtimeInfo(table)
	return successJSON(req, protocol.KVTable{Table: table})
}

// handleGetAllSubscriptionGroupConfig serves GET_ALL_SUBSCRIPTIONGROUP_CONFIG.
func (s *Server) handleGetAllSubscriptionGroupConfig(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	return successJSON(req, s.groups.snapshot())
}

// handleGetConsumeStats serves GET_CONSUME_STATS: per queue the broker's max
// offset, the group's committed offset and the store time of the last
// consumed message. Without a topic it covers every topic the group has
// committed offsets for.
func (s *Server) handleGetConsumeStats(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.GetConsumeStatsRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	committed := s.store.GroupOffsets(h.ConsumerGroup)
	topics := map[string]bool{}
	if h.Topic != "" {
		topics[h.Topic] = true
	} else {
		for t := range committed {
			topics[t] = true
		}
	}
	stats := protocol.ConsumeStats{OffsetTable: map[protocol.MessageQueue]protocol.OffsetWrapper{}}
	for topic := range topics {
		cfg, ok := s.topics.get(topic)
		if !ok {
			continue
		}
		for q := 0; q < cfg.ReadQueueNums; q++ {
			qid := int32(q)
			ow := protocol.OffsetWrapper{BrokerOffset: s.store.MaxOffset(topic, qid)}
			if off, ok := committed[topic][qid]; ok {
				ow.ConsumerOffset, ow.PullOffset = off, off
				if off > 0 {
					ow.LastTimestamp, _ = s.store.StoreTimeAt(topic, qid, off-1)
				}
			}
			stats.OffsetTable[protocol.MessageQueue{Topic: topic, BrokerName: s.opts.BrokerName, QueueID: q}] = ow
		}
	}
	return success(req, nil, stats.Encode())
}
