package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/zonemq/zonemq/internal/controller"
	"github.com/zonemq/zonemq/internal/protocol"
)

func init() {
	register(command{
		name:    "controller",
		summary: "failover controller voter: Raft-replicated masters, epochs and in-sync sets of broker groups",
		run:     runController,
	})
}

const controllerSynopsis = "--listen ADDR --raft-listen ADDR --id NODE --raft-peers 'id=host:port,…' --data DIR [--bootstrap] [flags]"

// controllerAbout is printed by --help between the synopsis and the flags.
const controllerAbout = `One voter of the failover controller (docs/controller.md): the voters keep,
per broker group, the master's broker id, an epoch that only grows and the
in-sync set, replicated with Raft over --raft-listen and kept in --data.
The Raft leader takes broker heartbeats on --listen (code 9201), grants
leases to masters and, when a master is silent for --master-lease-timeout,
makes the in-sync replica with the highest log end master at epoch+1.
Run one voter per IDC (three), or two IDCs and a witness voter in a third
site. Start a new cluster with --bootstrap on every voter, the same
--raft-peers everywhere; restarts need neither (the state is on disk).

Prints "controller listening on ADDR raft=ADDR" on stdout once it serves;
stops cleanly on SIGINT/SIGTERM.
`

// parseControllerArgs turns the command line (and --config file) into the
// controller's options and the log level.
func parseControllerArgs(args []string, stderr io.Writer) (controller.Options, string, error) {
	opts := controller.NewOptions()
	fs := newFlagSet("controller", controllerSynopsis, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: zonemq controller %s\n\n%s\nFlags:\n", controllerSynopsis, controllerAbout)
		fs.PrintDefaults()
	}
	fs.StringVar(&opts.Listen, "listen", opts.Listen, "`host:port` brokers and admin commands reach this voter at")
	fs.StringVar(&opts.RaftListen, "raft-listen", opts.RaftListen,
		"`host:port` of the Raft transport (a specific host: it is advertised to the other voters)")
	fs.StringVar(&opts.NodeID, "id", "", "this voter's Raft `node` id, as --raft-peers names it (required)")
	peers := fs.String("raft-peers", "", "every voter as `'id=host:port,…'` (their --raft-listen); needed with --bootstrap")
	fs.BoolVar(&opts.Bootstrap, "bootstrap", false,
		"start a new cluster with --raft-peers as voters when --data holds no Raft state (ignored otherwise)")
	fs.StringVar(&opts.DataDir, "data", "", "`dir` of the Raft log (raft.db) and snapshots (required)")
	fs.DurationVar(&opts.MasterLeaseTimeout, "master-lease-timeout", opts.MasterLeaseTimeout,
		"elect a new master when the master is silent this long; also the lease a master gets")
	fs.DurationVar(&opts.HeartbeatTimeout, "raft-heartbeat-timeout", opts.HeartbeatTimeout,
		"Raft: a follower without word from the leader this long campaigns")
	fs.DurationVar(&opts.ElectionTimeout, "raft-election-timeout", opts.ElectionTimeout, "Raft: a campaign's timeout")
	fs.DurationVar(&opts.LeaderLeaseTimeout, "raft-leader-lease-timeout", opts.LeaderLeaseTimeout,
		"Raft: a leader out of touch with a majority this long steps down (at most --raft-heartbeat-timeout)")
	fs.IntVar(&opts.MaxFrameSize, "max-frame-size", 0, "largest request frame accepted, in `bytes`; 0 means 16777216")
	fs.StringVar(&opts.ACLFile, "acl-file", "",
		"plain_acl.yml `file` (RocketMQ ACL 1.0): every request signed, heartbeats and elections by an admin\n"+
			"account; re-read on change (default: none, ACL off; see docs/security.md)")
	serverTLS := addServerTLSFlags(fs)
	mf := addMemberFlags(fs)
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	fs.String("config", "", "`file` of key=value lines, keys being these flag names without '--'")
	if err := parseFlags(fs, args, nil); err != nil {
		return opts, "", err
	}
	var err error
	if opts.ClusterSecret, err = mf.load("controller", []string{opts.Listen, opts.RaftListen}, stderr); err != nil {
		return opts, "", err
	}
	if opts.TLSMode, err = serverTLS.parse(); err != nil {
		return opts, "", err
	}
	opts.TLSCertFile, opts.TLSKeyFile = serverTLS.cert, serverTLS.key
	if opts.Peers, err = controller.ParsePeers(*peers); err != nil {
		return opts, "", usagef("%v", err)
	}
	switch {
	case opts.NodeID == "":
		return opts, "", usagef("controller: --id is required")
	case opts.DataDir == "":
		return opts, "", usagef("controller: --data is required")
	}
	return opts, *logLevel, nil
}

func runController(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, level, err := parseControllerArgs(args, stderr)
	if err != nil {
		return err
	}
	logger, err := newLogger(stderr, level)
	if err != nil {
		return err
	}
	opts.Logger = logger
	s, err := controller.New(opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "controller listening on %s raft=%s id=%s\n", s.Addr(), s.RaftAddr(), opts.NodeID)
	return s.Run(ctx)
}

// runAdminControllerStatus serves `admin controller status`.
func runAdminControllerStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("admin controller status", "--controller 'ADDR,…' [--output text|json]", stderr)
	addrs := fs.String("controller", "", "request `addresses` of one or more voters, comma-separated (required)")
	output := fs.String("output", "text", "text (tables) or json (the first voter's status document)")
	timeout := fs.Duration("timeout", 3*time.Second, "per-voter request timeout")
	history := fs.Int("history", 5, "text output: show each group's last `N` masters (epoch history; 0: none)")
	cf := addControllerClientFlags(fs)
	if err := parseQuiet(fs, args, stderr); err != nil {
		return err
	}
	copts, err := cf.options()
	if err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	list := splitAddrs(*addrs)
	if len(list) == 0 {
		return usagef("admin controller status: --controller is required")
	}
	c := controller.NewClientWithOptions(list, copts)
	defer c.Close()
	// Ask the voters in order and show the first answer, preferring the
	// leader's (only it knows who is alive).
	var st *protocol.ControllerStatus
	var errs []error
	for i := 0; i < len(list) && i < 8; i++ {
		addr := list[i]
		rctx, cancel := context.WithTimeout(ctx, *timeout)
		got, err := c.Status(rctx, addr)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st == nil || (!st.IsLeader && got.IsLeader) {
			st = got
		}
		if st.IsLeader {
			break
		}
		if got.LeaderAddr != "" && !slices.Contains(list, got.LeaderAddr) {
			list = append(list, got.LeaderAddr)
		}
	}
	if st == nil {
		return fmt.Errorf("no controller voter answered: %s", oneLine(errors.Join(errs...).Error()))
	}
	if *output == "json" {
		return printJSON(stdout, st)
	}
	leader := st.Leader
	if leader == "" {
		leader = "(none: no majority?)"
	}
	fmt.Fprintf(stdout, "answered by %s; leader %s at %s; term %d; commit %d\n\n", st.NodeID, leader, st.LeaderAddr, st.Term, st.Commit)
	tv := newTable(stdout, "VOTER", "RAFT ADDR", "ADDR", "SUFFRAGE", "LEADER")
	for _, v := range st.Voters {
		tv.row(v.ID, v.RaftAddr, v.Addr, v.Suffrage, yesNo(v.ID == st.Leader))
	}
	if err := tv.flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	tg := newTable(stdout, "CLUSTER", "GROUP", "MASTER", "MASTER ADDR", "EPOCH", "IN-SYNC", "FLOOR", "MEMBERS")
	for _, g := range st.Groups {
		var members []string
		for _, m := range g.Members {
			alive := ""
			if st.IsLeader {
				alive = " down"
				if m.Alive {
					alive = " up"
				}
			}
			members = append(members, fmt.Sprintf("%d@%s(%s)%s end=%d", m.ID, m.Addr, m.IDC, alive, m.LogEnd))
		}
		tg.row(g.Cluster, g.BrokerName, g.MasterID, g.MasterAddr, g.Epoch, protocol.FormatIDs(g.InSync), g.Floor, strings.Join(members, " "))
	}
	if err := tg.flush(); err != nil || *history <= 0 {
		return err
	}
	// Each group's latest masters: which broker held which epoch since when
	// (an acknowledgement is valid only at its master's epoch).
	fmt.Fprintln(stdout)
	th := newTable(stdout, "CLUSTER", "GROUP", "EPOCH", "MASTER", "MASTER ADDR", "ELECTED")
	for _, g := range st.Groups {
		for _, e := range g.History[max(0, len(g.History)-*history):] {
			elected := "-"
			if e.ElectedAtMillis > 0 {
				elected = time.UnixMilli(e.ElectedAtMillis).UTC().Format("2006-01-02T15:04:05.000Z")
			}
			th.row(g.Cluster, g.BrokerName, e.Epoch, e.MasterID, e.Addr, elected)
		}
	}
	return th.flush()
}

// runAdminControllerElect serves `admin controller elect`.
func runAdminControllerElect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("admin controller elect",
		"--controller 'ADDR,…' --cluster NAME --name BROKER [--to ID] [--force] [--output text|json]", stderr)
	addrs := fs.String("controller", "", "request `addresses` of one or more voters, comma-separated (required)")
	cluster := fs.String("cluster", "", "the broker group's cluster (required)")
	name := fs.String("name", "", "the broker group's broker name (required)")
	to := fs.Int64("to", -1, "the broker `id` to make master; -1 lets the controller pick the best live one")
	force := fs.Bool("force", false, "allow a broker outside the in-sync set: messages it lacks are lost\n"+
		"(the answer says how many log bytes at most)")
	output := fs.String("output", "text", "text or json")
	timeout := fs.Duration("timeout", 5*time.Second, "request timeout")
	cf := addControllerClientFlags(fs)
	if err := parseQuiet(fs, args, stderr); err != nil {
		return err
	}
	copts, err := cf.options()
	if err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	list := splitAddrs(*addrs)
	if len(list) == 0 || *cluster == "" || *name == "" {
		return usagef("admin controller elect: --controller, --cluster and --name are required")
	}
	c := controller.NewClientWithOptions(list, copts)
	defer c.Close()
	rctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	out, remark, err := c.Elect(rctx, &protocol.ControllerElectRequestHeader{Cluster: *cluster, BrokerName: *name, To: *to, Force: *force})
	if err != nil {
		return fmt.Errorf("elect in %s/%s: %s", *cluster, *name, oneLine(err.Error()))
	}
	if *output == "json" {
		return printJSON(stdout, map[string]any{"masterId": out.MasterID, "masterAddr": out.MasterAddr,
			"epoch": out.Epoch, "mayLoseBytes": out.MayLoseBytes, "remark": remark})
	}
	fmt.Fprintf(stdout, "%s/%s: master is now broker %d at %s, epoch %d\n", *cluster, *name, out.MasterID, out.MasterAddr, out.Epoch)
	if remark != "" {
		fmt.Fprintln(stdout, remark)
	}
	return nil
}

// splitAddrs splits a comma- or semicolon-separated address list.
func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' }) {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}
