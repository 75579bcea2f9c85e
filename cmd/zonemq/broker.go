package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/zonemq/zonemq/internal/broker"
	"github.com/zonemq/zonemq/internal/wallclock"
)

func init() {
	register(command{
		name:    "broker",
		summary: "broker: stores messages, serves producers and consumers, registers with every IDC's name servers",
		run:     runBroker,
	})
}

const brokerSynopsis = "--listen ADDR --idc NAME --name BROKER_NAME [--id 0] [--cluster DefaultCluster] --data DIR\n" +
	"       (--addrsrv URL[,URL] | --namesrv 'ADDR;ADDR') [--flush async|sync] [--heartbeat-interval 1s] [flags]"

// brokerAbout is printed by --help between the synopsis and the flags.
const brokerAbout = `Serves RocketMQ's broker protocol (send, pull with long polling, consumer
offsets, heartbeats, topic admin) so stock RocketMQ clients work unmodified,
and keeps messages in --data. It registers with every name server of every
IDC: those given with --namesrv plus every one the address servers of
--addrsrv list (alive or not, re-read every 5 s), with a light heartbeat
every --heartbeat-interval and the full topic table at start, on every
topic change and every --register-interval. Its IDC is registered as the
broker's zoneName. See docs/broker.md.

A RocketMQ broker.conf is accepted as --config: brokerClusterName, brokerName,
brokerId, namesrvAddr, listenPort, brokerIP1, storePathRootDir, flushDiskType,
autoCreateTopicEnable, maxMessageSize, mappedFileSizeCommitLog,
messageDelayLevel, transactionCheckMax, enablePropertyFilter, traceTopicEnable,
fileReservedTime (hours), timerMaxDelaySec (seconds),
diskMaxUsedSpaceRatio (percent), and registerNameServerPeriod,
brokerHeartbeatInterval, transactionCheckInterval and transactionTimeOut (ms)
are converted; brokerRole ASYNC_MASTER / SYNC_MASTER set --replication,
SLAVE needs brokerId >= 1; haMasterAddress is --master-addr; deleteWhen is
ignored with a warning.

Broker groups (docs/replication.md): brokers sharing --name form a group;
--id 0 is its master, 1..n its replicas, each in its own --idc. Replicas
copy the master's commit log byte for byte over the broker port and serve
reads; --replication sync acknowledges a send only once every in-sync
replica holds it.

Prints "broker listening on ADDR idc=IDC name=NAME" on stdout once it
serves; stops cleanly on SIGINT/SIGTERM (unregistering first).
`

// brokerAliases maps RocketMQ broker.conf keys with the same meaning and
// unit as a zonemq flag. Keys whose unit differs are converted by
// brokerConfConversions.
var brokerAliases = map[string]string{
	"brokerClusterName":       "cluster",
	"brokerName":              "name",
	"brokerId":                "id",
	"namesrvAddr":             "namesrv",
	"storePathRootDir":        "data",
	"flushDiskType":           "flush",
	"autoCreateTopicEnable":   "auto-create-topic",
	"maxMessageSize":          "max-message-size",
	"mappedFileSizeCommitLog": "segment-size",
	"mapedFileSizeCommitLog":  "segment-size", // RocketMQ 4's spelling
	"messageDelayLevel":       "message-delay-level",
	"transactionCheckMax":     "transaction-check-max",
	"haMasterAddress":         "master-addr",
	"enablePropertyFilter":    "enable-property-filter",
	"traceTopicEnable":        "trace-topic-enable",
	"accessKey":               "access-key",
	"secretKey":               "secret-key",
}

// brokerConfConversions holds the RocketMQ broker.conf keys whose value
// needs converting. They are hidden flags (so the config file can set
// them); their values are applied after parsing unless the target flag was
// given on the command line.
type brokerConfConversions struct {
	listenPort            string // port only: joined with --listen's host
	brokerIP1             string // host only: joined with --listen's port
	fileReservedHours     string // hours → --file-reserved-time
	diskMaxUsedPercent    string // percent → --disk-max-used-ratio
	registerPeriodMillis  string // ms → --register-interval
	heartbeatPeriodMillis string // ms → --heartbeat-interval (brokerHeartbeatInterval)
	txCheckIntervalMillis string // ms → --transaction-check-interval (transactionCheckInterval)
	txTimeoutMillis       string // ms → --transaction-timeout (transactionTimeOut)
	timerMaxDelaySeconds  string // s → --timer-max-delay (timerMaxDelaySec)
	ignored               []string
	brokerRole            string
}

// brokerArgs is the parsed command line.
type brokerArgs struct {
	opts     broker.Options
	proxy    brokerProxyFlags
	logLevel string
	warnings []string // ignored broker.conf keys, printed once the logger exists
}

// parseBrokerArgs turns the command line (and --config file) into broker
// options.
func parseBrokerArgs(args []string, stderr io.Writer) (*brokerArgs, error) {
	opts := broker.NewOptions()
	opts.Listen = "127.0.0.1:10911"
	fs := newFlagSet("broker", brokerSynopsis, stderr)
	hidden := map[string]bool{}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: zonemq broker %s\n\n%s\nFlags:\n", brokerSynopsis, brokerAbout)
		visible := flag.NewFlagSet("", flag.ContinueOnError)
		visible.SetOutput(stderr)
		fs.VisitAll(func(f *flag.Flag) {
			if !hidden[f.Name] {
				visible.Var(f.Value, f.Name, f.Usage)
				visible.Lookup(f.Name).DefValue = f.DefValue
			}
		})
		visible.PrintDefaults()
	}

	fs.StringVar(&opts.Listen, "listen", opts.Listen,
		"`host:port` to serve clients and name servers on; registered as the broker's\n"+
			"address (an unspecified host advertises the first non-loopback IPv4)")
	fs.StringVar(&opts.IDC, "idc", "", "the IDC this broker runs in; registered as its zoneName (required)")
	fs.StringVar(&opts.BrokerName, "name", "", "the broker `name` (required; config alias brokerName)")
	fs.Int64Var(&opts.BrokerID, "id", opts.BrokerID, "broker `id` in its group: 0 for the master, 1..n for replicas\n"+
		"(config alias brokerId)")
	fs.StringVar(&opts.Cluster, "cluster", opts.Cluster, "cluster `name` to register in (config alias brokerClusterName)")
	fs.StringVar(&opts.DataDir, "data", "", "data `directory` (commit log, queues, offsets, metadata); created if\n"+
		"missing (required; config alias storePathRootDir)")
	addrsrv := fs.String("addrsrv", "", "address-server base `URLs`, comma-separated (http://127.0.1.1:18080):\n"+
		"register with every name server they list")
	namesrv := fs.String("namesrv", "", "name-server `addresses`, ';'-separated ('127.0.1.1:9876;127.0.2.1:9876')\n"+
		"(config alias namesrvAddr); at least one of --addrsrv and --namesrv is required")
	flush := fs.String("flush", "async", "`mode` async (fsync every 500ms) or sync (acknowledge after fsync)\n"+
		"(config alias flushDiskType: ASYNC_FLUSH, SYNC_FLUSH)")
	fs.DurationVar(&opts.HeartbeatInterval, "heartbeat-interval", opts.HeartbeatInterval,
		"period of the light BROKER_HEARTBEAT to each name server")
	fs.DurationVar(&opts.RegisterInterval, "register-interval", opts.RegisterInterval,
		"period of the full REGISTER_BROKER with every topic (config alias\n"+
			"registerNameServerPeriod, in ms)")
	fs.BoolVar(&opts.AutoCreateTopic, "auto-create-topic", opts.AutoCreateTopic,
		"create a topic on its first send (config alias autoCreateTopicEnable)")
	fs.IntVar(&opts.MaxMessageSize, "max-message-size", opts.MaxMessageSize,
		"largest message body accepted, in `bytes` (config alias maxMessageSize)")
	fs.IntVar(&opts.MaxTopics, "max-topics", broker.DefaultMaxTopics,
		"refuse to create topics beyond this `count` (admin or auto-created); keep it within the name servers' --max-topics-per-broker")
	fs.DurationVar(&opts.FileReservedTime, "file-reserved-time", opts.FileReservedTime,
		"keep commit-log segments this long (config alias fileReservedTime, in hours)")
	fs.Float64Var(&opts.DiskMaxUsedRatio, "disk-max-used-ratio", opts.DiskMaxUsedRatio,
		"refuse sends above this used share of the disk, 0..1 (config alias\n"+
			"diskMaxUsedSpaceRatio, in percent)")
	fs.Int64Var(&opts.SegmentSize, "segment-size", opts.SegmentSize,
		"commit-log segment size in `bytes`, fixed per data directory (config alias\n"+
			"mappedFileSizeCommitLog)")
	fs.DurationVar(&opts.LongPollingMax, "long-polling-max", opts.LongPollingMax,
		"longest a pull waits for a message (kept below the clients' 30s RPC timeout)")
	fs.DurationVar(&opts.ChannelExpiry, "channel-expiry", opts.ChannelExpiry,
		"drop a client that sent no heartbeat this long (clients announcing their\n"+
			"heartbeat period, as the zonemq SDK does, after max(3 periods, 3s))")
	fs.StringVar(&opts.MessageDelayLevel, "message-delay-level", opts.MessageDelayLevel,
		"`delays` of the DELAY levels 1..18, space-separated, units s m h d (config alias\n"+
			"messageDelayLevel); retries use level 3 + reconsumeTimes")
	fs.DurationVar(&opts.LockLease, "lock-lease", opts.LockLease,
		"how long an orderly consumer's queue lock lasts without renewal")
	fs.DurationVar(&opts.TransactionCheckInterval, "transaction-check-interval", opts.TransactionCheckInterval,
		"period of the check of unresolved transaction half messages (config alias\n"+
			"transactionCheckInterval, in ms)")
	fs.DurationVar(&opts.TransactionTimeout, "transaction-timeout", opts.TransactionTimeout,
		"age at which an unresolved half message is first checked (config alias\n"+
			"transactionTimeOut, in ms)")
	fs.IntVar(&opts.TransactionCheckMax, "transaction-check-max", opts.TransactionCheckMax,
		"`checks` of a half message before it is discarded (config alias transactionCheckMax)")
	fs.StringVar(&opts.Replication, "replication", opts.Replication,
		"`mode` a master acknowledges in: async (after its own write) or sync (after every\n"+
			"in-sync replica holds the message too); config brokerRole SYNC_MASTER sets sync")
	fs.IntVar(&opts.MinInsyncReplicas, "min-insync-replicas", opts.MinInsyncReplicas,
		"with --replication sync, the fewest `copies` (master counted) a send needs; with\n"+
			"fewer in sync, sends are refused with SLAVE_NOT_AVAILABLE and nothing is stored")
	fs.DurationVar(&opts.ReplicaAckTimeout, "replica-ack-timeout", opts.ReplicaAckTimeout,
		"how long a sync send waits for its replicas before FLUSH_SLAVE_TIMEOUT")
	fs.DurationVar(&opts.ReplicaLagMax, "replica-lag-max", opts.ReplicaLagMax,
		"a replica behind the master's end this long leaves the in-sync set")
	fs.StringVar(&opts.MasterAddr, "master-addr", "",
		"on a replica, the master's `host:port`; empty: the group's id-0 address the name\n"+
			"servers list (config alias haMasterAddress)")
	fs.DurationVar(&opts.TimerMaxDelay, "timer-max-delay", opts.TimerMaxDelay,
		"how far ahead a timer message (TIMER_DELIVER_MS, TIMER_DELAY_SEC/MS) may be due;\n"+
			"further is refused (config alias timerMaxDelaySec, in seconds)")
	fs.BoolVar(&opts.TraceTopicEnable, "trace-topic-enable", opts.TraceTopicEnable,
		"create RMQ_SYS_TRACE_TOPIC and store the clients' message traces (config alias\n"+
			"traceTopicEnable; RocketMQ's default is false)")
	fs.BoolVar(&opts.EnablePropertyFilter, "enable-property-filter", opts.EnablePropertyFilter,
		"let consumers subscribe with SQL92 property filters, evaluated on pull (config alias\n"+
			"enablePropertyFilter; RocketMQ's default is false)")
	controllers := fs.String("controller", "", "failover controller `addresses`, comma-separated (docs/controller.md): the\n"+
		"controller elects the group's master; a master acknowledges only while it holds its lease")
	fs.DurationVar(&opts.ControllerHeartbeatInterval, "controller-heartbeat-interval", opts.ControllerHeartbeatInterval,
		"period of the reports to the controller (about a third of its --master-lease-timeout)")
	fs.StringVar(&opts.ACLFile, "acl-file", "",
		"plain_acl.yml `file` (RocketMQ ACL 1.0): check every request against it, re-read on change\n"+
			"(default: none, ACL off; see docs/security.md)")
	fs.StringVar(&opts.AccessKey, "access-key", "",
		"access `key` the broker signs its name-server requests with (config alias accessKey)")
	fs.StringVar(&opts.SecretKey, "secret-key", "",
		"secret `key` of --access-key; prefer the config file to the command line (config alias secretKey)")
	serverTLS := addServerTLSFlags(fs)
	mf := addMemberFlags(fs)
	namesrvTLS := addClientTLSFlags(fs, "namesrv-tls", "the name servers")
	fs.StringVar(&opts.MetricsListen, "metrics-listen", "",
		"`host:port` serving Prometheus metrics at /metrics (docs/metrics.md); empty: none")
	addHardeningFlags(fs, &opts.Hardening)
	var apFlags brokerProxyFlags
	fs.StringVar(&apFlags.listen, "proxy-listen", "",
		"`host:port` to serve the RocketMQ 5 clients' gRPC access point on, in this process (as zonemq\n"+
			"proxy does; docs/grpc.md); it uses --tls-cert/--tls-key (else a self-signed certificate),\n"+
			"--acl-file, and reaches the cluster as the broker does; empty: none")
	fs.StringVar(&apFlags.advertise, "proxy-advertise", "",
		"`host:port` routes name for the access point when a client names none (default --proxy-listen)")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	fs.String("config", "",
		"`file` of key=value lines: these flag names without '--', or RocketMQ broker.conf\n"+
			"keys ('#' comments); flags given on the command line win")

	var conv brokerConfConversions
	hide := func(name string, dst *string) {
		hidden[name] = true
		fs.Func(name, "RocketMQ broker.conf key", func(v string) error { *dst = v; return nil })
	}
	hide("listenPort", &conv.listenPort)
	hide("brokerIP1", &conv.brokerIP1)
	hide("fileReservedTime", &conv.fileReservedHours)
	hide("diskMaxUsedSpaceRatio", &conv.diskMaxUsedPercent)
	hide("registerNameServerPeriod", &conv.registerPeriodMillis)
	hide("brokerHeartbeatInterval", &conv.heartbeatPeriodMillis)
	hide("transactionCheckInterval", &conv.txCheckIntervalMillis)
	hide("transactionTimeOut", &conv.txTimeoutMillis)
	hide("timerMaxDelaySec", &conv.timerMaxDelaySeconds)
	hide("brokerRole", &conv.brokerRole)
	for _, k := range []string{"deleteWhen", "brokerIP2", "haListenPort", "storePathCommitLog", "storePathConsumeQueue", "storePathIndex"} {
		hidden[k] = true
		fs.Func(k, "ignored RocketMQ broker.conf key", func(string) error { conv.ignored = append(conv.ignored, k); return nil })
	}

	if err := parseFlags(fs, args, brokerAliases); err != nil {
		return nil, err
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	ba := &brokerArgs{logLevel: *logLevel, proxy: apFlags}
	if apFlags.listen == "" && apFlags.advertise != "" {
		return nil, usagef("--proxy-advertise needs --proxy-listen")
	}
	if err := conv.apply(&opts, explicit, ba); err != nil {
		return nil, err
	}

	for _, a := range strings.Split(*controllers, ",") {
		if a = strings.TrimSpace(a); a != "" {
			opts.ControllerAddrs = append(opts.ControllerAddrs, a)
		}
	}
	if *namesrv != "" {
		for _, a := range strings.FieldsFunc(*namesrv, func(r rune) bool { return r == ';' || r == ',' }) {
			if a = strings.TrimSpace(a); a != "" {
				opts.NamesrvAddrs = append(opts.NamesrvAddrs, a)
			}
		}
	}
	if *addrsrv != "" {
		for _, u := range strings.Split(*addrsrv, ",") {
			if u = strings.TrimSpace(u); u != "" {
				opts.AddrsrvURLs = append(opts.AddrsrvURLs, u)
			}
		}
	}
	mode, err := broker.ParseFlushMode(*flush)
	if err != nil {
		return nil, usagef("--flush: %v", err)
	}
	opts.Flush = mode
	if opts.TLSMode, err = serverTLS.parse(); err != nil {
		return nil, err
	}
	opts.TLSCertFile, opts.TLSKeyFile = serverTLS.cert, serverTLS.key
	if opts.NamesrvTLS, err = namesrvTLS.config(); err != nil {
		return nil, err
	}
	switch {
	case opts.IDC == "":
		return nil, usagef("--idc is required (the IDC this broker runs in)")
	case opts.BrokerName == "":
		return nil, usagef("--name is required (the broker name)")
	case opts.DataDir == "":
		return nil, usagef("--data is required (the data directory)")
	case len(opts.NamesrvAddrs) == 0 && len(opts.AddrsrvURLs) == 0:
		return nil, usagef("one of --addrsrv and --namesrv is required")
	}
	if opts.ClusterSecret, err = mf.load("broker", []string{opts.Listen}, stderr); err != nil {
		return nil, err
	}
	ba.opts = opts
	return ba, nil
}

// apply converts the RocketMQ values into opts, skipping any whose target
// flag was given on the command line.
func (c *brokerConfConversions) apply(opts *broker.Options, explicit map[string]bool, ba *brokerArgs) error {
	if (c.listenPort != "" || c.brokerIP1 != "") && !explicit["listen"] {
		host, port, err := net.SplitHostPort(opts.Listen)
		if err != nil {
			return usagef("--listen %q: %v", opts.Listen, err)
		}
		if c.listenPort != "" {
			if _, err := strconv.ParseUint(c.listenPort, 10, 16); err != nil {
				return usagef("config listenPort=%q is not a port", c.listenPort)
			}
			port = c.listenPort
		}
		if c.brokerIP1 != "" {
			host = c.brokerIP1
		}
		opts.Listen = net.JoinHostPort(host, port)
	}
	if c.fileReservedHours != "" && !explicit["file-reserved-time"] {
		h, err := strconv.ParseFloat(c.fileReservedHours, 64)
		if err != nil || h <= 0 {
			return usagef("config fileReservedTime=%q is not a number of hours", c.fileReservedHours)
		}
		opts.FileReservedTime = time.Duration(h * float64(time.Hour))
	}
	if c.diskMaxUsedPercent != "" && !explicit["disk-max-used-ratio"] {
		p, err := strconv.ParseFloat(c.diskMaxUsedPercent, 64)
		if err != nil || p <= 0 || p > 100 {
			return usagef("config diskMaxUsedSpaceRatio=%q is not a percentage", c.diskMaxUsedPercent)
		}
		opts.DiskMaxUsedRatio = p / 100
	}
	millis := func(key, v string, dst *time.Duration, flagName string) error {
		if v == "" || explicit[flagName] {
			return nil
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return usagef("config %s=%q is not a number of milliseconds", key, v)
		}
		*dst = time.Duration(ms) * time.Millisecond
		return nil
	}
	if err := millis("registerNameServerPeriod", c.registerPeriodMillis, &opts.RegisterInterval, "register-interval"); err != nil {
		return err
	}
	if err := millis("brokerHeartbeatInterval", c.heartbeatPeriodMillis, &opts.HeartbeatInterval, "heartbeat-interval"); err != nil {
		return err
	}
	if err := millis("transactionCheckInterval", c.txCheckIntervalMillis, &opts.TransactionCheckInterval, "transaction-check-interval"); err != nil {
		return err
	}
	if err := millis("transactionTimeOut", c.txTimeoutMillis, &opts.TransactionTimeout, "transaction-timeout"); err != nil {
		return err
	}
	if c.timerMaxDelaySeconds != "" && !explicit["timer-max-delay"] {
		sec, err := strconv.ParseInt(c.timerMaxDelaySeconds, 10, 64)
		if err != nil || sec <= 0 || sec > int64(math.MaxInt64/time.Second) {
			return usagef("config timerMaxDelaySec=%q is not a positive number of seconds", c.timerMaxDelaySeconds)
		}
		opts.TimerMaxDelay = time.Duration(sec) * time.Second
	}
	switch strings.ToUpper(c.brokerRole) {
	case "":
	case "ASYNC_MASTER", "SYNC_MASTER":
		if !explicit["replication"] {
			opts.Replication = broker.ReplicationAsync
			if strings.EqualFold(c.brokerRole, "SYNC_MASTER") {
				opts.Replication = broker.ReplicationSync
			}
		}
	case "SLAVE":
		if opts.BrokerID < 1 {
			return usagef("config brokerRole=SLAVE needs brokerId >= 1 (the master is brokerId 0)")
		}
	default:
		return usagef("config brokerRole=%s: want ASYNC_MASTER, SYNC_MASTER or SLAVE", c.brokerRole)
	}
	for _, k := range c.ignored {
		ba.warnings = append(ba.warnings, k+" ignored: zonemq has no such setting")
	}
	return nil
}

func runBroker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ba, err := parseBrokerArgs(args, stderr)
	if err != nil {
		return err // a usage error, or flag.ErrHelp after --help
	}
	return serveRole(ctx, stderr, ba.logLevel, broker.ErrInvalidOptions,
		func(logger *slog.Logger) (brokerProcess, error) {
			for _, w := range ba.warnings {
				logger.Warn("config: " + w)
			}
			ba.opts.Logger = logger
			// The chaos campaign's clock faults (zonemq drill --chaos):
			// nothing unless ZONEMQ_CLOCK_SKEW_FILE is set.
			go wallclock.Watch(ctx, logger, 100*time.Millisecond)
			if ba.proxy.listen != "" {
				return startBrokerWithAccessPoint(ctx, &ba.proxy, ba.opts, logger)
			}
			return broker.New(ba.opts)
		},
		func(s brokerProcess) {
			fmt.Fprintf(stdout, "broker listening on %s idc=%s name=%s\n", s.Addr(), ba.opts.IDC, ba.opts.BrokerName)
			printMetricsAddr(stdout, "broker", s.MetricsAddr())
			if ap, ok := s.(*brokerWithAccessPoint); ok {
				fmt.Fprintf(stdout, "access point on %s\n", ap.ap.Addr())
			}
		})
}

// brokerProcess is what the broker command runs: a broker, or a broker and
// an access point (broker_proxy.go).
type brokerProcess interface {
	Run(ctx context.Context) error
	Addr() string
	MetricsAddr() string
}
