package proxy

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/rmqpb"
)

// recallHandle names a pending timer message: its broker, its offset in
// that broker's timer queue, and its client id.
func recallHandle(broker string, queueOffset int64, msgID string) string {
	return strings.Join([]string{broker, strconv.FormatInt(queueOffset, 10), msgID}, "/")
}

// RecallMessage cancels a delay message that is not due yet, by the recall
// handle its send answered (ZONEMQ_RECALL_TIMER on its broker group's
// master). One already delivered, or a handle zonemq did not issue, is
// MESSAGE_NOT_FOUND / BAD_REQUEST.
func (s *Server) RecallMessage(ctx context.Context, req *rmqpb.RecallMessageRequest) (*rmqpb.RecallMessageResponse, error) {
	topic := req.GetTopic().GetName()
	if st := s.authorize(ctx, "RecallMessage", topicRes(topic, acl.Pub)); st != nil {
		return &rmqpb.RecallMessageResponse{Status: st}, nil
	}
	parts := strings.Split(req.GetRecallHandle(), "/")
	off, err := strconv.ParseInt(parts[min(1, len(parts)-1)], 10, 64)
	if len(parts) != 3 || err != nil || off < 0 || parts[0] == "" || parts[2] == "" {
		return &rmqpb.RecallMessageResponse{Status: status(rmqpb.Code_BAD_REQUEST,
			"recall handle %q was not issued by zonemq", req.GetRecallHandle())}, nil
	}
	addr, err := s.masterOf(ctx, topic, parts[0])
	if err != nil {
		return &rmqpb.RecallMessageResponse{Status: status(rmqpb.Code_INTERNAL_SERVER_ERROR, "%v", err)}, nil
	}
	_, err = s.conn.Call(ctx, addr, client.Request{Code: int32(protocol.RecallTimer),
		Ext: map[string]string{"queueOffset": parts[1], "uniqKey": parts[2]}})
	switch {
	case err == nil:
		return &rmqpb.RecallMessageResponse{Status: statusOK, MessageId: parts[2]}, nil
	case errors.Is(err, &client.ResponseError{Code: client.CodeQueryNotFound}):
		return &rmqpb.RecallMessageResponse{Status: status(rmqpb.Code_MESSAGE_NOT_FOUND, "%v", err)}, nil
	}
	return &rmqpb.RecallMessageResponse{Status: status(rmqpb.Code_INTERNAL_SERVER_ERROR, "%v", err)}, nil
}
