package acl

import (
	"context"
	"errors"
	"log/slog"
	"time"

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
