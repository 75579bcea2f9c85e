//go:build linux || darwin || freebsd

package broker

import (
	"log/slog"
	"syscall"
)

// fdHeadroom is what the broker needs beyond queue files and connections:
// listeners, name-server connections, segments and key indexes of a few
// dozen GiB of log, metadata writes.
const fdHeadroom = 256

// warnFDLimit logs a warning when the process's descriptor limit cannot
// hold the queue-file budget, the connection cap and fdHeadroom: the broker
// would then meet EMFILE before its own limits, which is what they exist to
// prevent. It changes nothing.
func warnFDLimit(logger *slog.Logger, h HardeningOptions) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	need := uint64(h.MaxOpenQueueFiles + h.MaxConnections + fdHeadroom)
	if lim.Cur < need {
		logger.Warn("the descriptor limit is below what the broker's limits allow; lower --max-connections or "+
			"--max-open-queue-files, or raise ulimit -n", "limit", lim.Cur, "maxOpenQueueFiles", h.MaxOpenQueueFiles,
			"maxConnections", h.MaxConnections, "needed", need)
	}
}
