package broker

import (
	"fmt"

	"github.com/zonemq/zonemq/internal/protocol"
)

// ensureTraceTopic creates RMQ_SYS_TRACE_TOPIC (one queue) on a master
// when TraceTopicEnable is on, so the message-trace dispatchers of the
// RocketMQ clients (WithTrace) find a route and their trace records are
// stored, indexed by message id and key like any message. zonemq admin
// trace reads them back. The trace topic is the one system topic clients
// may send to (isClientWritable).
func (s *Server) ensureTraceTopic() error {
	if !s.opts.TraceTopicEnable || !s.isMaster() {
		return nil // a replica copies its master's topics
	}
	if _, _, err := s.topics.createIfAbsent(newTopicConfig(protocol.TraceTopic, 1, protocol.PermReadWrite)); err != nil {
		return fmt.Errorf("creating the trace topic %s: %w", protocol.TraceTopic, err)
	}
	return nil
}

// isClientWritable reports whether clients may send to a system topic:
// only to the trace topic, and only while it is enabled.
func (s *Server) isClientWritable(topic string) bool {
	return topic == protocol.TraceTopic && s.opts.TraceTopicEnable
}
