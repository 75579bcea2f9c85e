package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/member"
)

// Environment variables that supply the defaults of the client flags, so a
// shell can be pointed at one cluster once (docs/architecture.md §6).
const (
	envAddrsrv = "ZONEMQ_ADDRSRV"
	envNamesrv = "ZONEMQ_NAMESRV"
	envIDC     = "ZONEMQ_IDC"
	// The ACL credentials; the environment keeps the secret out of ps.
	envAccessKey = "ZONEMQ_ACCESS_KEY"
	envSecretKey = "ZONEMQ_SECRET_KEY"
)

// clientFlags are the flags every client command (send, consume, admin)
// shares: where the cluster is, which IDC the client lives in, and how
// chatty the SDK may be on stderr.
type clientFlags struct {
	addrsrv  string
	namesrv  string
	idc      string
	localIP  string
	instance string
	logLevel string

	accessKey       string
	secretKey       string
	allowUnknownIDC bool
	command         string // the subcommand, for log lines on a terminal

	clientHeartbeat time.Duration
	tls             *clientTLSFlags
	secretFile      string // --cluster-secret-file, for an operator's admin commands
}

// addClientFlags registers the shared client flags on fs, their defaults
// taken from the environment.
func addClientFlags(fs *flag.FlagSet) *clientFlags {
	f := &clientFlags{command: fs.Name()}
	fs.StringVar(&f.addrsrv, "addrsrv", os.Getenv(envAddrsrv),
		"address server base `URL`s, comma-separated, own IDC's first, e.g. http://127.0.1.1:18080\n"+
			"(default $"+envAddrsrv+")")
	fs.StringVar(&f.namesrv, "namesrv", os.Getenv(envNamesrv),
		"name servers as 'HOST:PORT;HOST:PORT', used instead of (or until) an address server\n"+
			"(default $"+envNamesrv+")")
	fs.StringVar(&f.idc, "idc", os.Getenv(envIDC),
		"the client's own IDC: its name servers and brokers are preferred (default $"+envIDC+")")
	fs.BoolVar(&f.allowUnknownIDC, "allow-unknown-idc", false,
		"accept an --idc the address servers do not list (a client-only IDC); without it such an --idc is refused")
	fs.StringVar(&f.localIP, "local-ip", "",
		"local `IP` to bind outgoing connections to (default: none, the system picks)")
	fs.StringVar(&f.instance, "instance", "",
		"instance `name` in the client id ip@NAME@idc (default: pid#n)")
	fs.DurationVar(&f.clientHeartbeat, "client-heartbeat-interval", client.DefaultClientHeartbeatInterval,
		"how often the client tells every name server of every IDC it is alive (keeps those connections warm\n"+
			"for name-server failover; name servers drop a client after 3 s of silence)")
	fs.StringVar(&f.accessKey, "access-key", os.Getenv(envAccessKey),
		"ACL access `key` to sign every request with (default $"+envAccessKey+")")
	fs.StringVar(&f.secretKey, "secret-key", os.Getenv(envSecretKey),
		"ACL secret `key` of --access-key; prefer $"+envSecretKey+" (the command line shows in ps)")
	f.tls = addClientTLSFlags(fs, "tls", "name servers and brokers")
	fs.StringVar(&f.secretFile, "cluster-secret-file", os.Getenv(member.EnvSecretFile),
		"the cluster secret's `file`: admin commands that switch or promote masters, or write name-server routes\n"+
			"and KV config, are cluster-member requests (default $"+member.EnvSecretFile+")")
	fs.StringVar(&f.logLevel, "log-level", "warn",
		"SDK log `level` on stderr: debug, info, warn or error")
	fs.String("config", "",
		"`file` of key=value lines, keys being these flag names without '--' ('#' comments);\n"+
			"flags given on the command line win")
	return f
}

// config checks the shared flags and turns them into the SDK's
// ClientConfig, its logger writing to stderr. Every error is a usage error.
func (f *clientFlags) config(stderr io.Writer) (client.ClientConfig, error) {
	var cfg client.ClientConfig
	addrsrv := strings.TrimSpace(f.addrsrv)
	namesrv := strings.TrimSpace(f.namesrv)
	if addrsrv == "" && namesrv == "" {
		return cfg, usagef("where is the cluster? give --addrsrv URL or --namesrv 'HOST:PORT;HOST:PORT' (or set $%s / $%s)",
			envAddrsrv, envNamesrv)
	}
	if addrsrv != "" {
		cfg.AddrsrvURLs = []string{addrsrv}
	}
	if namesrv != "" {
		cfg.NamesrvAddrs = []string{namesrv}
	}
	if f.localIP != "" && net.ParseIP(f.localIP) == nil {
		return cfg, usagef("--local-ip %q is not an IP address", f.localIP)
	}
	cfg.IDC = strings.TrimSpace(f.idc)
	cfg.AllowUnknownIDC = f.allowUnknownIDC
	cfg.LocalIP = f.localIP
	cfg.InstanceName = f.instance
	if f.clientHeartbeat <= 0 {
		return cfg, usagef("--client-heartbeat-interval must be positive, got %v", f.clientHeartbeat)
	}
	cfg.ClientHeartbeatInterval = f.clientHeartbeat
	if (f.accessKey == "") != (f.secretKey == "") {
		return cfg, usagef("--access-key and --secret-key go together (or $%s and $%s)", envAccessKey, envSecretKey)
	}
	cfg.AccessKey, cfg.SecretKey = f.accessKey, f.secretKey
	cfg.ClusterSecretFile = f.secretFile
	tlsConfig, err := f.tls.config()
	if err != nil {
		return cfg, err
	}
	cfg.TLS = tlsConfig
	logger, err := newLogger(stderr, f.logLevel)
	if err != nil {
		return cfg, err
	}
	if isTerminal(stderr) {
		// A person is reading: short lines (see cliHandler). Otherwise
		// (a file, a pipe, the journal) the full records with times.
		var level slog.Level
		level.UnmarshalText([]byte(f.logLevel)) // newLogger checked it
		logger = newCLILogger(stderr, "zonemq "+f.command, level)
	}
	cfg.Logger = logger
	return cfg, nil
}

// startError words a client's failed Start: an unknown --idc is a usage
// error (exit status 2) naming the flag; anything else is a runtime error.
func startError(what string, err error) error {
	if errors.Is(err, client.ErrUnknownIDC) {
		msg := strings.TrimPrefix(oneLine(err.Error()), "zonemq client: ")
		return usagef("--idc: %s", strings.ReplaceAll(msg, "AllowUnknownIDC", "--allow-unknown-idc"))
	}
	return fmt.Errorf("cannot start %s: %s", what, oneLine(err.Error()))
}

// clientError turns an SDK constructor's error into a usage error when it
// is about the configuration (exit status 2), and leaves other errors be.
func clientError(err error) error {
	var ce *client.ConfigError
	if errors.As(err, &ce) {
		return usagef("%s", configFlagMessage(ce))
	}
	return err
}

// configFlagMessage names the command-line flag behind a ConfigError field,
// so the user reads "--idc: …" rather than an SDK field name.
func configFlagMessage(ce *client.ConfigError) string {
	flagOf := map[string]string{
		"AddrsrvURLs":          "--addrsrv",
		"NamesrvAddrs":         "--namesrv",
		"ClusterSecretFile":    "--cluster-secret-file",
		"IDC":                  "--idc",
		"LocalIP":              "--local-ip",
		"InstanceName":         "--instance",
		"Group":                "--group",
		"Subscribe topic":      "--topic",
		"Subscribe expression": "--tag",
	}
	if name, ok := flagOf[ce.Field]; ok {
		return fmt.Sprintf("%s: %s", name, ce.Reason)
	}
	return ce.Error()
}

// checkOutput validates an --output value.
func checkOutput(output string) error {
	if output != "text" && output != "json" {
		return usagef("--output must be text or json, got %q", output)
	}
	return nil
}

// oneLine flattens an error message for a one-line report.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// lineWriter writes whole lines, each with a single Write, so lines from
// concurrent callers never interleave and a reader (a pipe, a script)
// sees every line the moment it is printed: os.Stdout is unbuffered.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error // the first write error; later lines are dropped
}

// printJSON writes v as one line of JSON. HTML characters are left as
// they are: the lines are read by people and scripts, not browsers.
func (lw *lineWriter) printJSON(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return lw.write(buf.Bytes())
}

// printf writes one formatted line; a newline is added.
func (lw *lineWriter) printf(format string, a ...any) error {
	return lw.write([]byte(fmt.Sprintf(format, a...) + "\n"))
}

func (lw *lineWriter) write(line []byte) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return lw.err
	}
	if _, err := lw.w.Write(line); err != nil {
		lw.err = fmt.Errorf("writing output: %w", err)
	}
	return lw.err
}

// parseQuiet is parseFlags for the client tools: a bad flag is reported in
// one line (the caller prints it) instead of the flag package's message
// followed by the whole flag list; --help still prints the list.
func parseQuiet(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	return parseFlags(fs, args, nil)
}

// quietly runs parse with fs silenced, then prints the usage only if help
// was asked for, and adds a pointer to --help to a usage error.
func quietly(fs *flag.FlagSet, stderr io.Writer, parse func() error) error {
	usage := fs.Usage
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := parse()
	fs.SetOutput(stderr)
	fs.Usage = usage
	var ue *usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
	case errors.As(err, &ue):
		return usagef("%s (%s --help lists the flags)", ue.msg, fs.Name())
	}
	return err
}

// pause waits d, or until ctx ends; it reports whether to go on.
func pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// withSwapHint adds a hint to err when the likely cause is an address
// server given to --namesrv: an HTTP server never answers a remoting frame,
// so the client only sees time-outs or closed connections. It asks each --namesrv address for
// /healthz (two seconds at most) only after such a failure, so a real
// name server never gets an HTTP request.
func withSwapHint(cfg client.ClientConfig, err error) error {
	if err == nil || len(cfg.AddrsrvURLs) > 0 {
		return err
	}
	if msg := err.Error(); !strings.Contains(msg, "timed out") && !strings.Contains(msg, "connection closed") {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	for _, addr := range cfg.NamesrvAddrs {
		resp, herr := hc.Get("http://" + addr + "/healthz")
		if herr != nil {
			continue
		}
		resp.Body.Close()
		return fmt.Errorf("%w (%s answers HTTP: it looks like an address server; give it as --addrsrv http://%s, "+
			"--namesrv wants name servers' host:port)", err, addr, addr)
	}
	return err
}
