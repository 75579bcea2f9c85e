package broker

import (
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// sendCodes are the requests served by handleSendMessage.
var sendCodes = []protocol.RequestCode{
	protocol.SendMessage, protocol.SendMessageV2, protocol.SendBatchMessage, protocol.SendReplyMessage,
}

// registerSendHandlers installs handleSendMessage for every send code:
// inline on the connection's read goroutine when a send never waits (see
// sendsInline), with the plain sends of one read stored together (the send
// batch, inlinesends.go); on a goroutine per request otherwise.
func (s *Server) registerSendHandlers() {
	if s.sendsInline() {
		codes := make([]int32, len(sendCodes))
		for i, code := range sendCodes {
			codes[i] = int32(code)
		}
		s.remoting.HandleInlineBatch(codes, s.inlineSendBatch()) // inlinesends.go
		return
	}
	for _, code := range sendCodes {
		s.handle(code, s.handleSendMessage)
	}
}

// sendsInline reports whether a send is answered without waiting on
// anything but the store's append lock: with asynchronous flush and
// asynchronous (or no) replication the store returns once the record is in
// the page cache. Inline handling keeps one
// connection's sends in arrival order, saves a goroutine start and wake-up
// per message, and lets the responses to all the sends one socket read
// brought leave in one write. A send that waits (an fsync with
// --flush sync, the in-sync replicas' acknowledgement with --replication
// sync, or any other wait added to the send path) must not run inline: it
// would stall everything else on that connection, and group commit would
// see one message per connection at a time.
func (s *Server) sendsInline() bool {
	return s.opts.Flush == store.FlushAsync && s.opts.Replication != ReplicationSync
}

// handleInline is handle for a handler that runs on the connection's read
// goroutine (remoting.Server.HandleInline): it must not block.
func (s *Server) handleInline(code protocol.RequestCode, h remoting.Handler) {
	if isSendCode(code) {
		h = s.metrics.instrumentSend(h) // metrics.go; never blocks
	}
	s.remoting.HandleInline(int32(code), s.gated(h))
}
