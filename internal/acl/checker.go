package acl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultReloadInterval is how often the ACL file is re-read for changes.
const DefaultReloadInterval = time.Second

// ErrDenied wraps every refusal Check returns; the role answers it with
// NO_PERMISSION (16) and the error's text as the remark.
var ErrDenied = errors.New("access denied")

// ErrNoPermission wraps (and is) ErrDenied for an authenticated account
// that lacks a permission, as opposed to one that could not be
// authenticated.
var ErrNoPermission = fmt.Errorf("%w: no permission", ErrDenied)

// Resource is a topic or group a request touches and the permission it
// needs there.
type Resource struct {
	Name  string
	Group bool
	Perm  Perm
}

// Request is what Check needs to know about one request.
type Request struct {
	// Code is the request code, for the remark.
	Code int32
	// Ext and Body are the request's ext fields and body, as received.
	Ext  map[string]string
	Body []byte
	// RemoteAddr is the peer's "ip:port".
	RemoteAddr string
	// Admin marks a request only an admin account may make.
	Admin bool
	// Resources are the topics and groups it touches.
	Resources []Resource
}

// Checker decides requests against a plain_acl.yml file. WatchLoop
// re-reads the file when it changes: a bad new file is logged and the last
// good one stays in force. Its methods are safe for concurrent use.
type Checker struct {
	path   string
	logger *slog.Logger

	cfg      atomic.Pointer[compiled]
	reloadMu sync.Mutex
	lastData []byte // guarded by reloadMu
	reloads  atomic.Int64
}

// Load reads path; a missing or bad file is an error. Nothing runs until
// the owner starts WatchLoop.
func Load(path string, logger *slog.Logger) (*Checker, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Checker{path: path, logger: logger.With("aclFile", path)}
	if _, err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Reloads counts the successful loads (the first included), so tests can
// wait for a change to be picked up.
func (c *Checker) Reloads() int64 { return c.reloads.Load() }

// WatchLoop re-reads the file every interval (0 means
// DefaultReloadInterval) until ctx ends.
func (c *Checker) WatchLoop(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultReloadInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			changed, err := c.reload()
			switch {
			case err != nil:
				c.logger.Error("ACL file not reloaded; the previous rules stay in force", "err", err)
			case changed:
				c.logger.Info("ACL file reloaded", "accounts", len(c.cfg.Load().accounts))
			}
		}
	}
}

// reload reads the file and applies it when its content changed.
func (c *Checker) reload() (bool, error) {
	c.reloadMu.Lock()
	defer c.reloadMu.Unlock()
	data, err := os.ReadFile(c.path)
	if err != nil {
		return false, fmt.Errorf("acl: %w", err)
	}
	if c.lastData != nil && bytes.Equal(data, c.lastData) {
		return false, nil
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return false, fmt.Errorf("acl: %s: %w", c.path, err)
	}
	comp, err := cfg.compile()
	if err != nil {
		return false, fmt.Errorf("acl: %s: %w", c.path, err)
	}
	c.cfg.Store(comp)
	c.lastData = data
	c.reloads.Add(1)
	return true, nil
}

// Check decides r: nil lets it through, an error wrapping ErrDenied says
// why not. The order is RocketMQ's: global white list, access key known,
// the account's white address, signature, admin, then each resource.
func (c *Checker) Check(r Request) error {
	ak := r.Ext[ExtAccessKey]
	acct, pass, err := c.account(ak, r.RemoteAddr, fmt.Sprintf("request code %d", r.Code))
	if acct == nil || pass {
		return err
	}
	if !verifySignature(r.Ext, r.Body, acct.SecretKey) {
		return fmt.Errorf("%w: the signature of request code %d does not match accessKey %q's secret key", ErrDenied, r.Code, ak)
	}
	bound, err := checkBinding(r.Code, r.Ext, r.Body, acct.SecretKey, time.Now())
	if err != nil {
		return err
	}
	if r.Admin && !acct.Admin {
		return fmt.Errorf("%w: request code %d needs an admin account; accessKey %q is not admin", ErrDenied, r.Code, ak)
	}
	if r.Admin && !bound {
		// A stock signature does not cover the code, so any signature
		// of this account, seen once, would do for it.
		return fmt.Errorf("%w: request code %d is an admin request and its signature binds no request code and time "+
			"(%s, %s); send it with a zonemq admin tool or SDK, which bind them", ErrDenied, r.Code, ExtRequestCode, ExtRequestTime)
	}
	return resourcesAllowed(acct, ak, r.Resources)
}

// account finds the account of access key ak for a request from remote
// (what names the request in errors). pass means the request is let
// through without more checks (a white address); with a nil account the
// error says why it is refused, or is nil for a globally white address.
func (c *Checker) account(ak, remote, what string) (acct *Account, pass bool, err error) {
	cfg := c.cfg.Load()
	ip := hostIP(remote)
	if cfg.globallyWhite(ip) {
		return nil, true, nil
	}
	if ak == "" {
		return nil, false, fmt.Errorf("%w: %s carries no AccessKey; this server requires ACL credentials", ErrDenied, what)
	}
	acct = cfg.accounts[ak]
	if acct == nil {
		return nil, false, fmt.Errorf("%w: no account with accessKey %q", ErrDenied, ak)
	}
	return acct, ip != nil && acct.white(ip), nil
}

// resourcesAllowed checks every resource against the account.
func resourcesAllowed(acct *Account, ak string, resources []Resource) error {
	for _, res := range resources {
		if !acct.allows(res) {
			kind := "topic"
			if res.Group {
				kind = "group"
			}
			return fmt.Errorf("%w: accessKey %q has no %s permission on %s %s", ErrNoPermission, ak, res.Perm, kind, res.Name)
		}
	}
	return nil
}

// retryPrefix marks a group's retry topic, checked as the group.
const retryPrefix = "%RETRY%"

// allows applies an account's permissions to one resource: its entry, else
// (for an admin with no entry) everything, else its default.
func (a *Account) allows(res Resource) bool {
	name, group := res.Name, res.Group
	if !group && strings.HasPrefix(name, retryPrefix) {
		name, group = strings.TrimPrefix(name, retryPrefix), true
	}
	table, def := a.TopicPerms, a.DefaultTopicPerm
	if group {
		table, def = a.GroupPerms, a.DefaultGroupPerm
	}
	if p, ok := table[name]; ok {
		return p.allows(res.Perm)
	}
	if a.Admin {
		return true
	}
	return def.allows(res.Perm)
}
