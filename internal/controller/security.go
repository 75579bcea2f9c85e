package controller

import (
	"context"
	"errors"

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
	if s.acl == nil {
		return h
	}
	return func(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
		err := s.acl.Check(acl.Request{Code: req.Code, Ext: req.ExtFields, Body: req.Body,
			RemoteAddr: c.RemoteAddr(), Admin: adminCodes[code]})
		if err == nil {
			return h(ctx, c, req)
		}
		if errors.Is(err, acl.ErrDenied) {
			s.logger.Debug("request refused by the ACL", "code", code, "peer", c.RemoteAddr(), "err", err)
		}
		return reply(req, protocol.NoPermission, err.Error())
	}
}

// aclWatchLoop re-reads the ACL file until the voter stops.
func (s *Server) aclWatchLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	s.acl.WatchLoop(ctx, s.opts.ACLReloadInterval)
}
