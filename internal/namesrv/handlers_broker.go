package namesrv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Handlers of the requests brokers send: registration, light heartbeat,
// data-version check, unregistration and single-topic registration.

// reply builds a response with code and remark.
func reply(req *remoting.Command, code protocol.ResponseCode, remark string) *remoting.Command {
	return remoting.NewResponse(req, int32(code), remark)
}

// decodeHeader fills h from req's ext fields; on failure it returns the
// INVALID_PARAMETER response to send.
func decodeHeader(req *remoting.Command, h protocol.Header) *remoting.Command {
	if err := h.SetExt(req.ExtFields); err != nil {
		return reply(req, protocol.InvalidParameter,
			fmt.Sprintf("bad %s request header: %v", protocol.RequestCode(req.Code), err))
	}
	return nil
}

// validateBrokerIdentity checks the fields every broker request needs.
func validateBrokerIdentity(brokerName, brokerAddr, clusterName string, brokerID int64) error {
	switch {
	case brokerName == "":
		return errors.New("brokerName is empty")
	case brokerAddr == "":
		return errors.New("brokerAddr is empty")
	case clusterName == "":
		return errors.New("clusterName is empty")
	case brokerID < 0:
		return fmt.Errorf("brokerId %d is negative", brokerID)
	}
	return nil
}

// handleRegisterBroker serves REGISTER_BROKER (103): record the broker and
// its IDC, refresh its liveness, load a master's topic table when its data
// version changed, and answer with the master's addresses (for a slave) and
// the ORDER_TOPIC_CONFIG KV table.
func (s *Server) handleRegisterBroker(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.RegisterBrokerRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	if err := validateBrokerIdentity(h.BrokerName, h.BrokerAddr, h.ClusterName, h.BrokerID); err != nil {
		return reply(req, protocol.InvalidParameter, "bad REGISTER_BROKER: "+err.Error())
	}
	if h.BodyCRC32 != 0 {
		if got := bodyCRC32(req.Body); got != h.BodyCRC32 {
			s.logger.Warn("registration rejected: body checksum mismatch", "brokerName", h.BrokerName,
				"brokerAddr", h.BrokerAddr, "peer", conn.RemoteAddr(), "sent", h.BodyCRC32, "computed", got)
			return reply(req, protocol.SystemError, "crc32 not match")
		}
	}
	reg, err := decodeRegisterBody(req.Body, h.Compressed, s.opts.MaxTopicsPerBroker)
	if errors.Is(err, errTooManyTopics) {
		s.logger.Warn("registration refused: too many topics", "brokerName", h.BrokerName, "brokerAddr", h.BrokerAddr,
			"peer", conn.RemoteAddr(), "err", err)
		return reply(req, protocol.SystemError, err.Error())
	}
	if err != nil {
		s.logger.Warn("registration rejected: bad body", "brokerName", h.BrokerName, "brokerAddr", h.BrokerAddr,
			"peer", conn.RemoteAddr(), "compressed", h.Compressed, "err", err)
		return reply(req, protocol.InvalidParameter, "bad REGISTER_BROKER body: "+err.Error())
	}
	res, err := s.routes.registerBroker(&h, reg, conn, s.now())
	if errors.Is(err, errTooManyTopics) {
		s.logger.Warn("registration refused: the name server's topic entries are full", "brokerName", h.BrokerName,
			"brokerAddr", h.BrokerAddr, "peer", conn.RemoteAddr(), "err", err)
		return reply(req, protocol.SystemError, err.Error())
	}
	if errors.Is(err, errInstanceClaimed) {
		// The claimant retries every heartbeat: say it once a minute.
		key := h.BrokerName + "/" + strconv.FormatInt(h.BrokerID, 10) + "/" + h.Instance
		if last, ok := s.claimLogged.Load(key); !ok || s.now().Sub(last.(time.Time)) > time.Minute {
			s.claimLogged.Store(key, s.now())
			s.logger.Error("registration refused: another broker process holds the slot", "brokerName", h.BrokerName,
				"brokerAddr", h.BrokerAddr, "brokerId", h.BrokerID, "peer", conn.RemoteAddr(), "err", err)
		}
		return reply(req, protocol.NoPermission, err.Error())
	}
	if errors.Is(err, errRegistrationHeld) {
		s.logger.Warn("registration refused: the broker is live on another connection", "brokerName", h.BrokerName,
			"brokerAddr", h.BrokerAddr, "brokerId", h.BrokerID, "zone", h.ZoneName, "peer", conn.RemoteAddr(), "err", err)
		s.confirmElected(conn, &h)
		return reply(req, protocol.NoPermission, err.Error())
	}
	if err != nil {
		return reply(req, protocol.SystemError, err.Error())
	}
	if res.first {
		s.logger.Info("broker registered", "brokerName", h.BrokerName, "brokerAddr", h.BrokerAddr,
			"brokerId", h.BrokerID, "cluster", h.ClusterName, "zone", h.ZoneName, "topics", len(reg.topics),
			"peer", conn.RemoteAddr())
	} else if res.topicsLoaded {
		s.logger.Debug("broker topic table reloaded", "brokerName", h.BrokerName, "brokerAddr", h.BrokerAddr,
			"topics", len(reg.topics), "dataVersion", reg.dataVersion.Counter)
	}

	resp := reply(req, protocol.Success, "")
	rh := protocol.RegisterBrokerResponseHeader{HAServerAddr: res.haServerAddr, MasterAddr: res.masterAddr}
	resp.ExtFields = rh.Ext()
	if table := s.kv.list(protocol.OrderTopicConfigNamespace); table != nil {
		resp.Body, _ = json.Marshal(protocol.KVTable{Table: table})
	}
	return resp
}

// handleUnregisterBroker serves UNREGISTER_BROKER (104): a broker shutting
// down cleanly leaves the routes at once. Unknown brokers get SUCCESS too;
// a live broker registered from another connection gets NO_PERMISSION and
// stays.
func (s *Server) handleUnregisterBroker(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.UnregisterBrokerRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	rm, ok, err := s.routes.unregisterBroker(&h, conn, s.now())
	if err != nil {
		s.logger.Warn("unregistration refused", "brokerName", h.BrokerName, "brokerAddr", h.BrokerAddr,
			"peer", conn.RemoteAddr(), "err", err)
		return reply(req, protocol.NoPermission, err.Error())
	}
	if ok {
		s.logRemoval(rm)
	}
	return reply(req, protocol.Success, "")
}

// handleBrokerHeartbeat serves BROKER_HEARTBEAT (904), the light heartbeat:
// it only refreshes a registered broker's last-seen time. A broker the name
// server does not know (expired, connection closed, name server restarted)
// gets BROKER_NOT_EXIST (211) and should send a full REGISTER_BROKER; so
// does a broker heard over another connection than the one it registered
// on, or one asked for its topic table again.
func (s *Server) handleBrokerHeartbeat(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.BrokerHeartbeatRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	if why := s.routes.heartbeat(&h, conn, s.now()); why != "" {
		return reply(req, protocol.BrokerNotExist,
			fmt.Sprintf("broker %s (%s) %s; register in full", h.BrokerName, h.BrokerAddr, why))
	}
	return reply(req, protocol.Success, "")
}

// handleQueryDataVersion serves QUERY_DATA_VERSION (322): tell a broker
// whether the name server's copy of its topic table is current.
func (s *Server) handleQueryDataVersion(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.QueryDataVersionRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	var dv protocol.DataVersion
	if len(req.Body) > 0 {
		if err := json.Unmarshal(req.Body, &dv); err != nil {
			return reply(req, protocol.InvalidParameter, "bad QUERY_DATA_VERSION body: "+err.Error())
		}
	}
	changed, have := s.routes.queryDataVersion(h.BrokerAddr, dv, conn, s.now())
	resp := reply(req, protocol.Success, "")
	resp.ExtFields = (&protocol.QueryDataVersionResponseHeader{Changed: changed}).Ext()
	if have != nil {
		resp.Body, _ = json.Marshal(have)
	}
	return resp
}

// handleRegisterTopicInNamesrv serves REGISTER_TOPIC_IN_NAMESRV (217): a
// topic's queue data on registered brokers (body: TopicRouteData).
func (s *Server) handleRegisterTopicInNamesrv(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.RegisterTopicRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	if err := protocol.ValidateTopic(h.Topic); err != nil {
		return reply(req, protocol.InvalidParameter, err.Error())
	}
	if protocol.IsSystemTopic(h.Topic) {
		return reply(req, protocol.NoPermission, "the route of system topic "+h.Topic+" comes from its brokers' registrations only")
	}
	route, err := protocol.DecodeTopicRouteData(req.Body)
	if err != nil {
		return reply(req, protocol.InvalidParameter, "bad REGISTER_TOPIC_IN_NAMESRV body: "+err.Error())
	}
	if len(route.QueueDatas) == 0 {
		return reply(req, protocol.Success, "")
	}
	if err := s.routes.registerTopic(h.Topic, route.QueueDatas); err != nil {
		return reply(req, protocol.InvalidParameter, err.Error())
	}
	s.logger.Info("topic registered", "topic", h.Topic, "brokers", len(route.QueueDatas))
	return reply(req, protocol.Success, "")
}
