package namesrv

import (
	"context"
	"encoding/json"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Handlers of the route queries clients and admin tools send.

// handleGetRouteInfoByTopic serves GET_ROUTEINFO_BY_TOPIC (105): the topic's
// route with every broker's IDC as zoneName, orderTopicConf from the
// ORDER_TOPIC_CONFIG KV namespace, and in zone mode (__ZONE_MODE=true,
// __ZONE_NAME=X) only zone X's brokers — or the full route when X has no
// writable broker for the topic.
func (s *Server) handleGetRouteInfoByTopic(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.GetRouteInfoRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	route, ok := s.routes.route(h.Topic)
	if !ok {
		return reply(req, protocol.TopicNotExist, "No topic route info in name server for the topic: "+h.Topic)
	}
	if conf, ok := s.kv.get(protocol.OrderTopicConfigNamespace, h.Topic); ok {
		route.OrderTopicConf = conf
	}
	if h.ZoneMode && h.ZoneName != "" {
		if narrowed, ok := filterByZone(route, h.ZoneName); ok {
			route = narrowed
		} else {
			s.logger.Debug("zone has no writable broker for the topic; serving the full route",
				"topic", h.Topic, "zone", h.ZoneName)
		}
	}
	resp := reply(req, protocol.Success, "")
	resp.Body = route.Encode()
	return resp
}

// handleGetBrokerClusterInfo serves GET_BROKER_CLUSTER_INFO (106):
// RocketMQ's ClusterInfo plus each broker address's liveness.
func (s *Server) handleGetBrokerClusterInfo(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	resp := reply(req, protocol.Success, "")
	resp.Body, _ = json.Marshal(s.routes.clusterInfo())
	return resp
}

// handleGetAllTopicListFromNameServer serves
// GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206): every topic with a route.
func (s *Server) handleGetAllTopicListFromNameServer(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	resp := reply(req, protocol.Success, "")
	resp.Body, _ = json.Marshal(protocol.TopicList{TopicList: s.routes.topics()})
	return resp
}

// handleDeleteTopicInNamesrv serves DELETE_TOPIC_IN_NAMESRV (216): drop a
// topic's route, or with clusterName only that cluster's queues of it.
// System topics are refused. The brokers that hosted the topic are asked
// for a full registration, so a topic a broker still has comes back within
// a heartbeat (see routeTable.deleteTopic).
func (s *Server) handleDeleteTopicInNamesrv(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.DeleteTopicFromNamesrvRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	if protocol.IsSystemTopic(h.Topic) {
		return reply(req, protocol.NoPermission, "system topic "+h.Topic+" cannot be deleted from the routes")
	}
	if s.routes.deleteTopic(h.Topic, h.ClusterName) {
		s.logger.Info("topic deleted", "topic", h.Topic, "cluster", h.ClusterName, "peer", conn.RemoteAddr())
	}
	return reply(req, protocol.Success, "")
}

// handleGetTopicsByCluster serves GET_TOPICS_BY_CLUSTER (224): the topics
// hosted by any broker of a cluster.
func (s *Server) handleGetTopicsByCluster(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.GetTopicsByClusterRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	resp := reply(req, protocol.Success, "")
	resp.Body, _ = json.Marshal(protocol.TopicList{TopicList: s.routes.topicsByCluster(h.Cluster)})
	return resp
}
