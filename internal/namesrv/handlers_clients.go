package namesrv

import (
	"context"
	"strings"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Handlers of zonemq's client registry (codes 9001 and 9002).

// handleClientHeartbeatToNamesrv serves ClientHeartbeatToNamesrv (9001): a
// producer or consumer says it is alive (body: ClientHeartbeat JSON).
func (s *Server) handleClientHeartbeatToNamesrv(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	hb, err := protocol.DecodeClientHeartbeat(req.Body)
	if err == nil {
		err = hb.Validate()
	}
	if err != nil {
		return reply(req, protocol.InvalidParameter, "bad client heartbeat: "+err.Error())
	}
	isNew, err := s.clients.heartbeat(hb, conn, s.now())
	switch {
	case isRegistryFull(err):
		return reply(req, protocol.SystemBusy, err.Error())
	case err != nil:
		return reply(req, protocol.SystemError, err.Error())
	}
	if isNew {
		s.logger.Info("client registered", "clientId", hb.ClientID, "clientIdc", hb.IDC, "role", hb.Role,
			"groups", strings.Join(hb.Groups, ","), "peer", conn.RemoteAddr())
	}
	return reply(req, protocol.Success, "")
}

// handleGetClientsByIDC serves GetClientsByIDC (9002): the live clients as a
// ClientList, only those of ext "idc" when it is set.
func (s *Server) handleGetClientsByIDC(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	list := protocol.ClientList{Clients: s.clients.list(strings.TrimSpace(req.Ext(protocol.ExtClientIDC)))}
	resp := reply(req, protocol.Success, "")
	resp.Body = list.Encode()
	return resp
}
