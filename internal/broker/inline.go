package broker

import (
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// sendCodes are the requests served by handleSendMessage.
var sendCodes = []protocol.RequestCode{
	protocol.SendMessage, protocol.SendMessageV2, protocol.SendBatchMessage, protocol.SendReplyMessage,
}

// registerSendHandlers installs handleSendMessage for every send code,
// inline on the connection's read goroutine, with the plain sends of one
// read stored together (the send batch, inlinesends.go). Inline handling
// keeps one connection's sends in arrival order, saves a goroutine start and
// wake-up per message, and lets the responses to all the sends one socket
// read brought leave in one write. Nothing waits on the read goroutine: with
// --flush sync or --replication sync the answers of plain sends wait in
// syncAcks (syncacks.go), and the sends that cannot be deferred so (batches,
// transaction halves, timer, delay and retry messages) go to a goroutine of
// their own (serveAside). A send waiting on the read goroutine would stall
// everything else on that connection, and group commit would see one message
// per connection at a time.
func (s *Server) registerSendHandlers() {
	codes := make([]int32, len(sendCodes))
	for i, code := range sendCodes {
		codes[i] = int32(code)
	}
	s.remoting.HandleInlineBatch(codes, s.inlineSendBatch()) // inlinesends.go
}

// handleInline is handle for a handler that runs on the connection's read
// goroutine (remoting.Server.HandleInline): it must not block.
func (s *Server) handleInline(code protocol.RequestCode, h remoting.Handler) {
	if isSendCode(code) {
		h = s.metrics.instrumentSend(h) // metrics.go; never blocks
	}
	s.remoting.HandleInline(int32(code), s.gated(h))
}
