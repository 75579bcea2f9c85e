// Package proxy is zonemq's access point for the RocketMQ 5 clients: a gRPC
// server of apache.rocketmq.v2.MessagingService (docs/grpc.md) in front of
// its own IDC's brokers. It is a client application of the cluster, as
// RocketMQ's proxy in cluster mode is: it learns name servers from the
// address servers and sends through the SDK, own IDC's brokers first and
// another IDC's at once when those fail, so unmodified 5.x clients get
// zonemq's IDC failover without a line of code.
//
// Plaintext and TLS share one port (the first byte tells them apart).
// This release serves producers (normal, FIFO and delay messages) and
// consumers (simple and push, by POP on the brokers), and transactions
// with the brokers' checks forwarded to the clients.
package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/rmqpb"
)

// Limits of the access point (docs/grpc.md).
const (
	// MaxBodySize is the largest message body accepted, as the brokers'
	// default maxMessageSize.
	MaxBodySize = 4 << 20
	// maxRecvMsgSize bounds one gRPC request: a body and its properties.
	maxRecvMsgSize = MaxBodySize + 1<<20
	// maxStreams bounds the concurrent calls of one connection.
	maxStreams = 1024
)

// Config configures an access point.
type Config struct {
	// Listen is the address to serve on, e.g. "127.0.1.1:18081".
	Listen string
	// Advertise is the address routes name for this access point when a
	// client's request names none; empty means Listen.
	Advertise string
	// IDC is the access point's own IDC: its brokers are used first.
	IDC string
	// Cluster is how the access point reaches the cluster: the address
	// servers (or name servers), and its credentials, TLS and cluster
	// secret for the brokers. Its IDC and Logger are set from the fields
	// above.
	Cluster client.ClientConfig
	// ACL, when set, decides every call: the RocketMQ 5 clients sign with
	// the accounts of this plain_acl.yml (docs/grpc.md). The access point
	// itself reaches the brokers with Cluster's credentials.
	ACL *acl.Checker
	// TLS is the server certificate for clients that connect with TLS; nil
	// means a self-signed one made at start (the RocketMQ 5 clients do not
	// verify it).
	TLS *tls.Config
	// Logger receives the access point's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Server is a running access point.
type Server struct {
	rmqpb.UnimplementedMessagingServiceServer

	cfg      Config
	logger   *slog.Logger
	ln       *sniffListener
	grpc     *grpc.Server
	conn     *client.Conn
	producer *client.Producer

	sessions sessions    // Telemetry streams (transaction.go)
	renewals renewals    // invisible times kept for push consumers (renew.go)
	sent     recentSends // message ids sent lately: resends are marked (resend.go)
	stopLoop context.CancelFunc
	loopDone chan struct{}

	stopOnce sync.Once
	served   chan struct{}
	closing  chan struct{} // closed when Close begins: long polls end
}

// Start validates cfg, connects to the cluster and serves on cfg.Listen
// until Close.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Listen == "" {
		return nil, errors.New("proxy: no listen address")
	}
	if cfg.IDC == "" {
		return nil, errors.New("proxy: no IDC")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	logger := cfg.Logger.With("role", "proxy", "idc", cfg.IDC)
	if cfg.Advertise == "" {
		cfg.Advertise = cfg.Listen
	}
	host, _, err := net.SplitHostPort(cfg.Advertise)
	if err != nil {
		return nil, fmt.Errorf("proxy: advertise address %q: %w", cfg.Advertise, err)
	}
	tlsCfg := cfg.TLS
	if tlsCfg == nil {
		if tlsCfg, err = selfSignedTLS(host); err != nil {
			return nil, fmt.Errorf("proxy: self-signed certificate: %w", err)
		}
	}
	tlsCfg = tlsCfg.Clone()
	tlsCfg.NextProtos = []string{"h2"}

	cc := cfg.Cluster
	cc.IDC, cc.Logger = cfg.IDC, logger
	s := &Server{cfg: cfg, logger: logger, served: make(chan struct{}), closing: make(chan struct{})}
	if s.conn, err = client.NewConn(cc); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if s.producer, err = client.NewProducer(client.ProducerConfig{ClientConfig: cc, Group: proxyGroup,
		TransactionChecker: s.checkTransaction}); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if err := s.conn.Start(ctx); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if err := s.producer.Start(ctx); err != nil {
		s.conn.Shutdown(ctx)
		return nil, fmt.Errorf("proxy: %w", err)
	}
	inner, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		s.shutdownClients()
		return nil, fmt.Errorf("proxy: %w", err)
	}
	s.ln = newSniffListener(inner, tlsCfg, logger)
	s.grpc = grpc.NewServer(
		grpc.MaxRecvMsgSize(maxRecvMsgSize),
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	)
	rmqpb.RegisterMessagingServiceServer(s.grpc, s)
	loopCtx, stopLoop := context.WithCancel(context.Background())
	s.stopLoop, s.loopDone = stopLoop, make(chan struct{})
	go func() {
		defer close(s.loopDone)
		s.renewLoop(loopCtx)
	}()
	go func() {
		defer close(s.served)
		if err := s.grpc.Serve(s.ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			logger.Error("gRPC server stopped", "err", err)
		}
	}()
	logger.Info("access point serving", "addr", s.ln.Addr().String(), "advertise", cfg.Advertise)
	return s, nil
}

// Addr is the address the access point listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops serving: calls in flight get up to ctx's deadline to finish,
// then the connections close.
func (s *Server) Close(ctx context.Context) error {
	s.stopOnce.Do(func() {
		close(s.closing)
		done := make(chan struct{})
		go func() {
			s.grpc.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			s.grpc.Stop()
			<-done
		}
		s.ln.Close()
		s.ln.wg.Wait()
		<-s.served
		s.stopLoop()
		<-s.loopDone
		s.shutdownClients()
	})
	return nil
}

func (s *Server) shutdownClients() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.producer.Shutdown(ctx)
	s.conn.Shutdown(ctx)
}
