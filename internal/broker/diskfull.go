package broker

import (
	"errors"
	"syscall"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// diskFullResponse answers SERVICE_NOT_AVAILABLE, with a remark that names
// the full disk, when err is (or wraps) ENOSPC; nil otherwise. Clients treat
// code 14 as "try another broker", which is right for a full disk, where
// SYSTEM_ERROR said nothing useful. what says what failed.
func (s *Server) diskFullResponse(req *remoting.Command, err error, what string) *remoting.Command {
	if !errors.Is(err, syscall.ENOSPC) {
		return nil
	}
	s.logger.Error(what+" failed: the disk is full", "dataDir", s.opts.DataDir, "err", err)
	return errorf(req, protocol.ServiceNotAvailable, "%s failed: the disk holding the data directory %s of broker %s is full "+
		"(no space left on device); send to another broker", what, s.opts.DataDir, s.opts.BrokerName)
}

// refuseTopicOnFullDisk answers SERVICE_NOT_AVAILABLE when the disk is too
// full for new data (the store's guard, read afresh): a topic created then
// could not store a message, and its metadata write might itself fail
// half-way. nil when there is room.
func (s *Server) refuseTopicOnFullDisk(req *remoting.Command, topic string) *remoting.Command {
	err := s.store.CheckDiskNow()
	if err == nil {
		return nil
	}
	s.logger.Warn("refusing to create a topic: the disk is full", "topic", topic, "err", err)
	return errorf(req, protocol.ServiceNotAvailable, "creating topic %s failed: the disk holding the data directory %s of broker %s is full "+
		"(used %.0f%%, limit %.0f%%)", topic, s.opts.DataDir, s.opts.BrokerName, 100*s.store.DiskUsedRatio(), 100*s.opts.DiskMaxUsedRatio)
}
