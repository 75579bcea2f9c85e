package main

import (
	"flag"
	"time"
)

// clientFlags are the flags of the client commands (nats-client,
// rmq-client) that compare runs as child processes.
type clientFlags struct {
	addr           string // the server: --url or --namesrv
	mode           string
	inflight, size int
	senders        int // with inflight 1: goroutines publishing synchronously at once
	replicas       int // nats-client: the stream's replicas
	duration, idle time.Duration
}

// parseClientFlags parses args for the client command name, whose server
// flag is addrFlag.
func parseClientFlags(name, addrFlag, addrUsage string, args []string) (clientFlags, error) {
	var f clientFlags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&f.addr, addrFlag, "", addrUsage)
	fs.StringVar(&f.mode, "mode", "publish", "publish or consume")
	fs.IntVar(&f.inflight, "inflight", 64, "publishes in flight (1: synchronous)")
	fs.IntVar(&f.replicas, "replicas", 1, "nats-client: the stream's replicas (3 on a three-node cluster)")
	fs.IntVar(&f.senders, "senders", 1, "with --inflight 1: goroutines publishing synchronously at once, sharing one client")
	fs.IntVar(&f.size, "size", 1024, "body bytes")
	fs.DurationVar(&f.duration, "duration", 5*time.Second, "how long to publish")
	fs.DurationVar(&f.idle, "idle", 3*time.Second, "consume: stop after this long without a message")
	err := fs.Parse(args)
	return f, err
}
