package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/zonemq/zonemq/internal/namesrv"
)

func init() {
	register(command{
		name:    "namesrv",
		summary: "name server: route registry brokers register with and clients query, with each broker's IDC",
		run:     runNamesrv,
	})
}

const namesrvSynopsis = "--listen ADDR --idc NAME [--broker-expiry 3s] [--scan-interval 1s] [--client-expiry 3s] [--kv-config PATH] [flags]"

// namesrvAbout is printed by --help between the synopsis and the flags.
const namesrvAbout = `Serves RocketMQ's name-server protocol: brokers of every IDC register
(REGISTER_BROKER, BROKER_HEARTBEAT) and clients ask for topic routes
(GET_ROUTEINFO_BY_TOPIC), in which every broker carries its IDC as zoneName.
A broker leaves the routes when its connection closes, when it unregisters,
or after --broker-expiry without a registration or heartbeat. A route query
with __ZONE_MODE=true and __ZONE_NAME=IDC gets that IDC's brokers only, or
the full route when that IDC has no writable broker for the topic.
The KV config (PUT_KV_CONFIG, …) is kept in --kv-config. See docs/namesrv.md.

Prints "namesrv listening on ADDR" on stdout once it serves; stops cleanly
on SIGINT/SIGTERM.
`

// namesrvAliases maps RocketMQ namesrv.conf keys to flags. Only keys with
// the same meaning and unit are accepted: listenPort is not (--listen takes
// host:port) and scanNotActiveBrokerInterval is not (milliseconds there, a
// duration here).
var namesrvAliases = map[string]string{
	"kvConfigPath": "kv-config",
}

// parseNamesrvArgs turns the command line (and --config file) into the
// name server's options and the log level.
func parseNamesrvArgs(args []string, stderr io.Writer) (namesrv.Options, string, error) {
	opts, _, level, err := parseNamesrvCommand(args, stderr)
	return opts, level, err
}

// parseNamesrvCommand is parseNamesrvArgs plus the embedded controller
// voter's flags (namesrv_controller.go).
func parseNamesrvCommand(args []string, stderr io.Writer) (namesrv.Options, *namesrvControllerFlags, string, error) {
	opts := namesrv.NewOptions()
	fs := newFlagSet("namesrv", namesrvSynopsis, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: zonemq namesrv %s\n\n%s\nFlags:\n", namesrvSynopsis, namesrvAbout)
		fs.PrintDefaults()
	}
	fs.StringVar(&opts.Listen, "listen", opts.Listen,
		"`host:port` to serve on (RocketMQ binds 0.0.0.0:9876; zonemq defaults to loopback:\n"+
			"give the address brokers and clients reach, e.g. 127.0.1.1:9876)")
	fs.StringVar(&opts.IDC, "idc", "", "the IDC this name server runs in; tags its logs (required)")
	fs.DurationVar(&opts.BrokerExpiry, "broker-expiry", opts.BrokerExpiry,
		"drop a broker silent this long (no registration or heartbeat); a broker's\n"+
			"heartbeatTimeoutMillis overrides it (RocketMQ: 120s)")
	fs.DurationVar(&opts.ScanInterval, "scan-interval", opts.ScanInterval,
		"how often brokers and clients are checked for expiry")
	fs.DurationVar(&opts.ClientExpiry, "client-expiry", opts.ClientExpiry,
		"drop a producer/consumer that sent no client heartbeat (code 9001) this long")
	fs.StringVar(&opts.KVConfigPath, "kv-config", opts.KVConfigPath,
		"`file` the KV config is kept in (JSON, rewritten atomically on each change);\n"+
			"empty keeps it in memory only (config-file alias: kvConfigPath)")
	fs.IntVar(&opts.MaxFrameSize, "max-frame-size", 0,
		"largest request frame accepted, in `bytes`; 0 means 16777216 (RocketMQ's)")
	fs.IntVar(&opts.MaxTopicsPerBroker, "max-topics-per-broker", opts.MaxTopicsPerBroker,
		"refuse a broker registration carrying more `topics` than this")
	fs.DurationVar(&opts.ClaimHold, "claim-hold", opts.ClaimHold,
		"keep a broker slot for the data directory that held it this long after it was last seen: another\n"+
			"process with a copy of its name and id is refused meanwhile (negative: off)")
	fs.IntVar(&opts.MaxTopicEntries, "max-topic-entries", opts.MaxTopicEntries,
		"refuse a registration that would make all brokers' topics together more than this many `entries`")
	fs.StringVar(&opts.ACLFile, "acl-file", "",
		"plain_acl.yml `file` (RocketMQ ACL 1.0): check every request against it, re-read on change\n"+
			"(default: none, ACL off; see docs/security.md)")
	serverTLS := addServerTLSFlags(fs)
	mf := addMemberFlags(fs)
	fs.StringVar(&opts.MetricsListen, "metrics-listen", "",
		"`host:port` serving Prometheus metrics at /metrics (docs/metrics.md); empty: none")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	fs.String("config", "",
		"`file` of key=value lines, keys being these flag names without '--' ('#' comments);\n"+
			"flags given on the command line win")
	ctrl := addNamesrvControllerFlags(fs)
	controllerAddrs := fs.String("controller-addrs", "",
		"failover controller voters' request addresses `'host:port,…'`: a master they elected takes its\n"+
			"group's master slot at once, even while the master it replaced still holds it\n"+
			"(default: this process's own voter with --controller, else none; docs/controller.md)")
	fs.StringVar(&opts.ControllerAccessKey, "controller-access-key", "",
		"ACL access `key` signing the status reads that confirm an elected master (voters with --acl-file)")
	fs.StringVar(&opts.ControllerSecretKey, "controller-secret-key", "", "ACL secret `key` of --controller-access-key")
	controllerTLS := addClientTLSFlags(fs, "controller-tls", "the failover controllers of --controller-addrs")
	if err := parseFlags(fs, args, namesrvAliases); err != nil {
		return opts, nil, "", err
	}
	if (opts.ControllerAccessKey == "") != (opts.ControllerSecretKey == "") {
		return opts, nil, "", usagef("--controller-access-key and --controller-secret-key go together")
	}
	var err error
	if opts.ControllerTLS, err = controllerTLS.config(); err != nil {
		return opts, nil, "", err
	}
	opts.ControllerAddrs = splitAddrs(*controllerAddrs)
	if len(opts.ControllerAddrs) == 0 && ctrl.enabled {
		opts.ControllerAddrs = []string{ctrl.opts.Listen}
	}
	mode, err := serverTLS.parse()
	if err != nil {
		return opts, nil, "", err
	}
	opts.TLSMode, opts.TLSCertFile, opts.TLSKeyFile = mode, serverTLS.cert, serverTLS.key
	listens := []string{opts.Listen}
	if ctrl.enabled {
		listens = append(listens, ctrl.opts.Listen, ctrl.opts.RaftListen)
	}
	if opts.ClusterSecret, err = mf.load("namesrv", listens, stderr); err != nil {
		return opts, nil, "", err
	}
	return opts, ctrl, *logLevel, nil
}

func runNamesrv(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, ctrl, level, err := parseNamesrvCommand(args, stderr)
	if err != nil {
		return err // a usage error, or flag.ErrHelp after --help
	}
	logger, err := newLogger(stderr, level)
	if err != nil {
		return err
	}
	opts.Logger = logger
	ctrlOpts, err := ctrl.options(logger)
	if err != nil {
		return err
	}
	if ctrlOpts != nil {
		// The embedded voter guards its port as the name server does.
		ctrlOpts.ACLFile, ctrlOpts.ClusterSecret = opts.ACLFile, opts.ClusterSecret
		ctrlOpts.TLSMode, ctrlOpts.TLSCertFile, ctrlOpts.TLSKeyFile = opts.TLSMode, opts.TLSCertFile, opts.TLSKeyFile
	}
	s, err := namesrv.New(opts)
	if err != nil {
		if errors.Is(err, namesrv.ErrInvalidOptions) {
			return usagef("%v", err)
		}
		return err
	}
	fmt.Fprintf(stdout, "namesrv listening on %s idc=%s\n", s.Addr(), opts.IDC)
	printMetricsAddr(stdout, "namesrv", s.MetricsAddr())
	if ctrlOpts != nil {
		return runWithController(ctx, *ctrlOpts, stdout, s.Run, s.Shutdown)
	}
	return s.Run(ctx)
}
