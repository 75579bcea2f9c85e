package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/zonemq/zonemq/internal/drill"
)

func init() {
	register(command{
		name:    "drill",
		summary: "start a real multi-IDC cluster as processes, fail IDC 1 every way, and measure RTO and loss",
		run:     runDrill,
	})
}

func runDrill(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("drill", "[--idcs 2] [--duration 10s] [--output text|json]", stderr)
	idcs := fs.Int("idcs", 2, "how many IDCs to run (2..9); IDC n listens on 127.0.n.1")
	duration := fs.Duration("duration", 10*time.Second, "how long each failure is held, and how long the cluster runs after each repair")
	output := fs.String("output", "text", "report format: text (a table) or json (one document)")
	interval := fs.Duration("send-interval", 10*time.Millisecond, "pause between two sends of each IDC's producer")
	drain := fs.Duration("drain-timeout", 60*time.Second, "how long to wait at the end for every acknowledged message to be consumed")
	workDir := fs.String("work-dir", "", "folder for the cluster's data and logs (default: a temporary folder, removed when the drill passes)")
	portOffset := fs.Int("port-offset", 0, "added to every drill port (addrsrv 28080, namesrv 29876, broker 20911)")
	binary := fs.String("binary", "", "zonemq binary to start the servers from (default: this executable)")
	clientLog := fs.String("client-log", "", "write the drill's SDK producers' debug log to this file (default: discard;\n"+
		"each IDC's consumer process logs to idcN-consumer.log in the work folder)")
	only := fs.String("only", "", "play only these `scenarios`, comma-separated (S2, S3, S4, idc-lost, master-kill,\n"+
		"master-partition, controller-idc-lost, two-idcs-lost), after S1")
	withController := fs.Bool("controller", false, "run a failover-controller voter in every IDC's name server, brokers reporting to\n"+
		"it, and add the controller scenarios (needs --idcs 3+ and --replicas 2+; implied by --idcs 3\n"+
		"--replicas 3 and by naming a controller scenario in --only)")
	minInSync := fs.Int("min-insync-replicas", 0, "the brokers' --min-insync-replicas in controller mode (0: 2 with --replicas 3+)")
	replicas := fs.Int("replicas", 1, "`copies` of each IDC's broker group (master counted); 2 or more replicates every\n"+
		"group synchronously into the next IDCs and adds the idc-lost scenario")
	netnsFlags := addNetnsFlags(fs)
	chaos := fs.Bool("chaos", false, "a chaos campaign instead of the scenarios: seeded random faults (--faults) for\n"+
		"--duration (default 3m here), overlapping and recurring, then a heal, a drain and the history check;\n"+
		"3 IDCs with 3 copies of every group and the controller unless --idcs/--replicas say otherwise;\n"+
		"the plan is written to the work dir's chaos-plan.json (docs/disaster-recovery.md)")
	seed := fs.Uint64("seed", 1, "with --chaos: the seed that picks the faults")
	faults := fs.String("faults", "", "with --chaos: the fault `kinds`, comma-separated: kill, stop, pause, corrupt (replicas only),\n"+
		"clock (a broker's wall clock stepped by up to ±15 min);\n"+
		"with FUSE (root, /dev/fuse) also power, disk-full; with --netns also isolate, one-way, bridge, flaky\n(default all that apply)")
	replay := fs.String("replay", "", "with --chaos: play this chaos-plan.json `file` instead of a seeded plan")
	v5Peer := fs.String("v5-peer", "", "run a gRPC access point in every IDC and the RocketMQ 5 Go client\n"+
		"(github.com/apache/rocketmq-clients/golang/v5) as one more workload: the `binary` built from test/v5peer\n"+
		"(go build -o /tmp/v5peer ./test/v5peer)")
	pullConsumer := fs.Bool("pull-consumer", true, "with --chaos: run the SDK pull consumer's workload too (--pull-consumer=false leaves it out)")
	stockPeer := fs.String("stock-peer", "", "run the stock remoting Go client (rocketmq-client-go) as one more workload: the `binary`\n"+
		"built from test/rmqpeer (go build -o /tmp/rmqpeer ./test/rmqpeer)")
	timeline := fs.String("timeline", "", "with --chaos: write the campaign's SVG picture (faults, sends and errors per IDC) to this `file`\n"+
		"(default: timeline.svg in the work dir)")
	if err := parseFlags(fs, args, nil); err != nil {
		return err
	}
	var chaosOpts *drill.ChaosOptions
	if *chaos || *replay != "" {
		d := *duration
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["duration"] {
			d = 3 * time.Minute
		}
		// The campaign's own topology: what the product is run as.
		if !set["idcs"] {
			*idcs = 3
		}
		if !set["replicas"] {
			*replicas = min(3, *idcs)
		}
		chaosOpts = &drill.ChaosOptions{Duration: d, Seed: *seed, Faults: splitList(*faults), Replay: *replay, Timeline: *timeline}
		*duration = 10 * time.Second // the healthy window after the heal
	}
	if *output != "text" && *output != "json" {
		return usagef("--output must be text or json, got %q", *output)
	}
	if *binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding this executable: %w", err)
		}
		*binary = exe
	}
	var logger *slog.Logger
	if *clientLog != "" {
		f, err := os.Create(*clientLog)
		if err != nil {
			return err
		}
		defer f.Close()
		logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	report, err := drill.Run(ctx, drill.Options{
		Logger:         logger,
		Binary:         *binary,
		IDCs:           *idcs,
		PhaseLength:    *duration,
		SendInterval:   *interval,
		DrainTimeout:   *drain,
		WorkDir:        *workDir,
		PortOffset:     *portOffset,
		Replicas:       *replicas,
		Controller:     *withController || (*idcs >= 3 && *replicas >= 3),
		MinInSync:      *minInSync,
		Only:           splitList(*only),
		Netns:          netnsFlags.netns,
		IDCRTT:         netnsFlags.rtt,
		IDCLossPercent: netnsFlags.loss,
		Progress:       stderr,
		Terminal:       isTerminal(stderr),
		Chaos:          chaosOpts,
		StockPeer:      *stockPeer,
		V5Peer:         *v5Peer,
		PullConsumer:   *pullConsumer,
	})
	if err != nil {
		return err
	}
	if *output == "json" {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if !report.OK {
		return &exitError{code: 1, err: fmt.Errorf("the drill failed: %v", report.Problems)}
	}
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
