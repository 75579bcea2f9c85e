package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// switchThroughController is a planned switchover (REPLICA_SWITCH, `zonemq
// admin broker switch`) of a group the failover controller runs: the
// controller decides, this master prepares. Writes pause, the target
// catches up with the whole log (so even an async group loses nothing
// acknowledged), the controller's leader elects the target (ELECT checks
// that it is live and in sync), and this master asks the controller at once
// for its new role instead of waiting for its next heartbeat. Writes resume
// afterwards — refused by then, this broker being a replica — or at once if
// the controller refused.
func (s *Server) switchThroughController(ctx context.Context, req *remoting.Command, h protocol.ReplicaSwitchRequestHeader) *remoting.Command {
	if h.BrokerName != s.opts.BrokerName {
		return errorf(req, protocol.SystemError, "this is broker %s, not %s", s.opts.BrokerName, h.BrokerName)
	}
	if !s.isMaster() {
		return errorf(req, protocol.ServiceNotAvailable, "broker %s at %s is a replica, not the master", s.opts.BrokerName, s.addr)
	}
	if h.To == s.opts.BrokerID {
		return errorf(req, protocol.SystemError, "broker %d is already the master of %s", h.To, s.opts.BrokerName)
	}
	timeout := time.Duration(h.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = defaultSwitchTimeout
	}
	// The master knows its replicas by the id they register under: the
	// broker of identity 0 is a replica under exMasterID.
	key := h.To
	if key == protocol.MasterID {
		key = exMasterID
	}
	r := s.repl
	if _, resp := s.pauseForSwitch(req, key, h.To); resp != nil {
		return resp
	}
	began := time.Now()
	defer func() {
		r.mu.Lock()
		r.paused = false
		r.mu.Unlock()
	}()
	s.logger.Info("switchover through the controller: writes paused; waiting for the replica to catch up", "to", h.To)
	s.commitBeforeSwitch()
	end, err := r.waitCaughtUp(ctx, key, timeout)
	if err == nil {
		err = r.waitMetaSynced(ctx, key, timeout)
	}
	if err != nil {
		return errorf(req, protocol.SystemError, "switchover of %s to broker %d: %v; writes resumed on this master", s.opts.BrokerName, h.To, err)
	}
	// The controller elects only from the in-sync set it last heard of:
	// report the caught-up replica before asking.
	if err := r.controllerBeat(ctx); err != nil {
		return errorf(req, protocol.SystemError, "switchover of %s: the controller cannot be reached: %v; writes resumed on this master",
			s.opts.BrokerName, err)
	}
	eh := protocol.ControllerElectRequestHeader{Cluster: s.opts.Cluster, BrokerName: s.opts.BrokerName, To: h.To}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The controller commits the election only once the old master's
	// lease has ended: give it the switchover's whole timeout.
	resp, err := r.invokeController(cctx, remoting.NewRequest(int32(protocol.ControllerElect), eh.Ext(), nil), timeout)
	if err != nil {
		code := protocol.SystemError
		if pe := (*protocol.Error)(nil); errors.As(err, &pe) {
			code = pe.Code
		}
		return errorf(req, code, "switchover of %s to broker %d: the controller did not elect it: %v; writes resumed on this master",
			s.opts.BrokerName, h.To, err)
	}
	var out protocol.ControllerElectResponseHeader
	if err := out.SetExt(resp.ExtFields); err != nil {
		return errorf(req, protocol.SystemError, "switchover of %s: bad controller answer: %v", s.opts.BrokerName, err)
	}
	// Learn the new role now: the answer names the new master, and this
	// broker steps down and follows it.
	for s.isMaster() && cctx.Err() == nil {
		if err := r.controllerBeat(cctx); err != nil {
			s.logger.Debug("switchover: asking the controller for the new role", "err", err)
		}
		if s.isMaster() {
			select {
			case <-cctx.Done():
			case <-time.After(r.s.opts.ControllerHeartbeatInterval / 4):
			}
		}
	}
	s.logger.Info("switchover through the controller done", "newMaster", out.MasterAddr, "newMasterId", out.MasterID,
		"epoch", out.Epoch, "logEnd", end, "stillMaster", s.isMaster(), "writesPausedFor", time.Since(began).Round(time.Millisecond))
	ans := remoting.NewResponse(req, int32(protocol.Success), "")
	ans.ExtFields = map[string]string{"newMaster": out.MasterAddr, "epoch": fmt.Sprint(out.Epoch), "logEnd": fmt.Sprint(end)}
	return ans
}
