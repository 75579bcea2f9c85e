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

// memberCodes are the requests only cluster members send: a broker's
// heartbeat (which may win it a lease or an election) and an operator's
// election. With a cluster secret they need its member MAC (see
// acl.MemberGuard), whatever the ACL says. A status read stays open to any
// client the ACL lets in: it changes nothing.
var memberCodes = map[protocol.RequestCode]bool{
	protocol.ControllerBrokerHeartbeat: true,
	protocol.ControllerElect:           true,
}

// checked puts the member check and the ACL in front of h when they are on.
func (s *Server) checked(code protocol.RequestCode, h remoting.Handler) remoting.Handler {
	h = acl.Guard(s.acl, s.logger, adminCodes[code], h)
	if memberCodes[code] {
		h = acl.MemberGuard(s.opts.ClusterSecret, s.logger, h)
	}
	return h
}
