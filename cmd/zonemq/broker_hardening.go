package main

import (
	"flag"

	"github.com/zonemq/zonemq/internal/broker"
)

// addHardeningFlags declares the broker's resource-limit and data-check
// flags (docs/hardening.md).
func addHardeningFlags(fs *flag.FlagSet, h *broker.HardeningOptions) {
	fs.BoolVar(&h.RecoverDropCorrupt, "recover-drop-corrupt", h.RecoverDropCorrupt,
		"let recovery drop a complete last commit-log record whose body fails its CRC\n"+
			"(logged with its topic, queue and offset); without it the broker refuses to start")
	fs.BoolVar(&h.ReseedCorruptReplica, "reseed-corrupt-replica", h.ReseedCorruptReplica,
		"a replica whose commit log is damaged moves its data aside (quarantine/ in --data) and copies the\n"+
			"group's log again from the master; false: it refuses to start, as a master does")
	fs.BoolVar(&h.RecoverMissingTopics, "recover-missing-topics", h.RecoverMissingTopics,
		"re-create topics that have queues on disk but are missing from topics.json;\n"+
			"without it the broker refuses to start")
	fs.IntVar(&h.MaxOpenQueueFiles, "max-open-queue-files", h.MaxOpenQueueFiles,
		"budget of open consume-queue file `handles`; the least recently used are closed")
	fs.IntVar(&h.MaxParkedPulls, "max-parked-pulls", h.MaxParkedPulls,
		"most long-polling pulls held at once; more are answered SYSTEM_BUSY")
	fs.IntVar(&h.MaxParkedPullsPerConn, "max-parked-pulls-per-conn", h.MaxParkedPullsPerConn,
		"most long-polling pulls one connection may have held at once")
	fs.IntVar(&h.MaxConnections, "max-connections", h.MaxConnections,
		"most client connections; one more is closed at once")
	fs.Int64Var(&h.MaxReceivingBytes, "max-receiving-bytes", h.MaxReceivingBytes,
		"`bytes` of large frames (over 64 KiB) being received at once across all\n"+
			"connections; further large frames wait unread")
}
