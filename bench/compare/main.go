// Command compare measures zonemq against NATS JetStream side by side on
// this machine: both servers as separate processes on loopback, each case
// run for both systems in turn (interleaved), several rounds, medians and
// ranges, with the CPU time of servers and clients from the kernel's
// accounting. It prints the table of issue 11. See bench/README.md.
//
//	compare run --zonemq BIN --nats-server BIN [--zonemq-before BIN] [--rmq=false] [--rounds 3] [--duration 5s] [--size 1024] [--inflight 64] [--senders 64] [--replicated=false]
//	compare nats-client ...   (the JetStream client process; run by "run")
//	compare run --soak --zonemq BIN [--soak-rate 10000] [--soak-duration 10m] [--inflight 64]
//	compare rmq-client ...    (zonemq's rocketmq-client-go client process; run by "run --rmq")
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: compare run|nats-client|rmq-client [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runCompare(os.Args[2:])
	case "nats-client":
		err = runNatsClient(os.Args[2:], os.Stdout)
	case "rmq-client":
		err = runRmqClient(os.Args[2:], os.Stdout)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// config is the run's command line.
type config struct {
	zonemq, zonemqBefore string
	natsServer, self     string
	rmq                  bool
	rounds               int
	duration             time.Duration
	size, inflight       int
	senders              int
	replicated           bool
	work                 string
}

func runCompare(args []string) error {
	var c config
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.StringVar(&c.zonemq, "zonemq", "", "the zonemq binary")
	fs.StringVar(&c.zonemqBefore, "zonemq-before", "", "optional: an older zonemq binary (with `bench --inflight`), run as a third system")
	fs.StringVar(&c.natsServer, "nats-server", "", "the nats-server binary")
	fs.BoolVar(&c.rmq, "rmq", true, "also run zonemq with the stock rocketmq-client-go as its client (a system of its own)")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds; each runs every case for both systems")
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "publishing time per case")
	fs.IntVar(&c.size, "size", 1024, "message body bytes")
	fs.IntVar(&c.inflight, "inflight", 64, "asynchronous publishes in flight")
	fs.IntVar(&c.senders, "senders", 64, "goroutines publishing synchronously at once, sharing one client (a case of its own; 1: none)")
	fs.BoolVar(&c.replicated, "replicated", true, "also publish to three copies acknowledged once all hold them: zonemq --replication sync\n"+
		"with two replicas (idc2, idc3), JetStream a three-node cluster with an R3 stream")
	fs.StringVar(&c.work, "work", "", "directory for data and logs (default: a new temporary one)")
	var soak soakConfig
	doSoak := fs.Bool("soak", false, "instead of the comparison: one zonemq broker at --soak-rate for --soak-duration (zonemq bench --rate), its RSS sampled")
	fs.IntVar(&soak.rate, "soak-rate", 10000, "--soak: messages per second")
	fs.DurationVar(&soak.duration, "soak-duration", 10*time.Minute, "--soak: how long")
	fs.DurationVar(&soak.every, "soak-sample", 30*time.Second, "--soak: how often to sample the broker's RSS")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.zonemq == "" || (c.natsServer == "" && !*doSoak) {
		return fmt.Errorf("--zonemq and --nats-server are required")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	c.self = self
	keepWork := c.work != ""
	if c.work == "" {
		if c.work, err = os.MkdirTemp("", "zonemq-compare-"); err != nil {
			return err
		}
	}
	if *doSoak {
		err := runSoak(c, soak, os.Stdout)
		if err == nil && !keepWork {
			os.RemoveAll(c.work)
		}
		return err
	}
	res := newResults()
	for round := 1; round <= c.rounds; round++ {
		systems := []system{natsSystem{}}
		if c.zonemqBefore != "" {
			systems = append(systems, zonemqSystem{label: "zonemq-before", bin: c.zonemqBefore})
		}
		systems = append(systems, zonemqSystem{label: "zonemq", bin: c.zonemq})
		if c.rmq {
			systems = append(systems, zonemqSystem{label: "zonemq-rmq", bin: c.zonemq, rmq: true})
		}
		for _, sys := range systems {
			dir := filepath.Join(c.work, fmt.Sprintf("r%d-%s", round, sys.name()))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "round %d/%d: %s\n", round, c.rounds, sys.name())
			if err := runRound(c, sys, dir, res); err != nil {
				return fmt.Errorf("round %d, %s: %w (logs and data kept in %s)", round, sys.name(), err, c.work)
			}
		}
	}
	res.print(os.Stdout, c)
	if !keepWork {
		os.RemoveAll(c.work)
	}
	return nil
}

// runRound runs every case for one system: async publish, one in flight,
// --senders synchronous senders and consume on one server (flush as the
// system's default), async publish again on a server that syncs to disk
// before each ack, and (--replicated) async publish to three copies.
func runRound(c config, sys system, dir string, res *results) error {
	srv, client, err := sys.start(c, filepath.Join(dir, "async"), setupPlain)
	if err != nil {
		return err
	}
	cpu0 := srv.cpu()
	r, clientCPU, err := client.publish(c, publishLoad{inflight: c.inflight}, filepath.Join(dir, "pub-async.log"))
	serverCPU := srv.cpu() - cpu0
	if err == nil {
		res.add(sys.name(), "async", r.MsgsPerSec)
		res.add(sys.name(), "p99", r.P99Ms)
		if r.Messages > 0 {
			res.add(sys.name(), "serverCPU", float64(serverCPU.Microseconds())/float64(r.Messages))
			res.add(sys.name(), "clientCPU", float64(clientCPU.Microseconds())/float64(r.Messages))
		}
		r, _, err = client.publish(c, publishLoad{inflight: 1, senders: 1}, filepath.Join(dir, "pub-sync.log"))
	}
	if err == nil {
		res.add(sys.name(), "one", r.MsgsPerSec)
		if c.senders > 1 {
			r, _, err = client.publish(c, publishLoad{inflight: 1, senders: c.senders}, filepath.Join(dir, "pub-senders.log"))
			if err == nil {
				res.add(sys.name(), "senders", r.MsgsPerSec)
			}
		}
	}
	if err == nil {
		r, err = client.consume(c, filepath.Join(dir, "consume.log"))
	}
	if err == nil {
		res.add(sys.name(), "consume", r.MsgsPerSec)
	}
	sys.stop(srv)
	if err != nil {
		return err
	}

	if r, err = publishOnFresh(c, sys, filepath.Join(dir, "sync"), setupFsync); err != nil {
		return err
	}
	res.add(sys.name(), "fsync", r.MsgsPerSec)
	if !c.replicated {
		return nil
	}
	if r, err = publishOnFresh(c, sys, filepath.Join(dir, "replicated"), setupReplicated); err != nil {
		return err
	}
	res.add(sys.name(), "replicated", r.MsgsPerSec)
	res.add(sys.name(), "replicatedP99", r.P99Ms)
	return nil
}

// publishOnFresh starts sys as st says, publishes asynchronously with
// --inflight in flight, and stops it.
func publishOnFresh(c config, sys system, dir string, st setup) (clientResult, error) {
	srv, client, err := sys.start(c, dir, st)
	if err != nil {
		return clientResult{}, err
	}
	defer sys.stop(srv)
	r, _, err := client.publish(c, publishLoad{inflight: c.inflight}, filepath.Join(dir, "pub.log"))
	return r, err
}
