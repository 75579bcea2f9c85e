package namesrv

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Elected masters (controller mode, docs/controller.md). A master the
// failover controller replaced may still hold its group's id-0 slot here:
// frozen (SIGSTOP) or cut off from the controller, it keeps its connection
// open, and its registration lives until it expires. Its replacement's
// registration is then refused as held (ownership.go). When that
// registration claims a controller epoch above the holder's, the name
// server asks the controller voters whether the claimant is the group's
// master at that epoch and, if one says so, gives it the slot at once:
// clients see the new master without waiting out the old one's expiry. The
// replaced master loses only its slot; its connection stays, and its next
// registration is judged like any other (the slot is held now).
//
// A voter's view comes from its committed Raft state, so even a lagging
// voter that names the claimant at that epoch is telling the truth: the
// election happened. A forged claim is never confirmed.

// electedCheckTimeout bounds one confirmation with the voters.
const electedCheckTimeout = 2 * time.Second

// electedChecks confirms elected masters with the controller voters.
type electedChecks struct {
	addrs                []string
	client               *remoting.Client
	accessKey, secretKey string // sign the status reads (ACL on the voters)

	mu       sync.Mutex
	inFlight map[string]bool // brokerName/epoch/addr being confirmed
}

func newElectedChecks(addrs []string, s *Server) *electedChecks {
	if len(addrs) == 0 {
		return nil
	}
	co := remoting.ClientOptions{DialTimeout: electedCheckTimeout, Logger: s.logger}
	if s.opts.ControllerTLS != nil {
		co.Dial = remoting.TLSDialer(s.opts.ControllerTLS, nil)
	}
	return &electedChecks{
		addrs:     addrs,
		client:    remoting.NewClient(co),
		accessKey: s.opts.ControllerAccessKey,
		secretKey: s.opts.ControllerSecretKey,
		inFlight:  map[string]bool{},
	}
}

// confirmElected starts a confirmation for a registration refused because
// the master's slot is held, when it claims a newer controller epoch than
// the holder's. At most one confirmation per claim runs at a time.
func (s *Server) confirmElected(conn *remoting.Conn, h *protocol.RegisterBrokerRequestHeader) {
	ec := s.elected
	if ec == nil || h.BrokerID != protocol.MasterID || h.MasterEpoch <= 0 || !s.routes.masterEpochBelow(h.BrokerName, h.MasterEpoch) {
		return
	}
	key := fmt.Sprintf("%s/%d/%s", h.BrokerName, h.MasterEpoch, h.BrokerAddr)
	ec.mu.Lock()
	busy := ec.inFlight[key]
	ec.inFlight[key] = true
	ec.mu.Unlock()
	if busy {
		return
	}
	s.lifeMu.Lock()
	if s.stopped {
		s.lifeMu.Unlock()
		return
	}
	s.wg.Add(1)
	s.lifeMu.Unlock()
	hc := *h
	go func() {
		defer s.wg.Done()
		defer func() {
			ec.mu.Lock()
			delete(ec.inFlight, key)
			ec.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), electedCheckTimeout)
		defer cancel()
		go func() {
			select {
			case <-s.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		voter, err := ec.confirm(ctx, hc.BrokerName, hc.BrokerAddr, hc.MasterEpoch)
		if err != nil {
			s.logger.Info("elected master not confirmed; it waits for the old master's slot to free", "brokerName", hc.BrokerName,
				"brokerAddr", hc.BrokerAddr, "epoch", hc.MasterEpoch, "err", err)
			return
		}
		rm, replaced, ok := s.routes.applyElectedClaim(conn, hc.BrokerName, hc.MasterEpoch, s.now())
		if !ok {
			return
		}
		if replaced {
			s.logRemoval(rm)
		}
		s.logger.Info("elected master took the master's slot", "brokerName", hc.BrokerName, "brokerAddr", hc.BrokerAddr,
			"epoch", hc.MasterEpoch, "confirmedBy", voter, "replaced", rm.brokerAddr)
	}()
}

// confirm asks the voters in turn whether addr is brokerName's master at
// epoch, and returns the voter that said so.
func (ec *electedChecks) confirm(ctx context.Context, brokerName, addr string, epoch int64) (string, error) {
	var last error
	for _, voter := range ec.addrs {
		req := remoting.NewRequest(int32(protocol.ControllerGetStatus), map[string]string{}, nil)
		if ec.accessKey != "" {
			acl.Sign(req.Code, req.ExtFields, req.Body, ec.accessKey, ec.secretKey, time.Now())
		}
		resp, err := ec.client.Invoke(ctx, voter, req)
		if err != nil {
			last = fmt.Errorf("voter %s: %w", voter, err)
			continue
		}
		if resp.Code != int32(protocol.Success) {
			last = fmt.Errorf("voter %s: code %d: %s", voter, resp.Code, resp.Remark)
			continue
		}
		var st protocol.ControllerStatus
		if err := json.Unmarshal(resp.Body, &st); err != nil {
			last = fmt.Errorf("voter %s: bad status: %w", voter, err)
			continue
		}
		for _, g := range st.Groups {
			if g.BrokerName != brokerName {
				continue
			}
			switch {
			case g.Epoch == epoch && g.MasterAddr == addr:
				return voter, nil
			case g.Epoch > epoch:
				return "", fmt.Errorf("voter %s: epoch %d is over; the master is %s at epoch %d", voter, epoch, g.MasterAddr, g.Epoch)
			}
			last = fmt.Errorf("voter %s: master %s at epoch %d", voter, g.MasterAddr, g.Epoch)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if last == nil {
		last = fmt.Errorf("no voter knows group %s", brokerName)
	}
	return "", last
}

func (ec *electedChecks) close() {
	if ec != nil {
		ec.client.Close()
	}
}

// masterEpochBelow reports whether brokerName's master slot is held by a
// registration that claimed a controller epoch below epoch (none: 0).
func (t *routeTable) masterEpochBelow(brokerName string, epoch int64) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	bd := t.brokerAddrTable[brokerName]
	if bd == nil {
		return false
	}
	live := t.brokerLiveTable[bd.BrokerAddrs[protocol.MasterID]]
	return live != nil && live.masterEpoch < epoch
}

// applyElectedClaim applies conn's refused registration of brokerName's
// master slot at a confirmed epoch: the holder, if it claimed an older
// epoch, is removed (returned as rm when replaced) and the claim is
// applied. It does nothing if the claim is gone or stale, or the holder is
// at least as new.
func (t *routeTable) applyElectedClaim(conn *remoting.Conn, brokerName string, epoch int64, now time.Time) (rm removal, replaced, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, found := t.claims[conn]
	if !found || connClosed(conn) || c.brokerName != brokerName || c.brokerID != protocol.MasterID ||
		c.header.MasterEpoch != epoch || now.Sub(c.at) > ClaimWindow {
		return rm, false, false
	}
	if bd := t.brokerAddrTable[brokerName]; bd != nil {
		if old, held := bd.BrokerAddrs[protocol.MasterID]; held && old != c.header.BrokerAddr {
			if live := t.brokerLiveTable[old]; live != nil && live.masterEpoch >= epoch {
				return rm, false, false
			}
			rm, replaced = t.removeBrokerAddrLocked(old, brokerName,
				fmt.Sprintf("replaced by %s, elected master at epoch %d", c.header.BrokerAddr, epoch))
		}
	}
	if _, err := t.checkRegisterOwnerLocked(c.header, conn, c.reg, now); err != nil {
		return rm, replaced, false
	}
	delete(t.claims, conn)
	t.applyRegistrationLocked(c.header, c.reg, conn, now)
	return rm, replaced, true
}
