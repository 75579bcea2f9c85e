package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/zonemq/zonemq/internal/controller"
)

// A name server may run a failover-controller voter in the same process
// (`zonemq namesrv --controller …`, docs/controller.md): one voter per
// IDC without another process to run. The two share nothing but the
// process; the voter has its own request and Raft ports.

// namesrvControllerFlags are the namesrv flags of the embedded voter.
type namesrvControllerFlags struct {
	enabled bool
	opts    controller.Options
	peers   string
}

func addNamesrvControllerFlags(fs *flag.FlagSet) *namesrvControllerFlags {
	c := &namesrvControllerFlags{opts: controller.NewOptions()}
	fs.BoolVar(&c.enabled, "controller", false,
		"also run a failover-controller voter in this process (docs/controller.md); needs\n"+
			"--controller-id, --controller-data and, to start a new cluster, --raft-peers with --bootstrap")
	fs.StringVar(&c.opts.Listen, "controller-listen", c.opts.Listen, "`host:port` of the voter's requests (brokers, admin)")
	fs.StringVar(&c.opts.RaftListen, "raft-listen", c.opts.RaftListen, "`host:port` of the voter's Raft transport")
	fs.StringVar(&c.opts.NodeID, "controller-id", "", "the voter's Raft `node` id")
	fs.StringVar(&c.peers, "raft-peers", "", "every voter as `'id=host:port,…'` (their Raft addresses)")
	fs.BoolVar(&c.opts.Bootstrap, "bootstrap", false, "start a new controller cluster when --controller-data holds no Raft state")
	fs.StringVar(&c.opts.DataDir, "controller-data", "", "`dir` of the voter's Raft log and snapshots")
	fs.DurationVar(&c.opts.MasterLeaseTimeout, "master-lease-timeout", c.opts.MasterLeaseTimeout,
		"the voter elects a new master when a master is silent this long")
	return c
}

// options returns the voter's options, or nil when --controller is off.
func (c *namesrvControllerFlags) options(logger *slog.Logger) (*controller.Options, error) {
	if !c.enabled {
		return nil, nil
	}
	peers, err := controller.ParsePeers(c.peers)
	if err != nil {
		return nil, usagef("%v", err)
	}
	if c.opts.NodeID == "" || c.opts.DataDir == "" {
		return nil, usagef("namesrv --controller needs --controller-id and --controller-data")
	}
	opts := c.opts
	opts.Peers, opts.Logger = peers, logger
	return &opts, nil
}

// runWithController runs the name server and the voter until ctx ends or
// either stops, then stops the other.
func runWithController(ctx context.Context, opts controller.Options, stdout io.Writer,
	runNamesrv func(context.Context) error, shutdownNamesrv func()) error {
	cs, err := controller.New(opts)
	if err != nil {
		shutdownNamesrv()
		return err
	}
	fmt.Fprintf(stdout, "controller listening on %s raft=%s id=%s\n", cs.Addr(), cs.RaftAddr(), opts.NodeID)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- cs.Run(ctx)
		cancel()
	}()
	err = runNamesrv(ctx)
	cancel()
	return errors.Join(err, <-done)
}
