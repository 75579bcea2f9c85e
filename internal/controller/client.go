package controller

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/member"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Client talks to a controller's voters: it sends heartbeats and
// elections to the leader, following a voter's "not leader" answer, and
// asks any voter for its status. It is safe for concurrent use.
type Client struct {
	rc    *remoting.Client
	addrs []string
	opts  ClientOptions

	mu     sync.Mutex
	leader string // last known leader's request address
}

// ClientOptions are how a Client reaches voters that run with an ACL or
// TLS.
type ClientOptions struct {
	// AccessKey and SecretKey sign every request (RocketMQ ACL 1.0);
	// elections need an admin account.
	AccessKey, SecretKey string
	// TLS, when set, dials the voters over TLS.
	TLS *tls.Config
	// ClusterSecret, when set, adds the member MAC that heartbeats and
	// elections need from a controller with a cluster secret.
	ClusterSecret *member.Secret
	// Dial, when set, opens the connections (e.g. from inside a network
	// namespace); TLS, if set, runs over it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// NewClient returns a client of the voters at addrs (request addresses).
func NewClient(addrs []string) *Client { return NewClientWithOptions(addrs, ClientOptions{}) }

// NewClientWithOptions returns a client of the voters at addrs that signs
// its requests and uses TLS as opts say.
func NewClientWithOptions(addrs []string, opts ClientOptions) *Client {
	ro := remoting.ClientOptions{Dial: opts.Dial}
	if opts.TLS != nil {
		ro.Dial = remoting.TLSDialer(opts.TLS, opts.Dial)
	}
	return &Client{rc: remoting.NewClient(ro), addrs: addrs, opts: opts}
}

// request builds a request, signed when the client has credentials or the
// cluster secret.
func (c *Client) request(code protocol.RequestCode, ext map[string]string) *remoting.Command {
	req := remoting.NewRequest(int32(code), ext, nil)
	if req.ExtFields == nil {
		req.ExtFields = map[string]string{}
	}
	c.opts.ClusterSecret.Sign(req.Code, req.ExtFields, req.Body, time.Now())
	if c.opts.AccessKey != "" {
		acl.Sign(req.Code, req.ExtFields, req.Body, c.opts.AccessKey, c.opts.SecretKey, time.Now())
	}
	return req
}

// Close closes the client's connections.
func (c *Client) Close() error { return c.rc.Close() }

// ErrNoLeader is returned when no voter knows a leader (no Raft majority,
// or an election under way).
var ErrNoLeader = errors.New("controller: no leader reachable")

// invokeLeader sends the request to the leader: the last known
// one first, then every voter, following at most one redirect per voter.
func (c *Client) invokeLeader(ctx context.Context, code protocol.RequestCode, h protocol.Header) (*remoting.Command, error) {
	c.mu.Lock()
	tries := append([]string{c.leader}, c.addrs...)
	c.mu.Unlock()
	var lastErr error = ErrNoLeader
	seen := map[string]bool{}
	for len(tries) > 0 {
		addr := tries[0]
		tries = tries[1:]
		if addr == "" || seen[addr] {
			continue
		}
		seen[addr] = true
		resp, err := c.rc.Invoke(ctx, addr, c.request(code, h.Ext()))
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			lastErr = fmt.Errorf("controller %s: %w", addr, err)
			continue
		}
		if protocol.ResponseCode(resp.Code) == protocol.ServiceNotAvailable {
			var nl protocol.ControllerNotLeaderHeader
			if nl.SetExt(resp.ExtFields) == nil && nl.LeaderAddr != "" {
				tries = append([]string{nl.LeaderAddr}, tries...)
			}
			lastErr = fmt.Errorf("%w: %s answered %s", ErrNoLeader, addr, resp.Remark)
			continue
		}
		c.mu.Lock()
		c.leader = addr
		c.mu.Unlock()
		return resp, nil
	}
	return nil, lastErr
}

// Heartbeat reports a broker to the leader and returns its answer.
func (c *Client) Heartbeat(ctx context.Context, h *protocol.ControllerHeartbeatRequestHeader) (*protocol.ControllerHeartbeatResponseHeader, error) {
	resp, err := c.invokeLeader(ctx, protocol.ControllerBrokerHeartbeat, h)
	if err != nil {
		return nil, err
	}
	if code := protocol.ResponseCode(resp.Code); code != protocol.Success {
		return nil, &protocol.Error{Code: code, Remark: resp.Remark}
	}
	var out protocol.ControllerHeartbeatResponseHeader
	if err := out.SetExt(resp.ExtFields); err != nil {
		return nil, fmt.Errorf("controller heartbeat answer: %w", err)
	}
	return &out, nil
}

// Elect asks the leader for an election (see ControllerElectRequestHeader);
// the remark of a forced election says what may have been lost.
func (c *Client) Elect(ctx context.Context, h *protocol.ControllerElectRequestHeader) (*protocol.ControllerElectResponseHeader, string, error) {
	resp, err := c.invokeLeader(ctx, protocol.ControllerElect, h)
	if err != nil {
		return nil, "", err
	}
	if code := protocol.ResponseCode(resp.Code); code != protocol.Success {
		return nil, "", &protocol.Error{Code: code, Remark: resp.Remark}
	}
	var out protocol.ControllerElectResponseHeader
	if err := out.SetExt(resp.ExtFields); err != nil {
		return nil, "", fmt.Errorf("controller elect answer: %w", err)
	}
	return &out, resp.Remark, nil
}

// Status asks the voter at addr for its view.
func (c *Client) Status(ctx context.Context, addr string) (*protocol.ControllerStatus, error) {
	resp, err := c.rc.Invoke(ctx, addr, c.request(protocol.ControllerGetStatus, nil))
	if err != nil {
		return nil, fmt.Errorf("controller %s: %w", addr, err)
	}
	if code := protocol.ResponseCode(resp.Code); code != protocol.Success {
		return nil, &protocol.Error{Code: code, Remark: resp.Remark}
	}
	var st protocol.ControllerStatus
	if err := json.Unmarshal(resp.Body, &st); err != nil {
		return nil, fmt.Errorf("controller %s status body: %w", addr, err)
	}
	return &st, nil
}
