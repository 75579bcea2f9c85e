package broker

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// maxDelayLevel is the highest RocketMQ delay level (1s … 2h).
const maxDelayLevel = 18

// handleSendMessage serves SEND_MESSAGE and SEND_REPLY_MESSAGE (long keys),
// SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE (keys a–n).
func (s *Server) handleSendMessage(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	return s.serveSend(ctx, c, req, nil)
}

// serveSend is handleSendMessage. With kept (the send batch, on the
// connection's read goroutine) a plain send that passed every check is kept
// there and answered when the batch is stored (nil response); any other
// send first stores what is kept, so a connection's sends are stored in
// arrival order.
func (s *Server) serveSend(ctx context.Context, c *remoting.Conn, req *remoting.Command, kept *inlineSends) *remoting.Command {
	var h protocol.SendMessageRequestHeader
	var err error
	switch protocol.RequestCode(req.Code) {
	case protocol.SendMessageV2, protocol.SendBatchMessage:
		var v2 protocol.SendMessageRequestHeaderV2
		err = v2.ReadCommand(req)
		h = v2.SendMessageRequestHeader
	default:
		err = h.ReadCommand(req)
	}
	if err != nil {
		return badHeader(req, err)
	}
	// Limits first: checkSend may create the topic, and a refused message
	// must leave nothing behind.
	batch := protocol.RequestCode(req.Code) == protocol.SendBatchMessage
	what := "message body"
	if batch {
		what = "batch body"
	}
	if len(req.Body) > s.opts.MaxMessageSize {
		return errorf(req, protocol.MessageIllegal, "the %s is %d bytes; this broker's limit (maxMessageSize) is %d bytes",
			what, len(req.Body), s.opts.MaxMessageSize)
	}
	if len(h.Properties) > protocol.MaxPropertiesLength {
		return errorf(req, protocol.MessageIllegal, "the message properties are %d bytes; the limit is %d bytes",
			len(h.Properties), protocol.MaxPropertiesLength)
	}
	if batch && strings.HasPrefix(h.Topic, protocol.RetryGroupPrefix) {
		return errorf(req, protocol.MessageIllegal, "batches cannot be sent to retry topic %s", h.Topic)
	}
	if !s.isMaster() {
		// Before checkSend, which may create the topic.
		return s.putErrorResponse(req, h.Topic, errNotMaster)
	}
	queueID, resp := s.checkSend(req, &h)
	if resp != nil {
		return resp
	}
	h.QueueID = queueID
	bornHost, _ := netip.ParseAddrPort(c.RemoteAddr())
	if batch {
		if kept != nil {
			s.storeKeptSends(c)
			if s.deferSendAcks() {
				hc := h // only this copy escapes to the goroutine
				return s.serveAside(c, req, kept, func(ctx context.Context) *remoting.Command {
					return s.sendBatch(ctx, req, &hc, bornHost)
				})
			}
		}
		return s.sendBatch(ctx, req, &h, bornHost)
	}
	m := &protocol.MessageExt{
		Topic:          h.Topic,
		QueueID:        h.QueueID,
		Flag:           h.Flag,
		SysFlag:        h.SysFlag,
		BornTimestamp:  h.BornTimestamp,
		BornHost:       bornHost,
		ReconsumeTimes: h.ReconsumeTimes,
		Body:           req.Body,
		Properties:     h.Properties,
	}
	if repeat := s.repeatOf(m); h.Retry || repeat {
		// An earlier attempt may have stored it (sendretry.go); what this
		// connection kept is stored first, so the lookup sees it.
		retry := func(ctx context.Context, h *protocol.SendMessageRequestHeader) *remoting.Command {
			if resp := s.storedRetry(ctx, req, h, m, repeat); resp != nil {
				return resp
			}
			return s.storeSend(ctx, c, req, h, m, delayLevel(m.Properties))
		}
		if kept != nil {
			s.storeKeptSends(c)
			if s.deferSendAcks() {
				hc := h // only this copy escapes to the goroutine
				return s.serveAside(c, req, kept, func(ctx context.Context) *remoting.Command { return retry(ctx, &hc) })
			}
		}
		return retry(ctx, &h)
	}
	level := delayLevel(m.Properties)
	plain := m.SysFlag&protocol.SysFlagTransactionMask != protocol.SysFlagTransactionPrep &&
		!(s.extra.timers != nil && isTimer(m.Properties)) && !(level > 0 && s.schedule != nil) &&
		!(strings.HasPrefix(h.Topic, protocol.RetryGroupPrefix) && s.beforeRetryStore != nil)
	if kept != nil {
		if plain {
			s.keep(c, kept, req, m) // inlinesends.go
			return nil
		}
		s.storeKeptSends(c)
		if s.deferSendAcks() {
			hc := h // only this copy escapes to the goroutine
			return s.serveAside(c, req, kept, func(ctx context.Context) *remoting.Command {
				return s.storeSend(ctx, c, req, &hc, m, level)
			})
		}
	}
	return s.storeSend(ctx, c, req, &h, m, level)
}

// storeSend stores m, the single message of req (routed, its delay level
// given), through the service its kind calls for, and answers.
func (s *Server) storeSend(ctx context.Context, c *remoting.Conn, req *remoting.Command, h *protocol.SendMessageRequestHeader,
	m *protocol.MessageExt, level int) *remoting.Command {
	var err error
	if strings.HasPrefix(h.Topic, protocol.RetryGroupPrefix) && s.beforeRetryStore != nil {
		if err := s.beforeRetryStore(ctx, h, m); err != nil {
			return errorf(req, protocol.SystemError, "handling the retry message for %s: %v", h.Topic, err)
		}
	}

	var res store.PutResult
	switch {
	case m.SysFlag&protocol.SysFlagTransactionMask == protocol.SysFlagTransactionPrep:
		if s.prepareTransaction == nil {
			return errorf(req, protocol.NoPermission, "broker %s does not take transaction messages yet", s.opts.BrokerName)
		}
		res, err = s.prepareTransaction(ctx, c, m)
	case s.extra.timers != nil && isTimer(m.Properties): // timer.go
		res, err = s.extra.timers.schedule(ctx, m)
	case level > 0 && s.schedule != nil:
		res, err = s.schedule(ctx, m, level)
	default:
		// TODO(schedule seam): while s.schedule is nil, a message with a
		// DELAY level is stored at once in its topic.
		res, err = s.putMessage(ctx, m)
	}
	if err != nil {
		return s.putErrorResponse(req, h.Topic, err)
	}
	msgID := res.MsgID
	if msgID == "" {
		msgID = protocol.OffsetMessageID(s.storeHost, res.CommitLogOffset)
	}
	uniq, _ := protocol.Property(m.Properties, protocol.PropertyUniqClientMessageID)
	return s.sendResponse(req, res, msgID, m.QueueID, uniq)
}

// checkSend applies the broker's rules to a send: topic name, system topics,
// existence (auto-creating it when allowed), write permission, queue id. It
// returns the queue to store in, or the refusal.
func (s *Server) checkSend(req *remoting.Command, h *protocol.SendMessageRequestHeader) (int32, *remoting.Command) {
	if err := protocol.ValidateTopic(h.Topic); err != nil {
		return 0, errorf(req, protocol.MessageIllegal, "%v", err)
	}
	if protocol.IsSystemTopic(h.Topic) && !s.isClientWritable(h.Topic) { // trace.go
		return 0, errorf(req, protocol.NoPermission, "sending to the system topic %s is forbidden", h.Topic)
	}
	cfg, ok := s.topics.get(h.Topic)
	if !ok {
		var resp *remoting.Command
		if cfg, resp = s.autoCreateTopic(req, h); resp != nil {
			return 0, resp
		}
	}
	if !protocol.Writeable(cfg.Perm) {
		return 0, errorf(req, protocol.NoPermission, "the topic %s on broker %s is not writable (perm %d)", h.Topic, s.opts.BrokerName, cfg.Perm)
	}
	if cfg.WriteQueueNums <= 0 {
		return 0, errorf(req, protocol.NoPermission, "the topic %s has no write queues on broker %s", h.Topic, s.opts.BrokerName)
	}
	queueID := h.QueueID
	if queueID < 0 {
		queueID = rand.Int32N(int32(cfg.WriteQueueNums))
	}
	if int(queueID) >= cfg.WriteQueueNums {
		// SYSTEM_ERROR, as in RocketMQ: the producer's route is stale and a
		// retry on another queue succeeds.
		return 0, errorf(req, protocol.SystemError, "request queueId[%d] is illegal: topic %s has %d write queues on broker %s",
			queueID, h.Topic, cfg.WriteQueueNums, s.opts.BrokerName)
	}
	return queueID, nil
}

// autoCreateTopic creates a topic on its first send: retry topics always,
// others when auto-creation is on and the producer names TBW102 as the
// template. The new topic is registered with every name server at once.
func (s *Server) autoCreateTopic(req *remoting.Command, h *protocol.SendMessageRequestHeader) (protocol.TopicConfig, *remoting.Command) {
	var cfg protocol.TopicConfig
	switch {
	case strings.HasPrefix(h.Topic, protocol.RetryGroupPrefix):
		cfg = newTopicConfig(h.Topic, 1, retryTopicPerm)
	case s.opts.AutoCreateTopic && h.DefaultTopic == protocol.AutoCreateTopicKey:
		tmpl, ok := s.topics.get(protocol.AutoCreateTopicKey)
		if !ok || tmpl.Perm&protocol.PermInherit == 0 {
			return cfg, errorf(req, protocol.TopicNotExist, "topic[%s] not exist, apply first please! (broker %s has no inheritable %s)",
				h.Topic, s.opts.BrokerName, protocol.AutoCreateTopicKey)
		}
		n := min(s.opts.DefaultTopicQueueNums, tmpl.WriteQueueNums)
		if h.DefaultTopicQueueNums > 0 {
			n = min(n, int(h.DefaultTopicQueueNums))
		}
		cfg = newTopicConfig(h.Topic, n, tmpl.Perm&^protocol.PermInherit)
	default:
		return cfg, errorf(req, protocol.TopicNotExist, "topic[%s] not exist, apply first please! (auto-creation is off on broker %s)",
			h.Topic, s.opts.BrokerName)
	}
	if resp := s.refuseTopicOnFullDisk(req, h.Topic); resp != nil {
		return cfg, resp
	}
	cfg, created, err := s.topics.createIfAbsent(cfg)
	if resp := s.diskFullResponse(req, err, "creating topic "+h.Topic); resp != nil {
		return cfg, resp
	}
	if err != nil {
		return cfg, s.topicCreateError(req, h.Topic, err)
	}
	if created {
		s.logger.Info("auto-created topic", "topic", h.Topic, "queues", cfg.WriteQueueNums, "producerGroup", h.ProducerGroup)
		s.topicsChanged()
	}
	return cfg, nil
}

// putMessage stores one message that is already routed (its final topic and
// queue). It is the send path's last step and the seam the retry, DLQ,
// schedule and transaction services store through.
func (s *Server) putMessage(ctx context.Context, m *protocol.MessageExt) (store.PutResult, error) {
	ms := [1]*protocol.MessageExt{m}
	return s.putMessages(ctx, ms[:])
}

// putMessages stores messages of one queue (a batch when more than one):
// only on a master, and, in sync replication, acknowledged only once the
// group's in-sync replicas hold them.
func (s *Server) putMessages(ctx context.Context, ms []*protocol.MessageExt) (store.PutResult, error) {
	s.writesInFlight.Add(1)
	defer s.writesInFlight.Add(-1)
	if err := s.repl.checkWritable(); err != nil {
		return store.PutResult{}, err
	}
	var res store.PutResult
	var err error
	if len(ms) == 1 {
		res, err = s.store.PutMessage(ctx, ms[0])
	} else {
		res, err = s.store.PutMessages(ctx, ms)
	}
	if err != nil {
		return res, err
	}
	s.putCount.Add(int64(len(ms)))
	return res, s.repl.waitReplicas(ctx, res.End)
}

// notMaster marks a refusal that says this broker is not, or no longer, its
// group's master (a replica, a master fenced by its lapsed lease, one
// handing over): the group may have another master by now, which the SDK
// looks up and retries on within the same send (protocol.ExtNotMaster).
func notMaster(resp *remoting.Command) *remoting.Command {
	if resp.ExtFields == nil {
		resp.ExtFields = map[string]string{}
	}
	resp.ExtFields[protocol.ExtNotMaster] = "true"
	return resp
}

// putErrorResponse maps a store error to the code clients act on.
func (s *Server) putErrorResponse(req *remoting.Command, topic string, err error) *remoting.Command {
	switch {
	case errors.Is(err, store.ErrDiskFull):
		s.logger.Warn("refusing a send: the disk is full", "topic", topic, "usedRatio", s.store.DiskUsedRatio())
		return errorf(req, protocol.ServiceNotAvailable, "the disk holding the data directory %s of broker %s is full (used %.0f%%, limit %.0f%%); send to another broker",
			s.opts.DataDir, s.opts.BrokerName, 100*s.store.DiskUsedRatio(), 100*s.opts.DiskMaxUsedRatio)
	case errors.Is(err, store.ErrMessageTooLarge):
		return errorf(req, protocol.MessageIllegal, "the message is larger than this broker's limit (maxMessageSize %d bytes)", s.opts.MaxMessageSize)
	case errors.Is(err, store.ErrIllegalMessage):
		return errorf(req, protocol.MessageIllegal, "%v", err)
	case errors.Is(err, store.ErrClosed):
		return errorf(req, protocol.ServiceNotAvailable, "broker %s is shutting down", s.opts.BrokerName)
	case errors.Is(err, errNotMaster):
		return notMaster(errorf(req, protocol.ServiceNotAvailable, "broker %s at %s is a replica (id %d): send to its master",
			s.opts.BrokerName, s.addr, s.repl.regID.Load()))
	case errors.Is(err, errLeaseExpired):
		return notMaster(errorf(req, protocol.ServiceNotAvailable, "broker %s is not acknowledging: its controller lease lapsed (%v); send to another broker",
			s.opts.BrokerName, err))
	case errors.Is(err, errWritesPaused):
		return notMaster(errorf(req, protocol.ServiceNotAvailable, "broker %s is handing over to a new master: send to another broker", s.opts.BrokerName))
	case errors.Is(err, errTooFewReplicas):
		return errorf(req, protocol.SlaveNotAvailable, "broker %s refuses the message, nothing was stored: %v", s.opts.BrokerName, err)
	case errors.Is(err, errReplicaTimeout):
		return errorf(req, protocol.FlushSlaveTimeout, "broker %s stored the message but its replicas did not confirm it, so it is not acknowledged: %v",
			s.opts.BrokerName, err)
	}
	if resp := s.diskFullResponse(req, err, "storing the message"); resp != nil {
		return resp
	}
	s.logger.Error("storing a message failed", "topic", topic, "err", err)
	return errorf(req, protocol.SystemError, "storing the message on broker %s failed", s.opts.BrokerName)
}

// sendResponse builds the answer to a stored send. Its header writes itself
// into the frame (remoting.Command.Header: no map), except a batch's: the
// metrics count a batch's messages from its msgId list (metrics.go).
func (s *Server) sendResponse(req *remoting.Command, res store.PutResult, msgID string, queueID int32, uniqKey string) *remoting.Command {
	code := protocol.Success
	if res.Status == store.PutFlushDiskTimeout {
		code = protocol.FlushDiskTimeout
	}
	resp := remoting.NewResponse(req, int32(code), "")
	rh := protocol.SendMessageResponseHeader{
		MsgID: msgID, QueueID: queueID, QueueOffset: res.QueueOffset, TransactionID: uniqKey,
		MsgRegion: DefaultRegion, TraceOn: true,
	}
	if s.repl != nil {
		rh.BrokerEpoch = s.repl.epoch()
	}
	if protocol.RequestCode(req.Code) == protocol.SendBatchMessage {
		resp.ExtFields = rh.Ext()
	} else {
		resp.Header = &rh
	}
	return resp
}

// delayLevel returns the message's DELAY property (0 when absent or not a
// positive number), capped at the highest level as RocketMQ does.
func delayLevel(props string) int {
	v, ok := protocol.Property(props, protocol.PropertyDelayLevel)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0
	}
	return min(n, maxDelayLevel)
}
