package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// batchItemFixedLen is the fixed part of one client-encoded batch item:
// TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN (4 bytes each) and PROPLEN (2).
const batchItemFixedLen = 5*4 + 2

// batchItem is one message of a SEND_BATCH_MESSAGE body.
type batchItem struct {
	flag       int32
	body       []byte
	properties string
}

// decodeBatch splits a SEND_BATCH_MESSAGE body into its messages. Each item
// is TOTALSIZE | MAGICCODE | BODYCRC | FLAG | BODYLEN | BODY | PROPLEN(int16)
// | PROPERTIES; every length is checked against what is left.
func decodeBatch(b []byte) ([]batchItem, error) {
	var out []batchItem
	for off := 0; off < len(b); {
		rest := b[off:]
		if len(rest) < batchItemFixedLen {
			return nil, fmt.Errorf("item %d: %d bytes left, a message needs at least %d", len(out), len(rest), batchItemFixedLen)
		}
		total := int(int32(binary.BigEndian.Uint32(rest)))
		if total < batchItemFixedLen || total > len(rest) {
			return nil, fmt.Errorf("item %d: TOTALSIZE %d is outside %d..%d", len(out), total, batchItemFixedLen, len(rest))
		}
		item := rest[:total]
		flag := int32(binary.BigEndian.Uint32(item[12:]))
		bodyLen := int(int32(binary.BigEndian.Uint32(item[16:])))
		if bodyLen < 0 || 20+bodyLen+2 > total {
			return nil, fmt.Errorf("item %d: BODYLEN %d does not fit in TOTALSIZE %d", len(out), bodyLen, total)
		}
		body := item[20 : 20+bodyLen]
		propLen := int(binary.BigEndian.Uint16(item[20+bodyLen:]))
		if propLen > protocol.MaxPropertiesLength {
			return nil, fmt.Errorf("item %d: properties of %d bytes exceed the limit of %d", len(out), propLen, protocol.MaxPropertiesLength)
		}
		if 20+bodyLen+2+propLen != total {
			return nil, fmt.Errorf("item %d: TOTALSIZE %d does not match BODYLEN %d and PROPLEN %d", len(out), total, bodyLen, propLen)
		}
		props := string(item[20+bodyLen+2:])
		out = append(out, batchItem{flag: flag, body: body, properties: props})
		off += total
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the batch is empty")
	}
	return out, nil
}

// sendBatch stores every message of a batch as its own record, at
// consecutive offsets of one queue, and answers with the comma-joined
// offset message ids. The caller has checked the topic, the queue and the
// batch size.
func (s *Server) sendBatch(ctx context.Context, req *remoting.Command, h *protocol.SendMessageRequestHeader, bornHost netip.AddrPort) *remoting.Command {
	if h.SysFlag&protocol.SysFlagTransactionMask != 0 {
		return errorf(req, protocol.MessageIllegal, "batches cannot carry transaction messages")
	}
	items, err := decodeBatch(req.Body)
	if err != nil {
		return errorf(req, protocol.MessageIllegal, "SEND_BATCH_MESSAGE body: %v", err)
	}
	ms := make([]*protocol.MessageExt, len(items))
	for i, it := range items {
		if isTimer(it.properties) {
			return errorf(req, protocol.MessageIllegal, "batch item %d is a timer message; timer messages cannot be batched", i)
		}
		if delayLevel(it.properties) > 0 {
			return errorf(req, protocol.MessageIllegal, "batch item %d has a DELAY level; delayed messages cannot be batched", i)
		}
		ms[i] = &protocol.MessageExt{
			Topic:          h.Topic,
			QueueID:        h.QueueID,
			Flag:           it.flag,
			SysFlag:        h.SysFlag,
			BornTimestamp:  h.BornTimestamp,
			BornHost:       bornHost,
			ReconsumeTimes: h.ReconsumeTimes,
			Body:           it.body,
			Properties:     it.properties,
		}
	}
	res, err := s.putMessages(ctx, ms)
	if err != nil {
		return s.putErrorResponse(req, h.Topic, err)
	}
	msgID := res.MsgID
	if strings.Count(msgID, ",") != len(ms)-1 {
		// The store returned one id; build one per record from the offsets
		// it assigned to each message.
		ids := make([]string, len(ms))
		for i, m := range ms {
			ids[i] = protocol.OffsetMessageID(s.storeHost, m.CommitLogOffset)
		}
		msgID = strings.Join(ids, ",")
	}
	return s.sendResponse(req, res, msgID, h.QueueID, "")
}
