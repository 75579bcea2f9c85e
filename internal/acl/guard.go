package acl

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/member"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Guard puts c in front of h, the handler of one request code of a role
// whose requests name no topic or group (the name server's, the
// controller's): a request that fails Check gets NO_PERMISSION with the
// reason as its remark. admin marks a code only admin accounts may send.
// A nil c (ACL off) returns h itself.
func Guard(c *Checker, logger *slog.Logger, admin bool, h remoting.Handler) remoting.Handler {
	if c == nil {
		return h
	}
	return func(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		err := c.Check(Request{Code: req.Code, Ext: req.ExtFields, Body: req.Body, RemoteAddr: conn.RemoteAddr(), Admin: admin})
		if err == nil {
			return h(ctx, conn, req)
		}
		if errors.Is(err, ErrDenied) {
			logger.Debug("request refused by the ACL", "code", protocol.RequestCode(req.Code), "peer", conn.RemoteAddr(), "err", err)
		}
		return remoting.NewResponse(req, int32(protocol.NoPermission), err.Error())
	}
}

// WatchUntil runs WatchLoop until stop is closed.
func (c *Checker) WatchUntil(stop <-chan struct{}, interval time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	c.WatchLoop(ctx, interval)
}

// MemberGuard puts the cluster-member check in front of h, the handler of a
// request only cluster members may send (registration, replication,
// promotion, the controller's broker and election requests;
// docs/security.md): a request without a valid member MAC from secret gets
// NO_PERMISSION with the reason, and h never runs. Refusals are logged at
// most once a minute per peer host. A nil secret (member authentication
// off) returns h itself.
func MemberGuard(secret *member.Secret, logger *slog.Logger, h remoting.Handler) remoting.Handler {
	if secret == nil {
		return h
	}
	var logged sync.Map // peer host → time.Time of the last log line
	return func(ctx context.Context, conn *remoting.Conn, req *remoting.Command) *remoting.Command {
		err := secret.Verify(req.Code, req.ExtMap(), req.Body, time.Now())
		if err == nil {
			return h(ctx, conn, req)
		}
		host := hostOf(conn.RemoteAddr())
		now := time.Now()
		if last, ok := logged.Load(host); !ok || now.Sub(last.(time.Time)) > time.Minute {
			logged.Store(host, now)
			logger.Warn("cluster-member request refused", "code", protocol.RequestCode(req.Code), "peer", conn.RemoteAddr(), "err", err)
		}
		return remoting.NewResponse(req, int32(protocol.NoPermission), err.Error())
	}
}

// hostOf is the host part of "host:port" (the whole string if it has none).
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
