package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/zonemq/zonemq/internal/addrsrv"
)

func init() {
	register(command{
		name:    "addrsrv",
		summary: "address server: tells clients and brokers which name servers of every IDC are alive",
		run:     runAddrsrv,
	})
}

const addrsrvSynopsis = "--listen ADDR --idc NAME --namesrv 'idc1=ADDR,idc1=ADDR,idc2=ADDR' [flags]"

// addrsrvAbout is printed by --help between the synopsis and the flags.
const addrsrvAbout = `Probes every IDC's name servers (a GET_BROKER_CLUSTER_INFO request every
--probe-interval; down after --down-after misses in a row, up after one answer),
pings each listed one every --ping-interval on the probes' connection (down at once
when nothing answered for --silent-after) and serves, over HTTP:

  GET /rocketmq/nsaddr          alive name servers, own IDC first: "host:port;host:port"
                                (every configured one when none is alive); the format stock
                                RocketMQ clients read, also as /rocketmq/nsaddr-UNIT
  GET /v1/namesrvs              JSON [{"addr","idc","alive","lastProbe","lastError"}]
  GET /healthz                  "ok" while the address server runs

Point clients at it with rocketmq-client-go's WithNameServerDomain("http://ADDR/rocketmq/nsaddr"),
Java's -Drocketmq.namesrv.domain=ADDR, or zonemq's --addrsrv http://ADDR.
`

// namesrvListFlag is --namesrv: IDC=HOST:PORT items, comma-separated; the
// flag may be repeated (and the key repeated in a config file) to add more.
type namesrvListFlag struct{ list *[]addrsrv.Namesrv }

func (f namesrvListFlag) String() string {
	if f.list == nil {
		return ""
	}
	return addrsrv.FormatNamesrvs(*f.list)
}

func (f namesrvListFlag) Set(s string) error {
	items, err := addrsrv.ParseNamesrvs(s)
	if err != nil {
		// The flag package already names the flag and the value.
		return errors.New(strings.TrimPrefix(err.Error(), "--namesrv: "))
	}
	*f.list = append(*f.list, items...)
	return nil
}

// parseAddrsrvArgs turns the command line (and --config file) into the
// address server's options and the log level. Every error is a usage error.
func parseAddrsrvArgs(args []string, stderr io.Writer) (addrsrv.Options, string, error) {
	opts := addrsrv.NewOptions()
	fs := newFlagSet("addrsrv", addrsrvSynopsis, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: zonemq addrsrv %s\n\n%s\nFlags:\n", addrsrvSynopsis, addrsrvAbout)
		fs.PrintDefaults()
	}
	fs.StringVar(&opts.Listen, "listen", opts.Listen,
		"`host:port` to serve HTTP on (stock RocketMQ clients look for port 8080)")
	fs.StringVar(&opts.IDC, "idc", "",
		"this address server's own IDC; its name servers are listed first (required)")
	fs.Var(namesrvListFlag{&opts.Namesrvs}, "namesrv",
		"every IDC's name servers as comma-separated `IDC=HOST:PORT` items, e.g.\n"+
			"'idc1=127.0.1.1:9876,idc1=127.0.1.2:9876,idc2=127.0.2.1:9876' (required; may be repeated)")
	fs.DurationVar(&opts.ProbeInterval, "probe-interval", opts.ProbeInterval,
		"how often each name server is probed")
	fs.DurationVar(&opts.ProbeTimeout, "probe-timeout", 0,
		"how long one probe (dial included) may take before it counts as a miss;\n"+
			"0 means min(--probe-interval, 400ms)")
	fs.IntVar(&opts.DownAfter, "down-after", opts.DownAfter,
		"consecutive missed probes that mark a name server down (one answer marks it up)")
	serverTLS := addServerTLSFlags(fs)
	fs.DurationVar(&opts.PingInterval, "ping-interval", opts.PingInterval,
		"how often each listed name server is pinged between probes, on the probes' connection (0: off)")
	fs.DurationVar(&opts.SilentAfter, "silent-after", opts.SilentAfter,
		"a listed name server that answers no ping nor probe for this long is delisted at once")
	probeTLS := addClientTLSFlags(fs, "probe-tls", "the name servers it probes")
	fs.StringVar(&opts.MetricsListen, "metrics-listen", "",
		"`host:port` serving Prometheus metrics at /metrics (docs/metrics.md); empty: none")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	fs.String("config", "",
		"`file` of key=value lines, keys being these flag names without '--' ('#' comments);\n"+
			"flags given on the command line win")
	if err := parseFlags(fs, args, nil); err != nil {
		return opts, "", err
	}
	if err := opts.Validate(); err != nil {
		return opts, "", usagef("%v", err)
	}
	mode, err := serverTLS.parse()
	if err != nil {
		return opts, "", err
	}
	opts.TLSMode, opts.TLSCertFile, opts.TLSKeyFile = mode, serverTLS.cert, serverTLS.key
	if opts.ProbeTLS, err = probeTLS.config(); err != nil {
		return opts, "", err
	}
	return opts, *logLevel, nil
}

func runAddrsrv(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, level, err := parseAddrsrvArgs(args, stderr)
	if err != nil {
		return err // a usage error, or flag.ErrHelp after --help
	}
	return serveRole(ctx, stderr, level, addrsrv.ErrInvalidOptions,
		func(logger *slog.Logger) (*addrsrv.Server, error) {
			opts.Logger = logger
			return addrsrv.New(opts)
		},
		func(s *addrsrv.Server) { printMetricsAddr(stdout, "addrsrv", s.MetricsAddr()) })
}
