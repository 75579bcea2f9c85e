package proxy

import (
	"context"
	"errors"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/rmqpb"
)

// authorize checks a call against the ACL, when the access point has one:
// the client's authorization (RocketMQ 5's MQv2-HMAC-SHA1 over its
// x-mq-date-time) must name an account whose secret signed it, holding the
// permissions resources need. It returns nil to let the call through, else
// the status to answer: UNAUTHORIZED for an unknown or unproven account,
// FORBIDDEN for a missing permission.
func (s *Server) authorize(ctx context.Context, what string, resources ...acl.Resource) *rmqpb.Status {
	if s.cfg.ACL == nil {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	var auth *acl.V5Auth
	if h := lastValue(md, "authorization"); h != "" {
		a, err := acl.ParseV5Authorization(h, lastValue(md, "x-mq-date-time"))
		if err != nil {
			return status(rmqpb.Code_UNAUTHORIZED, "%v", err)
		}
		auth = &a
	}
	remote := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		remote = p.Addr.String()
	}
	err := s.cfg.ACL.CheckV5(auth, remote, what, resources)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, acl.ErrNoPermission):
		return status(rmqpb.Code_FORBIDDEN, "%v", err)
	}
	return status(rmqpb.Code_UNAUTHORIZED, "%v", err)
}

// lastValue is a metadata key's last value: a client that retries a call
// may carry the key twice.
func lastValue(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

func topicRes(name string, p acl.Perm) acl.Resource { return acl.Resource{Name: name, Perm: p} }
func groupRes(name string) acl.Resource             { return acl.Resource{Name: name, Group: true, Perm: acl.Sub} }
