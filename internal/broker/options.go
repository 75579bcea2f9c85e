package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/zonemq/zonemq/internal/member"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// ErrInvalidOptions wraps every error New returns for bad options; the
// message names the option and its flag.
var ErrInvalidOptions = errors.New("invalid options")

// Options configures a broker. NewOptions returns the defaults; New validates
// and names the offending option in its error.
type Options struct {
	// Listen is the TCP address clients and name servers reach the broker
	// on, e.g. "127.0.1.1:10911". Port 0 picks a free port; Addr reports it.
	// An unspecified host (0.0.0.0) binds every interface and advertises the
	// first non-loopback IPv4 address.
	Listen string
	// IDC is the data centre the broker lives in; it is registered with the
	// name servers as the broker's zoneName.
	IDC string
	// BrokerName names the broker (a master and its slaves share it).
	BrokerName string
	// BrokerID is 0 for the group's master and 1..n for its replicas
	// (brokerId). A switchover may change the role later; the data
	// directory remembers it (docs/replication.md).
	BrokerID int64
	// Cluster is the cluster the broker registers in (default DefaultCluster).
	Cluster string
	// DataDir holds the commit log, consume queues, offsets and metadata. It
	// is created if missing.
	DataDir string

	// NamesrvAddrs are name servers to register with ("ip:port").
	NamesrvAddrs []string
	// AddrsrvURLs are address-server base URLs; every name server they list
	// (alive or not) is registered with too, re-read every AddrsrvRefresh.
	AddrsrvURLs []string
	// AddrsrvRefresh is how often the address servers are asked again (5 s).
	AddrsrvRefresh time.Duration
	// HeartbeatInterval is the period of the light BROKER_HEARTBEAT to each
	// name server (1 s).
	HeartbeatInterval time.Duration
	// RegisterInterval is the period of the full REGISTER_BROKER with every
	// topic (30 s); topic changes register at once as well.
	RegisterInterval time.Duration
	// NamesrvTimeout bounds one request to a name server (1 s), so a hung
	// name server costs its own loop a second and nobody else anything.
	NamesrvTimeout time.Duration

	// Flush is the store's fsync policy.
	Flush store.FlushMode
	// AutoCreateTopic creates a topic on its first send (default true).
	AutoCreateTopic bool
	// DefaultTopicQueueNums caps the queue count of an auto-created topic (4).
	DefaultTopicQueueNums int
	// MaxMessageSize is the largest message body accepted (4 MiB).
	MaxMessageSize int
	// MaxTopics caps the topics the broker holds (system topics
	// included); creating one more, by an admin or by auto-creation, is
	// refused with an error naming the limit. 0 means DefaultMaxTopics,
	// the name servers' default per-broker registration limit.
	MaxTopics int
	// FileReservedTime is how long commit-log segments are kept (72 h).
	FileReservedTime time.Duration
	// DiskMaxUsedRatio is the disk usage above which sends are refused and
	// old segments are removed early (0.90).
	DiskMaxUsedRatio float64
	// SegmentSize is the commit-log segment size (1 GiB).
	SegmentSize int64

	// LongPollingMax caps how long a pull may wait for a message (15 s),
	// below the 30 s RPC timeout of the RocketMQ clients.
	LongPollingMax time.Duration
	// ChannelExpiry drops a client that sent no heartbeat for this long and
	// closes its connection (120 s, RocketMQ's channelExpiredTimeout). A
	// client that announces its heartbeat period (heartbeatIntervalMillis,
	// the zonemq SDK) is dropped sooner: see heartbeatExpiry.
	ChannelExpiry time.Duration

	// MessageDelayLevel is the delay of each DELAY level, level 1 first:
	// RocketMQ's messageDelayLevel (DefaultMessageDelayLevel, "1s 5s 10s
	// 30s 1m … 2h"). ParseMessageDelayLevel describes the syntax. It also
	// paces the retries of CONSUMER_SEND_MSG_BACK (level 3 + reconsumeTimes).
	MessageDelayLevel string
	// LockLease is how long a LOCK_BATCH_MQ queue lock lasts without
	// renewal (60 s, RocketMQ's rocketmq.broker.rebalance.lockMaxLiveTime).
	LockLease time.Duration
	// TransactionCheckInterval is the period of the check of unresolved
	// transaction half messages (30 s, transactionCheckInterval).
	TransactionCheckInterval time.Duration
	// TransactionTimeout is the age at which an unresolved half message is
	// first checked (6 s, transactionTimeOut).
	TransactionTimeout time.Duration
	// TransactionCheckMax is how many checks a half message gets before it
	// is discarded (15, transactionCheckMax).
	TransactionCheckMax int

	// Replication is how a master acknowledges sends when its group has
	// replicas: ReplicationAsync (after its own write; replicas follow) or
	// ReplicationSync (after every in-sync replica holds the message too,
	// each per its own flush mode, and at least MinInsyncReplicas copies
	// exist). Default async. --replication.
	Replication string
	// MinInsyncReplicas is, in sync mode, the fewest copies (the master
	// counted) that must hold a message for it to be acknowledged; with
	// fewer in sync, sends are refused with SLAVE_NOT_AVAILABLE before
	// anything is stored. Default 1: every in-sync replica must confirm,
	// and a master whose replicas all left keeps accepting writes alone;
	// 2 refuses writes instead. --min-insync-replicas.
	MinInsyncReplicas int
	// ReplicaAckTimeout bounds a sync send's wait for its replicas (3 s);
	// past it the send is answered FLUSH_SLAVE_TIMEOUT (not acknowledged).
	ReplicaAckTimeout time.Duration
	// ReplicaLagMax is how long a replica may stay behind the master's end
	// before it leaves the in-sync set (3 s). A replica whose connection
	// closes leaves at once.
	ReplicaLagMax time.Duration
	// MasterAddr is, on a replica, the master's address. Empty: learn it
	// from the name servers (the group's id-0 address). --master-addr.
	MasterAddr string
	// ControllerAddrs are the failover controller's voters
	// (docs/controller.md). Set, the controller decides who is the group's
	// master, and a master acknowledges only while it holds the lease the
	// controller grants. --controller.
	ControllerAddrs []string
	// ControllerHeartbeatInterval is the period of the reports to the
	// controller (250 ms, a sixth of its default lease: a new master
	// learns of its election, and its replicas of it, within 250 ms).
	ControllerHeartbeatInterval time.Duration
	// controllerDial, if set, dials the controller (tests cut the link).
	controllerDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// commitLogSync, if set, replaces the commit log's fdatasync (tests hold
	// and count fsyncs; store.Options.CommitLogSync).
	commitLogSync func(*os.File) error

	// TimerMaxDelay is how far ahead a timer message (TIMER_DELIVER_MS,
	// TIMER_DELAY_SEC, TIMER_DELAY_MS) may be due; further is refused with
	// MESSAGE_ILLEGAL (DefaultTimerMaxDelay, 72 h: RocketMQ's
	// timerMaxDelaySec).
	TimerMaxDelay time.Duration

	// TraceTopicEnable creates RMQ_SYS_TRACE_TOPIC at start and accepts the
	// RocketMQ clients' message-trace records in it (default true;
	// RocketMQ's traceTopicEnable, which defaults to false there).
	TraceTopicEnable bool

	// EnablePropertyFilter lets consumers subscribe with SQL92 property
	// filters, evaluated on pull (default true; RocketMQ's
	// enablePropertyFilter, which defaults to false there). Off, a SQL92
	// pull or CHECK_CLIENT_CONFIG is refused with SYSTEM_ERROR, as there.
	EnablePropertyFilter bool

	// ClusterSecret authenticates cluster members to each other
	// (internal/member, docs/security.md): with it, every member request
	// must carry a valid member MAC. nil turns member authentication off,
	// which only loopback listeners or an explicit --insecure allow.
	ClusterSecret *member.Secret
	// ACLFile is a plain_acl.yml (RocketMQ ACL 1.0, docs/security.md); every
	// request is then checked against it, and it is re-read when it changes.
	// Empty (the default) turns the ACL off.
	ACLFile string
	// AccessKey and SecretKey sign the broker's own requests to name
	// servers (registration, heartbeats); both or neither.
	AccessKey string
	SecretKey string

	// TLSMode serves TLS on Listen: disabled (the default), permissive (TLS
	// and plain on the same port, for a migration) or enforcing.
	// TLSCertFile and TLSKeyFile (PEM) are then required; they are re-read
	// when they change.
	TLSMode     remoting.TLSMode
	TLSCertFile string
	TLSKeyFile  string
	// NamesrvTLS, when set, dials the name servers, https:// address
	// servers and the other brokers of the group (replication) with TLS
	// (nil: plain). One client config for the cluster's servers.
	NamesrvTLS *tls.Config

	// MetricsListen, when set, is the "host:port" serving Prometheus metrics
	// at /metrics (--metrics-listen; port 0 picks one, MetricsAddr reports
	// it). docs/metrics.md lists the metrics.
	MetricsListen string

	// Hardening holds resource limits and data-check switches.
	Hardening HardeningOptions

	// Logger receives the broker's log; nil discards it.
	Logger *slog.Logger
}

// NewOptions returns the default options. Listen, IDC, BrokerName and
// DataDir have no useful default and must be set.
func NewOptions() Options {
	return Options{
		Cluster:               protocol.DefaultCluster,
		AddrsrvRefresh:        5 * time.Second,
		HeartbeatInterval:     time.Second,
		RegisterInterval:      30 * time.Second,
		NamesrvTimeout:        time.Second,
		Flush:                 store.FlushAsync,
		AutoCreateTopic:       true,
		DefaultTopicQueueNums: 4,
		MaxMessageSize:        protocol.DefaultMaxMessageSize,
		FileReservedTime:      72 * time.Hour,
		DiskMaxUsedRatio:      0.90,
		SegmentSize:           1 << 30,
		LongPollingMax:        15 * time.Second,
		ChannelExpiry:         120 * time.Second,

		MessageDelayLevel:        DefaultMessageDelayLevel,
		LockLease:                60 * time.Second,
		TransactionCheckInterval: 30 * time.Second,
		TransactionTimeout:       6 * time.Second,
		TransactionCheckMax:      15,

		Replication:          ReplicationAsync,
		MinInsyncReplicas:    1,
		ReplicaAckTimeout:    3 * time.Second,
		ReplicaLagMax:        3 * time.Second,
		EnablePropertyFilter: true,
		TimerMaxDelay:        DefaultTimerMaxDelay,
		TraceTopicEnable:     true,

		ControllerHeartbeatInterval: 250 * time.Millisecond,

		Hardening: NewHardeningOptions(),
	}
}

// validate checks o and replaces zero values (durations, MessageDelayLevel,
// TransactionCheckMax…) with the defaults.
func (o *Options) validate() error {
	def := NewOptions()
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if o.TLSMode != remoting.TLSDisabled && (o.TLSCertFile == "" || o.TLSKeyFile == "") {
		bad("TLSMode (--tls-mode) %s needs TLSCertFile (--tls-cert) and TLSKeyFile (--tls-key)", o.TLSMode)
	}
	if (o.AccessKey == "") != (o.SecretKey == "") {
		bad("AccessKey (--access-key) and SecretKey (--secret-key) go together")
	}
	if o.Listen == "" {
		bad("Listen (--listen) is required")
	}
	if o.IDC == "" {
		bad("IDC (--idc) is required")
	}
	if o.BrokerName == "" {
		bad("BrokerName (--name) is required")
	} else if err := protocol.ValidateGroup(o.BrokerName); err != nil {
		// A broker name becomes a topic name and appears in message queues,
		// so it keeps to the same character set.
		bad("BrokerName (--name): %v", err)
	}
	if o.BrokerID < 0 {
		bad("BrokerID (--id) is %d; it must be ≥ 0", o.BrokerID)
	}
	if o.Cluster == "" {
		o.Cluster = def.Cluster
	}
	if o.DataDir == "" {
		bad("DataDir (--data) is required")
	}
	for _, u := range o.AddrsrvURLs {
		if pu, err := url.Parse(u); err != nil || pu.Scheme == "" || pu.Host == "" {
			bad("AddrsrvURLs (--addrsrv): %q is not an http URL", u)
		}
	}
	if o.DefaultTopicQueueNums <= 0 {
		bad("DefaultTopicQueueNums is %d; it must be ≥ 1", o.DefaultTopicQueueNums)
	}
	if o.MaxMessageSize <= 0 {
		bad("MaxMessageSize (--max-message-size) is %d; it must be > 0", o.MaxMessageSize)
	}
	if o.DiskMaxUsedRatio < 0 || o.DiskMaxUsedRatio > 1 {
		bad("DiskMaxUsedRatio (--disk-max-used-ratio) is %v; it must be within 0..1", o.DiskMaxUsedRatio)
	}
	if o.SegmentSize < 0 {
		bad("SegmentSize (--segment-size) is %d; it must be > 0", o.SegmentSize)
	}
	if o.MessageDelayLevel == "" {
		o.MessageDelayLevel = def.MessageDelayLevel
	} else if _, err := ParseMessageDelayLevel(o.MessageDelayLevel); err != nil {
		bad("MessageDelayLevel (--message-delay-level): %v", err)
	}
	if o.TransactionCheckMax < 0 {
		bad("TransactionCheckMax (--transaction-check-max) is %d; it must be ≥ 1", o.TransactionCheckMax)
	} else if o.TransactionCheckMax == 0 {
		o.TransactionCheckMax = def.TransactionCheckMax
	}
	switch o.Replication {
	case "":
		o.Replication = def.Replication
	case ReplicationAsync, ReplicationSync:
	default:
		bad("Replication (--replication) is %q; it must be %s or %s", o.Replication, ReplicationAsync, ReplicationSync)
	}
	if o.MinInsyncReplicas < 0 {
		bad("MinInsyncReplicas (--min-insync-replicas) is %d; it must be ≥ 1", o.MinInsyncReplicas)
	} else if o.MinInsyncReplicas == 0 {
		o.MinInsyncReplicas = def.MinInsyncReplicas
	}
	fill := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	fill(&o.AddrsrvRefresh, def.AddrsrvRefresh)
	fill(&o.HeartbeatInterval, def.HeartbeatInterval)
	fill(&o.RegisterInterval, def.RegisterInterval)
	fill(&o.NamesrvTimeout, def.NamesrvTimeout)
	fill(&o.LongPollingMax, def.LongPollingMax)
	fill(&o.ChannelExpiry, def.ChannelExpiry)
	fill(&o.LockLease, def.LockLease)
	fill(&o.TransactionCheckInterval, def.TransactionCheckInterval)
	fill(&o.TransactionTimeout, def.TransactionTimeout)
	fill(&o.ReplicaAckTimeout, def.ReplicaAckTimeout)
	fill(&o.ReplicaLagMax, def.ReplicaLagMax)
	fill(&o.TimerMaxDelay, def.TimerMaxDelay)
	fill(&o.ControllerHeartbeatInterval, def.ControllerHeartbeatInterval)
	if o.SegmentSize == 0 {
		o.SegmentSize = def.SegmentSize
	}
	if o.FileReservedTime <= 0 {
		o.FileReservedTime = def.FileReservedTime
	}
	if o.DiskMaxUsedRatio == 0 {
		o.DiskMaxUsedRatio = def.DiskMaxUsedRatio
	}
	errs = append(errs, o.Hardening.validate())
	return errors.Join(errs...)
}

// ParseFlushMode parses --flush: "async" or "sync", or RocketMQ's
// flushDiskType values ASYNC_FLUSH and SYNC_FLUSH.
func ParseFlushMode(s string) (store.FlushMode, error) { return store.ParseFlushMode(s) }
