package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/broker"
	"github.com/zonemq/zonemq/internal/proxy"
)

// The access point inside the broker (`zonemq broker --proxy-listen`): the
// same gRPC access point as `zonemq proxy`, run in the broker's process for
// a deployment that wants one process per IDC less. It stays a client
// application of the cluster — it reaches this broker, and the other IDCs'
// brokers when this one fails, through the SDK, as the standalone one does
// (daemons never import each other: the two meet here, in the command).

// brokerProxyFlags are the broker command's access-point flags.
type brokerProxyFlags struct {
	listen, advertise string
}

// accessPointConfig is the access point's configuration from the broker's
// own: its IDC, how it finds the cluster (--addrsrv, --namesrv), the
// credentials and client TLS it reaches name servers with, its server
// certificate (--tls-cert/--tls-key, else self-signed) and its ACL file.
func (f *brokerProxyFlags) accessPointConfig(opts *broker.Options, logger *slog.Logger) (proxy.Config, error) {
	cfg := proxy.Config{Listen: f.listen, Advertise: f.advertise, IDC: opts.IDC, Logger: logger,
		Cluster: client.ClientConfig{AddrsrvURLs: opts.AddrsrvURLs, NamesrvAddrs: opts.NamesrvAddrs,
			AccessKey: opts.AccessKey, SecretKey: opts.SecretKey, TLS: opts.NamesrvTLS}}
	if opts.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(opts.TLSCertFile, opts.TLSKeyFile)
		if err != nil {
			return cfg, fmt.Errorf("%w: --tls-cert/--tls-key for the access point: %v", broker.ErrInvalidOptions, err)
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	return cfg, nil
}

// brokerWithAccessPoint is a broker and the access point in its process.
type brokerWithAccessPoint struct {
	*broker.Server
	ap     *proxy.Server
	cancel context.CancelFunc // ends the ACL file watch
}

// startBrokerWithAccessPoint starts the access point, then makes the
// broker; if the broker cannot be made the access point is closed again.
func startBrokerWithAccessPoint(ctx context.Context, f *brokerProxyFlags, opts broker.Options, logger *slog.Logger) (*brokerWithAccessPoint, error) {
	cfg, err := f.accessPointConfig(&opts, logger)
	if err != nil {
		return nil, err
	}
	apCtx, cancel := context.WithCancel(ctx)
	if opts.ACLFile != "" {
		if cfg.ACL, err = acl.Load(opts.ACLFile, logger); err != nil {
			cancel()
			return nil, fmt.Errorf("%w: --acl-file for the access point: %v", broker.ErrInvalidOptions, err)
		}
		go cfg.ACL.WatchLoop(apCtx, 0)
	}
	ap, err := proxy.Start(apCtx, cfg)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("--proxy-listen: %w", err)
	}
	b, err := broker.New(opts)
	if err != nil {
		closeAccessPoint(ap)
		cancel()
		return nil, err
	}
	return &brokerWithAccessPoint{Server: b, ap: ap, cancel: cancel}, nil
}

// Run serves until ctx ends (or the broker stops by itself): the access
// point stops taking calls as the broker begins to stop, so its calls in
// flight still reach a broker.
func (s *brokerWithAccessPoint) Run(ctx context.Context) error {
	ctx, stop := context.WithCancel(ctx)
	defer s.cancel()
	closed := make(chan error, 1)
	go func() {
		<-ctx.Done()
		closed <- closeAccessPoint(s.ap)
	}()
	err := s.Server.Run(ctx)
	stop()
	return errors.Join(err, <-closed)
}

// closeAccessPoint gives the calls in flight a few seconds, within the
// command's 10 s shutdown.
func closeAccessPoint(ap *proxy.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	return ap.Close(ctx)
}
