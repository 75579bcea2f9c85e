package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/zonemq/zonemq/internal/console"
)

func init() {
	register(command{
		name:    "console",
		summary: "web console: IDCs, servers' health, live traffic per IDC, groups, failover timeline (read-only unless --admin)",
		run:     runConsole,
	})
}

const consoleSynopsis = "--addrsrv URL[,URL…] [--listen 127.0.0.1:8088] [--interval 1s] [--admin] [--access-key K --secret-key S]"

const consoleAbout = `Serves a web page that shows the IDCs side by side with their address servers,
name servers and brokers and their health; where each IDC's producers send and
its consumers read right now; topics with their queues per broker; consumer
groups with each queue's owner, its IDC and lag; and a timeline of what went
down, came back and moved. It polls the cluster through the address servers
(give one per IDC) and changes nothing, unless --admin adds an admin page
(create a topic, reset a group's offsets) whose actions are signed with
--access-key/--secret-key: with ACL on, that account needs admin: true.
See docs/console.md.

Prints "console on http://ADDR/" on stdout once it serves.
`

func runConsole(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("console", consoleSynopsis, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: zonemq console %s\n\n%s\nFlags:\n", consoleSynopsis, consoleAbout)
		fs.PrintDefaults()
	}
	addrsrvs := fs.String("addrsrv", "", "address server `URLs`, comma-separated, one per IDC (required)")
	listen := fs.String("listen", "127.0.0.1:8088", "`host:port` to serve the console on")
	interval := fs.Duration("interval", 0, "how often the cluster is read (default 1s)")
	logLevel := fs.String("log-level", "warn", "log `level`: debug, info, warn or error")
	admin := fs.Bool("admin", false, "enable the admin page (/admin): create topics, reset offsets (off: read-only)")
	accessKey := fs.String("access-key", os.Getenv(envAccessKey), "ACL access `key` the console signs with (default $"+envAccessKey+")")
	secretKey := fs.String("secret-key", os.Getenv(envSecretKey), "ACL secret `key` of --access-key; prefer $"+envSecretKey+" (the command line shows in ps)")
	if err := parseQuiet(fs, args, stderr); err != nil {
		return err
	}
	var urls []string
	for _, u := range strings.Split(*addrsrvs, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	if len(urls) == 0 {
		return usagef("--addrsrv is required (the address servers' URLs, e.g. http://127.0.1.1:18080)")
	}
	if (*accessKey == "") != (*secretKey == "") {
		return usagef("--access-key and --secret-key go together (or $%s and $%s)", envAccessKey, envSecretKey)
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	s, err := console.New(console.Options{AddrsrvURLs: urls, Listen: *listen, Interval: *interval, Logger: logger,
		Admin: *admin, AccessKey: *accessKey, SecretKey: *secretKey})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "console on %s\n", s.URL())
	if *admin {
		fmt.Fprintf(stdout, "admin actions on %sadmin\n", s.URL())
	}
	if err := s.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
