package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/broker"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/loadgen"
)

func init() {
	register(command{
		name:    "bench",
		summary: "measure send and consume throughput and latency, against a cluster or an in-process one (--local)",
		run:     runBench,
	})
}

const benchSynopsis = "(--addrsrv URL | --namesrv 'ADDR;ADDR' | --local [--flush async|sync]) [--idc NAME] [--topic T] [--size 1024]\n" +
	"                    [--count N | --duration D] [--producers 4 | --inflight N] [--rate N] [--consumers 1] [--batch 1] [--mode send|consume|both]\n" +
	"                    [--output text|json]"

const benchAbout = `Sends and/or consumes messages as fast as the cluster takes them, with the
public SDK, and reports messages/s and MB/s (MB = 10^6 bytes of body) sent and
consumed, the latency of each send call (p50, p90, p99, max), errors, and the
end-to-end latency from the broker's store timestamp to the consumer's handler
(millisecond resolution; across machines it includes their clock offset).

--mode both (the default) starts the consumers first, waits until they hold
every queue of the topic, then sends; it waits (up to --drain-timeout) for
every acknowledged message to be consumed, and counts the ones that were not
as errors. --mode send only sends. --mode consume reads the topic's backlog
with a fresh group from the first offset, until --count messages, --duration,
or nothing new for --idle.

--producers goroutines share one Producer (as the SDK recommends); each
waits for its send to be stored before the next. --inflight N sends
asynchronously instead (SendAsync) and keeps N send calls in flight at once,
as an asynchronous publisher does; the latency is then from the call to its
callback. --consumers PushConsumers
form one group. Bodies are random bytes: compression (bodies of 4 KiB and
more) saves nothing and cannot flatter the figures.

--local starts a one-IDC cluster (address server, name server, broker) in
this process on free ports of 127.0.1.1 with a temporary data directory,
runs the benchmark against it and stops it: client and servers then share
this machine's cores.
`

// benchOptions is the parsed bench command line: the run itself
// (internal/loadgen) and what only the command knows.
type benchOptions struct {
	load        loadgen.Options
	clientFlags *clientFlags
	local       bool
	flush       string
	output      string
	cpuProfile  string
	memProfile  string
}

func parseBenchArgs(args []string, stderr io.Writer) (benchOptions, error) {
	var o benchOptions
	fs := newFlagSet("bench", benchSynopsis, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: zonemq bench %s\n\n%s\nFlags:\n", benchSynopsis, benchAbout)
		fs.PrintDefaults()
	}
	o.clientFlags = addClientFlags(fs)
	fs.BoolVar(&o.local, "local", false, "start an in-process one-IDC cluster on free ports, benchmark it, stop it (no address needed)")
	fs.StringVar(&o.flush, "flush", "async", "with --local: the broker's flush `mode`, async (fsync every 500ms) or sync (acknowledge after fsync)")
	fs.StringVar(&o.load.Topic, "topic", "BenchTopic", "topic to use; created on every broker if missing")
	fs.IntVar(&o.load.Queues, "queues", 4, "queues per broker when the topic has to be created")
	fs.StringVar(&o.load.Group, "group", "", "consumer group (default: a fresh bench_<run id>, so nothing committed earlier applies)")
	fs.IntVar(&o.load.Size, "size", 1024, "message body size in `bytes`")
	fs.IntVar(&o.load.Count, "count", 0, "messages to send (--mode consume: to receive); 0: as many as --duration allows")
	fs.DurationVar(&o.load.Duration, "duration", 0, "how long to send (--mode consume: to receive); default 10s without --count,\n"+
		"with --count a cap (default "+loadgen.MaxDuration.String()+")")
	fs.IntVar(&o.load.Producers, "producers", 4, "goroutines sending at once, sharing one producer")
	fs.IntVar(&o.load.Inflight, "inflight", 0, "send asynchronously with this many send calls in flight (0: --producers synchronous senders)")
	fs.IntVar(&o.load.Consumers, "consumers", 1, "push consumers in the group")
	fs.IntVar(&o.load.Batch, "batch", 1, "messages per send call (more than 1: a batch send)")
	fs.StringVar(&o.load.Mode, "mode", "both", "send, consume or both")
	fs.StringVar(&o.output, "output", "text", "text (a readable report, progress on stderr) or json (one JSON object)")
	fs.DurationVar(&o.load.DrainTimeout, "drain-timeout", 30*time.Second, "--mode both: how long to wait after the last send for the consumers to catch up")
	fs.DurationVar(&o.load.Idle, "idle", 3*time.Second, "--mode consume: stop once nothing new arrived for this long")
	fs.DurationVar(&o.load.SendTimeout, "send-timeout", client.DefaultSendTimeout, "how long one send call may take, failover included")
	fs.DurationVar(&o.load.Progress, "progress", time.Second, "text output: print progress on stderr this often (0: never)")
	fs.StringVar(&o.load.AccessPoint, "access-point", "", "send through this gRPC access point (`host:port`, plaintext) with the RocketMQ 5 protocol\n"+
		"instead of the SDK; one message per call, --inflight (else --producers) calls in flight")
	fs.IntVar(&o.load.Rate, "rate", 0, "send at most this many `messages per second` in all (0: as fast as the sends go); with --inflight, a soak at a steady load")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this process (client and, with --local, servers) to `file` (go tool pprof)")
	fs.StringVar(&o.memProfile, "memprofile", "", "write an allocation profile of this process to `file` at the end (go tool pprof -sample_index=alloc_objects)")
	if err := parseQuiet(fs, args, stderr); err != nil {
		return o, err
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if o.local {
		for _, name := range []string{"addrsrv", "namesrv", "idc", "local-ip"} {
			if explicit[name] {
				return o, usagef("--local runs its own cluster: drop --%s", name)
			}
		}
	} else {
		if explicit["flush"] {
			return o, usagef("--flush applies to --local only (a broker's flush mode is its own --flush)")
		}
		if strings.TrimSpace(o.clientFlags.addrsrv) == "" && strings.TrimSpace(o.clientFlags.namesrv) == "" {
			return o, usagef("where is the cluster? give --addrsrv URL or --namesrv 'HOST:PORT;HOST:PORT' (or set $%s / $%s), or --local",
				envAddrsrv, envNamesrv)
		}
	}
	if _, err := broker.ParseFlushMode(o.flush); err != nil {
		return o, usagef("--flush must be async or sync, got %q", o.flush)
	}
	switch {
	case o.load.Mode != "send" && o.load.Mode != "consume" && o.load.Mode != "both":
		return o, usagef("--mode must be send, consume or both, got %q", o.load.Mode)
	case o.load.Topic == "":
		return o, usagef("--topic is required")
	case o.load.Size < 1 || o.load.Size > loadgen.MaxMessageSize:
		return o, usagef("--size must be within 1..%d, got %d", loadgen.MaxMessageSize, o.load.Size)
	case o.load.Count < 0:
		return o, usagef("--count must not be negative")
	case o.load.Duration < 0:
		return o, usagef("--duration must not be negative")
	case o.load.Sends() && o.load.Producers < 1:
		return o, usagef("--producers must be at least 1 with --mode %s", o.load.Mode)
	case o.load.Inflight < 0:
		return o, usagef("--inflight must not be negative")
	case o.load.Rate < 0:
		return o, usagef("--rate must not be negative")
	case o.load.Inflight > 0 && explicit["producers"]:
		return o, usagef("--inflight and --producers exclude each other: one asynchronous sender keeps --inflight calls in flight")
	case o.load.Consumes() && o.load.Consumers < 1:
		return o, usagef("--consumers must be at least 1 with --mode %s", o.load.Mode)
	case o.load.Batch < 1 || o.load.Batch*o.load.Size > loadgen.MaxMessageSize:
		return o, usagef("--batch must be at least 1 and --batch × --size at most %d bytes", loadgen.MaxMessageSize)
	case o.load.Queues < 1:
		return o, usagef("--queues must be at least 1")
	case o.load.DrainTimeout < 0 || o.load.Idle <= 0 || o.load.SendTimeout <= 0 || o.load.Progress < 0:
		return o, usagef("--drain-timeout, --idle, --send-timeout and --progress must be positive")
	}
	switch {
	case o.load.Duration == 0 && o.load.Count == 0:
		o.load.Duration = loadgen.DefaultDuration
	case o.load.Duration == 0:
		o.load.Duration = loadgen.MaxDuration
	}
	return o, checkOutput(o.output)
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseBenchArgs(args, stderr)
	if err != nil {
		return err
	}
	cfg, cleanup, err := benchCluster(ctx, o, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("bench: --cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if o.memProfile != "" {
		// Every 4 KiB allocated instead of 512 KiB: enough samples to count
		// allocations per message in a few seconds of load.
		runtime.MemProfileRate = 4096
		defer writeAllocProfile(o.memProfile, stderr)
	}
	run := o.load
	run.Local = o.local
	if o.local {
		run.Flush = o.flush
	}
	if o.output != "text" {
		run.Progress = 0 // the JSON report alone
	}
	report, err := loadgen.Run(ctx, run, cfg, stderr)
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while setting up: nothing to report
		}
		return clientError(err)
	}
	out := &lineWriter{w: stdout}
	if o.output == "json" {
		err = out.printJSON(report)
	} else {
		err = out.write([]byte(report.Text()))
	}
	if err != nil {
		return err
	}
	if report.Errors > 0 {
		return fmt.Errorf("%s", report.ErrorSummary())
	}
	return nil
}

// benchCluster returns the client config to benchmark with: the command
// line's cluster, or a fresh in-process one with --local (stopped by
// cleanup).
func benchCluster(ctx context.Context, o benchOptions, stderr io.Writer) (client.ClientConfig, func(), error) {
	if !o.local {
		cfg, err := o.clientFlags.config(stderr)
		return cfg, func() {}, err
	}
	logger, err := newLogger(stderr, o.clientFlags.logLevel)
	if err != nil {
		return client.ClientConfig{}, nil, err
	}
	mode, _ := broker.ParseFlushMode(o.flush) // checked by parseBenchArgs
	c, err := devcluster.Start(ctx, devcluster.Options{IDCs: 1, Logger: logger, BrokerFlush: mode})
	if err != nil {
		return client.ClientConfig{}, nil, fmt.Errorf("cannot start the local cluster: %s", oneLine(err.Error()))
	}
	cfg := c.ClientConfig(1)
	cfg.IDC = devcluster.IDCName(1)
	cfg.InstanceName = o.clientFlags.instance
	cfg.Logger = logger
	return cfg, func() { c.Close() }, nil
}

// writeAllocProfile writes the allocation profile for --memprofile; a
// failure is reported but does not fail the run.
func writeAllocProfile(path string, stderr io.Writer) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: --memprofile: %v\n", err)
	}
}
