package namesrv

import (
	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// The name server's side of the ACL (docs/security.md). With it on, every
// request needs a valid signature; the writes below need an admin account:
// a broker registers with admin credentials, an application reads routes
// and sends client heartbeats with its own.
var adminCodes = map[protocol.RequestCode]bool{
	protocol.RegisterBroker:         true,
	protocol.UnregisterBroker:       true,
	protocol.BrokerHeartbeat:        true,
	protocol.QueryDataVersion:       true,
	protocol.RegisterTopicInNamesrv: true,
	protocol.DeleteTopicInNamesrv:   true,
	protocol.PutKVConfig:            true,
	protocol.DeleteKVConfig:         true,
}

// checked puts the member check and the ACL in front of h when they are on.
func (s *Server) checked(code protocol.RequestCode, h remoting.Handler) remoting.Handler {
	h = acl.Guard(s.acl, s.logger, adminCodes[code], h)
	if adminCodes[code] {
		// The same writes are the cluster-member requests: a broker's
		// registration, heartbeat, unregistration and data-version
		// query, and an operator's route and KV writes. With a cluster
		// secret they need its MAC, ACL on or off; reads stay open.
		h = acl.MemberGuard(s.opts.ClusterSecret, s.logger, h)
	}
	return h
}
