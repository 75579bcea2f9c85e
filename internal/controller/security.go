package controller

import (
	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// The controller's side of the ACL (docs/security.md, docs/controller.md).
// With it on, every request needs a valid signature, and what changes the
// groups — a broker's heartbeat, which may win it a lease or an election,
// and an operator's election — needs an admin account. A status read needs
// any account: it names every broker of the cluster.
var adminCodes = map[protocol.RequestCode]bool{
	protocol.ControllerBrokerHeartbeat: true,
	protocol.ControllerElect:           true,
}

// checked puts the ACL in front of h when it is on.
func (s *Server) checked(code protocol.RequestCode, h remoting.Handler) remoting.Handler {
	return acl.Guard(s.acl, s.logger, adminCodes[code], h)
}
