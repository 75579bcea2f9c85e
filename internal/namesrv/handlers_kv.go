package namesrv

import (
	"context"
	"encoding/json"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Handlers of the KV config (namespace → key → value, persisted).

// handlePutKVConfig serves PUT_KV_CONFIG (100).
func (s *Server) handlePutKVConfig(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.PutKVConfigRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	if err := validateKV(h.Namespace, h.Key, h.Value, true); err != nil {
		return reply(req, protocol.InvalidParameter, "bad PUT_KV_CONFIG: "+err.Error())
	}
	if err := s.kv.put(h.Namespace, h.Key, h.Value); err != nil {
		s.logger.Error("KV config write failed", "namespace", h.Namespace, "key", h.Key, "err", err)
		return reply(req, protocol.SystemError, "the KV config could not be saved")
	}
	s.logger.Info("KV config put", "namespace", h.Namespace, "key", h.Key, "valueBytes", len(h.Value),
		"peer", conn.RemoteAddr())
	return reply(req, protocol.Success, "")
}

// handleGetKVConfig serves GET_KV_CONFIG (101); a missing entry is
// QUERY_NOT_FOUND.
func (s *Server) handleGetKVConfig(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.GetKVConfigRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	if err := validateKV(h.Namespace, h.Key, "", false); err != nil {
		return reply(req, protocol.InvalidParameter, "bad GET_KV_CONFIG: "+err.Error())
	}
	v, ok := s.kv.get(h.Namespace, h.Key)
	if !ok {
		return reply(req, protocol.QueryNotFound, "No config item, Namespace: "+h.Namespace+" Key: "+h.Key)
	}
	resp := reply(req, protocol.Success, "")
	resp.ExtFields = (&protocol.GetKVConfigResponseHeader{Value: v}).Ext()
	return resp
}

// handleDeleteKVConfig serves DELETE_KV_CONFIG (102); deleting a missing
// entry succeeds.
func (s *Server) handleDeleteKVConfig(_ context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.DeleteKVConfigRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	if err := validateKV(h.Namespace, h.Key, "", false); err != nil {
		return reply(req, protocol.InvalidParameter, "bad DELETE_KV_CONFIG: "+err.Error())
	}
	if err := s.kv.remove(h.Namespace, h.Key); err != nil {
		s.logger.Error("KV config write failed", "namespace", h.Namespace, "key", h.Key, "err", err)
		return reply(req, protocol.SystemError, "the KV config could not be saved")
	}
	s.logger.Info("KV config deleted", "namespace", h.Namespace, "key", h.Key, "peer", conn.RemoteAddr())
	return reply(req, protocol.Success, "")
}

// handleGetKVListByNamespace serves GET_KVLIST_BY_NAMESPACE (219): the
// namespace as a KVTable body, or QUERY_NOT_FOUND when it is empty.
func (s *Server) handleGetKVListByNamespace(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
	var h protocol.GetKVListByNamespaceRequestHeader
	if resp := decodeHeader(req, &h); resp != nil {
		return resp
	}
	if h.Namespace == "" {
		return reply(req, protocol.InvalidParameter, "bad GET_KVLIST_BY_NAMESPACE: the namespace is empty")
	}
	table := s.kv.list(h.Namespace)
	if table == nil {
		return reply(req, protocol.QueryNotFound, "No config item, Namespace: "+h.Namespace)
	}
	resp := reply(req, protocol.Success, "")
	resp.Body, _ = json.Marshal(protocol.KVTable{Table: table})
	return resp
}
