package protocol

import "encoding/json"

// Replication between the brokers of one group (same broker name, ids 0..n)
// travels over the broker port as zonemq's own request codes, outside
// RocketMQ's ranges (docs/protocol.md, "Replication"). The replica drives
// it: HELLO once per connection to agree where its log and the master's
// meet, then a stream of long-polling FETCHes (each one's offset doubles as
// the acknowledgement of everything below it), and a META exchange every
// second for topics, groups, offsets and delay progress.
const (
	// ReplicaHello opens replication: the replica names itself and its log
	// end and last epoch; the master answers where the logs agree.
	ReplicaHello RequestCode = 9101
	// ReplicaFetch asks for log bytes from an offset (the replica holds
	// everything below it) and parks on the master until there are some.
	ReplicaFetch RequestCode = 9102
	// ReplicaSyncMeta exchanges metadata: the replica sends the consumer
	// offsets committed on it while it served reads, the master answers its
	// topics, subscription groups, offsets and delay progress.
	ReplicaSyncMeta RequestCode = 9103
	// ReplicaSwitch makes a broker group change masters (a planned
	// switchover, `zonemq admin broker switch`): sent to the current master.
	ReplicaSwitch RequestCode = 9104
	// ReplicaPromote tells a replica to become master at an epoch, once its
	// log reaches an offset (the second half of a switchover).
	ReplicaPromote RequestCode = 9105
)

func init() {
	requestNames[ReplicaHello] = "ZONEMQ_REPLICA_HELLO"
	requestNames[ReplicaFetch] = "ZONEMQ_REPLICA_FETCH"
	requestNames[ReplicaSyncMeta] = "ZONEMQ_REPLICA_SYNC_META"
	requestNames[ReplicaSwitch] = "ZONEMQ_REPLICA_SWITCH"
	requestNames[ReplicaPromote] = "ZONEMQ_REPLICA_PROMOTE"
}

// ReplicaHelloRequestHeader is a replica's opening request.
type ReplicaHelloRequestHeader struct {
	BrokerName  string
	ReplicaID   int64
	ReplicaAddr string
	IDC         string
	// LastEpoch is the epoch that wrote the replica's last record (0 for
	// an empty log); LogEnd its log's end.
	LastEpoch   int64
	LogEnd      int64
	SegmentSize int64
}

// Ext implements Header.
func (h *ReplicaHelloRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("brokerName", h.BrokerName).Int("replicaId", h.ReplicaID).Str("replicaAddr", h.ReplicaAddr).
		OptStr("idc", h.IDC).Int("lastEpoch", h.LastEpoch).Int("logEnd", h.LogEnd).Int("segmentSize", h.SegmentSize)
}

// SetExt implements Header.
func (h *ReplicaHelloRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.BrokerName = r.String("brokerName")
	h.ReplicaID = r.Int64("replicaId")
	h.ReplicaAddr = r.String("replicaAddr")
	h.IDC = r.OptString("idc")
	h.LastEpoch = r.Int64("lastEpoch")
	h.LogEnd = r.Int64("logEnd")
	h.SegmentSize = r.Int64("segmentSize")
	return r.Err()
}

// ReplicaHelloResponseHeader is the master's answer: the replica truncates
// its log to TruncateTo (when its log is longer) and fetches from there; an
// empty replica whose master's log starts later starts at LogMin.
type ReplicaHelloResponseHeader struct {
	Epoch      int64
	TruncateTo int64
	LogMin     int64
	LogEnd     int64
}

// Ext implements Header.
func (h *ReplicaHelloResponseHeader) Ext() map[string]string {
	return ExtWriter{}.Int("epoch", h.Epoch).Int("truncateTo", h.TruncateTo).Int("logMin", h.LogMin).Int("logEnd", h.LogEnd)
}

// SetExt implements Header.
func (h *ReplicaHelloResponseHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Epoch = r.Int64("epoch")
	h.TruncateTo = r.Int64("truncateTo")
	h.LogMin = r.Int64("logMin")
	h.LogEnd = r.Int64("logEnd")
	return r.Err()
}

// ReplicaFetchRequestHeader asks for the log from Offset on, under Epoch
// (a master at another epoch refuses, and the replica says HELLO again).
type ReplicaFetchRequestHeader struct {
	BrokerName string
	ReplicaID  int64
	Epoch      int64
	Offset     int64
	MaxBytes   int32
	// MaxWaitMillis bounds how long the master parks the fetch when it has
	// nothing new.
	MaxWaitMillis int64
}

// Ext implements Header.
func (h *ReplicaFetchRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("brokerName", h.BrokerName).Int("replicaId", h.ReplicaID).Int("epoch", h.Epoch).
		Int("offset", h.Offset).Int("maxBytes", int64(h.MaxBytes)).Int("maxWaitMillis", h.MaxWaitMillis)
}

// SetExt implements Header.
func (h *ReplicaFetchRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.BrokerName = r.String("brokerName")
	h.ReplicaID = r.Int64("replicaId")
	h.Epoch = r.Int64("epoch")
	h.Offset = r.Int64("offset")
	h.MaxBytes = r.Int32("maxBytes")
	h.MaxWaitMillis = r.OptInt64("maxWaitMillis", 0)
	return r.Err()
}

// ReplicaFetchResponseHeader comes with a chunk of log (the body) that
// starts at the requested offset. MasterEnd tells the replica how far
// behind it is; Confirmed is the master's confirmed offset, up to which
// consumers may read (-1 from a master that does not send it).
type ReplicaFetchResponseHeader struct {
	Epoch     int64
	MasterEnd int64
	Confirmed int64
}

// Ext implements Header.
func (h *ReplicaFetchResponseHeader) Ext() map[string]string {
	return ExtWriter{}.Int("epoch", h.Epoch).Int("masterEnd", h.MasterEnd).Int("confirmed", h.Confirmed)
}

// SetExt implements Header.
func (h *ReplicaFetchResponseHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Epoch = r.Int64("epoch")
	h.MasterEnd = r.Int64("masterEnd")
	h.Confirmed = r.OptInt64("confirmed", -1)
	return r.Err()
}

// ReplicaSwitchRequestHeader asks the master of BrokerName to hand over to
// the replica with id To.
type ReplicaSwitchRequestHeader struct {
	BrokerName string
	To         int64
	// TimeoutMillis bounds how long the master waits for the replica to
	// catch up with writes paused.
	TimeoutMillis int64
}

// Ext implements Header.
func (h *ReplicaSwitchRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("brokerName", h.BrokerName).Int("to", h.To).Int("timeoutMillis", h.TimeoutMillis)
}

// SetExt implements Header.
func (h *ReplicaSwitchRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.BrokerName = r.String("brokerName")
	h.To = r.Int64("to")
	h.TimeoutMillis = r.OptInt64("timeoutMillis", 0)
	return r.Err()
}

// ReplicaPromoteRequestHeader makes a replica master at Epoch once its log
// ends at LogEnd; the old master takes replica id DemotedID.
type ReplicaPromoteRequestHeader struct {
	BrokerName string
	Epoch      int64
	LogEnd     int64
	DemotedID  int64
}

// Ext implements Header.
func (h *ReplicaPromoteRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("brokerName", h.BrokerName).Int("epoch", h.Epoch).Int("logEnd", h.LogEnd).Int("demotedId", h.DemotedID)
}

// SetExt implements Header.
func (h *ReplicaPromoteRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.BrokerName = r.String("brokerName")
	h.Epoch = r.Int64("epoch")
	h.LogEnd = r.Int64("logEnd")
	h.DemotedID = r.Int64("demotedId")
	return r.Err()
}

// EpochEntry records that the master of epoch Epoch wrote the log from
// StartOffset on (until the next entry's start).
type EpochEntry struct {
	Epoch       int64 `json:"epoch"`
	StartOffset int64 `json:"startOffset"`
}

// ReplicaMeta is the body of REPLICA_SYNC_META: the request carries the
// offsets a replica took commits for (Offsets only), the answer everything
// the master knows. Topics and groups travel as the wrappers they are
// persisted as, opaque here.
type ReplicaMeta struct {
	Topics       json.RawMessage                       `json:"topics,omitempty"`
	Groups       json.RawMessage                       `json:"groups,omitempty"`
	DelayOffsets json.RawMessage                       `json:"delayOffsets,omitempty"`
	Timers       json.RawMessage                       `json:"timers,omitempty"`
	Offsets      map[string]map[string]map[int32]int64 `json:"offsets,omitempty"`
	Epochs       []EpochEntry                          `json:"epochs,omitempty"`
}

// ReplicaState is what a master reports of one replica (admin, tests).
type ReplicaState struct {
	Addr     string `json:"addr"`
	IDC      string `json:"idc"`
	Acked    int64  `json:"acked"`
	InSync   bool   `json:"inSync"`
	LastSeen int64  `json:"lastSeen"`
}
