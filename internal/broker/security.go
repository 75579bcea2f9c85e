package broker

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// The broker's side of the ACL (docs/security.md): which permission each
// request code needs. Codes not listed need a valid signature and nothing
// more (reads of stats, runtime info, message views by id, transactions).

// adminCodes change the broker for every client: an admin account only.
var adminCodes = map[protocol.RequestCode]bool{
	protocol.UpdateAndCreateTopic:           true,
	protocol.DeleteTopicInBroker:            true,
	protocol.UpdateAndCreateSubscriptionGrp: true,
	protocol.DeleteSubscriptionGroup:        true,
	protocol.ResetConsumerClientOffset:      true,
	protocol.InvokeBrokerToResetOffset:      true,
	protocol.WipeWritePermOfBroker:          true,
	// RocketMQ's admin list has it too: a plain account could otherwise
	// set diskMaxUsedSpaceRatio=1 and stop every send.
	protocol.UpdateBrokerConfig: true,
	// Replication between the brokers of a group: only brokers (with an
	// admin account) may fetch a log, push metadata or move the master.
	protocol.ReplicaHello:    true,
	protocol.ReplicaFetch:    true,
	protocol.ReplicaSyncMeta: true,
	protocol.ReplicaSwitch:   true,
	protocol.ReplicaPromote:  true,
}

// aclRequest describes req for the ACL: the topics and groups it touches
// and the permission it needs on each. A body that cannot be read adds no
// resource; its handler refuses it.
func aclRequest(c *remoting.Conn, req *remoting.Command) acl.Request {
	code := protocol.RequestCode(req.Code)
	// The send handlers take ext fields in their wire form (RawExt): the
	// ACL reads them as a map.
	r := acl.Request{Code: req.Code, Ext: req.ExtMap(), Body: req.Body, RemoteAddr: c.RemoteAddr(), Admin: adminCodes[code]}
	ext := func(k string) string { return req.ExtFields[k] }
	topic := func(name string, p acl.Perm) {
		if name != "" {
			r.Resources = append(r.Resources, acl.Resource{Name: name, Perm: p})
		}
	}
	group := func(name string, p acl.Perm) {
		if name != "" {
			r.Resources = append(r.Resources, acl.Resource{Name: name, Group: true, Perm: p})
		}
	}
	switch code {
	case protocol.SendMessage, protocol.SendReplyMessage:
		topic(ext("topic"), acl.Pub)
	case protocol.SendMessageV2, protocol.SendBatchMessage:
		// SEND_MESSAGE_V2's short keys: b is the topic.
		topic(firstNonEmpty(ext("b"), ext("topic")), acl.Pub)
	case protocol.PullMessage, protocol.QueryConsumerOffset, protocol.UpdateConsumerOffset:
		topic(ext("topic"), acl.Sub)
		group(ext("consumerGroup"), acl.Sub)
	case protocol.QueryMessage, protocol.GetMaxOffset, protocol.GetMinOffset,
		protocol.SearchOffsetByTimestamp, protocol.GetEarliestMsgStoretime:
		topic(ext("topic"), acl.Sub)
	case protocol.ConsumerSendMsgBack:
		group(ext("group"), acl.Sub)
	case protocol.PopMessages, protocol.AckPopMessages, protocol.ChangePopInvisibleTime:
		topic(ext("topic"), acl.Sub)
		group(ext("consumerGroup"), acl.Sub)
	case protocol.GetConsumerListByGroup, protocol.UnregisterClient, protocol.QueryQueueLocks:
		group(ext("consumerGroup"), acl.Sub)
	case protocol.LockBatchMQ, protocol.UnlockBatchMQ:
		var b lockBatchBody
		if json.Unmarshal(req.Body, &b) == nil {
			group(b.ConsumerGroup, acl.Sub)
			for _, mq := range b.MQSet {
				topic(mq.Topic, acl.Sub)
			}
		}
	case protocol.HeartBeat:
		var hb protocol.HeartbeatData
		if json.Unmarshal(req.Body, &hb) == nil {
			for _, cd := range hb.ConsumerDataSet {
				group(cd.GroupName, acl.Sub)
				for _, sd := range cd.SubscriptionDataSet {
					topic(sd.Topic, acl.Sub)
				}
			}
		}
	}
	return r
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// checkACL answers NO_PERMISSION when the ACL is on and refuses req, and
// nil otherwise.
func (s *Server) checkACL(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	if s.acl == nil {
		return nil
	}
	err := s.acl.Check(aclRequest(c, req))
	if err == nil {
		return nil
	}
	if errors.Is(err, acl.ErrDenied) {
		s.logger.Debug("request refused by the ACL", "code", protocol.RequestCode(req.Code), "peer", c.RemoteAddr(), "err", err)
	}
	return errorf(req, protocol.NoPermission, "%s", err.Error())
}

// checkRecordSub answers NO_PERMISSION unless the ACL is off or the
// request's account may SUB topic: the topic of a record a request would
// return or copy, which its header does not name (view by offset id, a
// send-back by commit-log offset). A retry topic is checked as its group.
func (s *Server) checkRecordSub(c *remoting.Conn, req *remoting.Command, m *protocol.MessageExt) *remoting.Command {
	topics := []string{m.Topic}
	// A half or scheduled message waits in a system topic for its real
	// one: reading it is reading the real topic.
	if real, ok := protocol.Property(m.Properties, protocol.PropertyRealTopic); ok && real != "" && real != m.Topic {
		topics = append(topics, real)
	}
	return s.checkRecordPerm(c, req, acl.Sub, topics...)
}

// checkRecordPerm answers NO_PERMISSION unless the ACL is off or req's
// account holds perm on every one of topics, those of a record the request
// names only by its offset.
func (s *Server) checkRecordPerm(c *remoting.Conn, req *remoting.Command, perm acl.Perm, topics ...string) *remoting.Command {
	if s.acl == nil {
		return nil
	}
	r := acl.Request{Code: req.Code, Ext: req.ExtMap(), Body: req.Body, RemoteAddr: c.RemoteAddr()}
	for _, t := range topics {
		r.Resources = append(r.Resources, acl.Resource{Name: t, Perm: perm})
	}
	if err := s.acl.Check(r); err != nil {
		return errorf(req, protocol.NoPermission, "%s (the record the request names belongs to topic %v)", err.Error(), topics)
	}
	return nil
}

// signRequest signs a request the broker sends (to name servers, to the
// other brokers of its group, to the controller): the cluster secret's
// member MAC first, then the ACL signature over everything, each when the
// broker has it. Call it last.
func (s *Server) signRequest(req *remoting.Command) *remoting.Command {
	if s.opts.AccessKey == "" && s.opts.ClusterSecret == nil {
		return req
	}
	if req.ExtFields == nil {
		req.ExtFields = map[string]string{}
	}
	s.opts.ClusterSecret.Sign(req.Code, req.ExtFields, req.Body, time.Now())
	if s.opts.AccessKey != "" {
		acl.Sign(req.Code, req.ExtFields, req.Body, s.opts.AccessKey, s.opts.SecretKey, time.Now())
	}
	return req
}
