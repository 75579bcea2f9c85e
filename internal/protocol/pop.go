package protocol

// POP consumption (RocketMQ 5's model, served to the gRPC access point):
// the broker hands out single messages with an invisible time and a
// receipt handle, and the consumer acks each. zonemq's own codes and
// headers (docs/protocol.md), not RocketMQ's POP_MESSAGE (200050) family,
// whose wire form they do not follow.
const (
	// PopMessages hands out up to maxMsgNums messages of a group from one
	// queue (queueId) or from every readable queue (-1). Ext: consumerGroup,
	// topic, queueId, maxMsgNums, invisibleTime (ms), maxAttempts,
	// expression, expressionType (TAG or SQL92), fifo. The answer's body is
	// the stored records back to back, as a pull's; ext zonemqPopHandles
	// lists one "queueId:offset:attempt:handle" per record, in body order.
	PopMessages RequestCode = 9401
	// AckPopMessages acks handed-out messages. Ext: consumerGroup, topic,
	// handles (';'-separated). A handle that names no message in flight now
	// (acked, expired and handed out again, or never issued) is answered
	// QUERY_NOT_FOUND, the others are acked.
	AckPopMessages RequestCode = 9402
	// ChangePopInvisibleTime makes a message in flight invisible for
	// invisibleTime ms from now and answers ext "handle" with its new
	// handle; the old one is void. Ext: consumerGroup, topic, handle,
	// invisibleTime.
	ChangePopInvisibleTime RequestCode = 9403
	// RecallTimer cancels a pending timer message (RocketMQ 5's
	// RecallMessage). Ext: queueOffset (in the timer queue, as the send's
	// answer gave it), uniqKey (its client id).
	RecallTimer RequestCode = 9404
)

// Ext keys of the POP codes.
const (
	ExtPopHandles = "zonemqPopHandles"
)

func init() {
	requestNames[PopMessages] = "ZONEMQ_POP_MESSAGES"
	requestNames[AckPopMessages] = "ZONEMQ_ACK_POP_MESSAGES"
	requestNames[ChangePopInvisibleTime] = "ZONEMQ_CHANGE_POP_INVISIBLE_TIME"
	requestNames[RecallTimer] = "ZONEMQ_RECALL_TIMER"
}
