package broker

import (
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// corruptPullResponse answers a pull whose first record fails its checksum
// check. The record is not served: the answer is SYSTEM_ERROR with a remark
// that names it, and the offsets header keeps NextBeginOffset at the damaged
// record, so the consumer neither skips it silently nor receives it. The
// operator restores the segment or moves the group past it (reset offset).
// The store has logged and counted it (corruptRecordReads in the runtime
// info).
func corruptPullResponse(req *remoting.Command, h *protocol.PullMessageRequestHeader, res store.GetResult) *remoting.Command {
	resp := errorf(req, protocol.SystemError, "MESSAGE_CORRUPT: the message of topic %s queue %d at queue offset %d (commit-log offset %d) "+
		"is damaged on disk (its checksum does not match its bytes); it is not served",
		h.Topic, h.QueueID, res.NextBeginOffset, res.CorruptOffset)
	rh := protocol.PullMessageResponseHeader{
		SuggestWhichBrokerID: protocol.MasterID,
		NextBeginOffset:      res.NextBeginOffset,
		MinOffset:            res.MinOffset,
		MaxOffset:            res.MaxOffset,
	}
	resp.ExtFields = rh.Ext()
	return resp
}
