package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"time"

	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/proxy"
)

func init() {
	register(command{
		name:    "proxy",
		summary: "gRPC access point for the RocketMQ 5 clients, one per IDC (docs/grpc.md)",
		run:     runProxy,
	})
}

const proxySynopsis = "--idc NAME --addrsrv URL[,URL…] [--listen 127.0.0.1:18081] [--advertise HOST:PORT] [--tls-cert F --tls-key F] [--acl-file F]"

const proxyAbout = `Serves RocketMQ 5's gRPC API (apache.rocketmq.v2.MessagingService) to the
official 5.x clients (Java, Go, C++, Python, Node.js, Rust, C#), plaintext and
TLS on the same port. It sends through its own IDC's brokers first and another
IDC's at once when those fail. It serves producers (normal, FIFO, delay and
transactional messages, with transaction checks on the Telemetry stream) and
consumers (simple and push, POP underneath).

Without --tls-cert it makes a self-signed certificate at start, which the 5.x
clients accept (they do not verify the server). Prints "access point on ADDR"
on stdout once it serves. See docs/grpc.md.
`

func runProxy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("proxy", proxySynopsis, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: zonemq proxy %s\n\n%s\nFlags:\n", proxySynopsis, proxyAbout)
		fs.PrintDefaults()
	}
	cf := addClientFlags(fs)
	listen := fs.String("listen", "127.0.0.1:18081", "`host:port` the RocketMQ 5 clients connect to")
	advertise := fs.String("advertise", "", "`host:port` routes name for this access point when a client names none (default --listen)")
	certFile := fs.String("tls-cert", "", "TLS certificate `file` (PEM) for clients connecting with TLS (default: self-signed)")
	keyFile := fs.String("tls-key", "", "TLS private key `file` (PEM) of --tls-cert")
	aclFile := fs.String("acl-file", "", "plain_acl.yml `file` whose accounts the RocketMQ 5 clients must sign with (default: no ACL);\n"+
		"re-read when it changes")
	if err := parseQuiet(fs, args, stderr); err != nil {
		return err
	}
	cc, err := cf.config(stderr)
	if err != nil {
		return err
	}
	if cc.IDC == "" {
		return usagef("--idc is required: the access point's own IDC, whose brokers it uses first")
	}
	if (*certFile == "") != (*keyFile == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	var serverTLS *tls.Config
	if *certFile != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return usagef("--tls-cert/--tls-key: %v", err)
		}
		serverTLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	var checker *acl.Checker
	if *aclFile != "" {
		if checker, err = acl.Load(*aclFile, cc.Logger); err != nil {
			return usagef("--acl-file: %v", err)
		}
		go checker.WatchLoop(ctx, 0)
	}
	s, err := proxy.Start(ctx, proxy.Config{Listen: *listen, Advertise: *advertise, IDC: cc.IDC, Cluster: cc,
		TLS: serverTLS, ACL: checker, Logger: cc.Logger})
	if err != nil {
		return withSwapHint(cc, err)
	}
	fmt.Fprintf(stdout, "access point on %s\n", s.Addr())
	<-ctx.Done()
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.Close(closeCtx)
}
