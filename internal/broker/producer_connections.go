package broker

import (
	"context"
	"sort"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// handleGetProducerConnectionList serves GET_PRODUCER_CONNECTION_LIST
// (`mqadmin producerConnection`): the producers of a group whose heartbeats
// registered them here. A group with none gets SYSTEM_ERROR "the producer
// group[G] not exist", as a Java broker answers (RocketMQ has no
// PRODUCER_NOT_ONLINE code).
func (s *Server) handleGetProducerConnectionList(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.ProducerGroupRequestHeader
	if err := h.SetExt(req.ExtFields); err != nil {
		return badHeader(req, err)
	}
	chans := s.registry.producerChannels(h.ProducerGroup)
	if len(chans) == 0 {
		return errorf(req, protocol.SystemError, "the producer group[%s] not exist", h.ProducerGroup)
	}
	pc := protocol.ProducerConnection{ConnectionSet: []protocol.Connection{}}
	for _, ch := range chans {
		pc.ConnectionSet = append(pc.ConnectionSet, protocol.Connection{
			ClientID: ch.clientID, ClientAddr: ch.conn.RemoteAddr(), Language: ch.language, Version: ch.version,
		})
	}
	return successJSON(req, pc)
}

// producerChannels returns the live members of a producer group, sorted by
// client id.
func (r *clientRegistry) producerChannels(group string) []clientChannel {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []clientChannel
	for conn, ch := range r.producers[group] {
		if !connClosed(conn) {
			out = append(out, *ch)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].clientID < out[j].clientID })
	return out
}
