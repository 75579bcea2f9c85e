package protocol

import "strings"

// Typed headers of the requests a name server serves (brokers register and
// heartbeat, clients and admin tools query routes and the KV store). Ext
// keys are RocketMQ's exactly; see docs/namesrv.md.

// BrokerNotExist (RocketMQ's BROKER_NOT_EXIST, 211) is a name server's answer
// to a BROKER_HEARTBEAT or other light request from a broker it has no
// registration for (it expired, its connection closed, or the name server
// restarted). The broker answers it with a full REGISTER_BROKER.
const BrokerNotExist ResponseCode = 211

func init() { responseNames[BrokerNotExist] = "BROKER_NOT_EXIST" }

// OrderTopicConfigNamespace is the KV namespace whose entries (topic →
// "brokerName:queueNums;…") become a route's orderTopicConf.
const OrderTopicConfigNamespace = "ORDER_TOPIC_CONFIG"

// nsOptInt writes v under k unless it is zero (the absent value).
func nsOptInt(w ExtWriter, k string, v int64) {
	if v != 0 {
		w.Int(k, v)
	}
}

// nsOptTrue writes v under k only when it is true (absent reads as false).
func nsOptTrue(w ExtWriter, k string, v bool) {
	if v {
		w.Bool(k, true)
	}
}

// RegisterBrokerRequestHeader is REGISTER_BROKER's header (broker → name
// server). The body is a RegisterBrokerBody (or, from old brokers, a bare
// TopicConfigSerializeWrapper).
type RegisterBrokerRequestHeader struct {
	BrokerName   string
	BrokerAddr   string // the ip:port clients dial
	ClusterName  string
	HAServerAddr string // ip:haPort; may be empty
	BrokerID     int64  // 0 = master
	// HeartbeatTimeoutMillis overrides the name server's broker expiry for
	// this broker; 0 = the name server's default.
	HeartbeatTimeoutMillis int64
	EnableActingMaster     bool
	// Compressed marks a body in RocketMQ's zlib registration format.
	Compressed bool
	// BodyCRC32 is CRC32 (IEEE) of the body & 0x7FFFFFFF; 0 = not checked.
	BodyCRC32 int32
	// ZoneName is the broker's IDC. On the wire it is written both as
	// zoneName and as RocketMQ 5's __ZONE_NAME; reading prefers __ZONE_NAME.
	ZoneName string
	// MasterEpoch (zonemq, "masterEpoch") is set by a master a failover
	// controller elected: the epoch it was elected at. A name server that
	// knows the controllers may give such a master the id-0 slot at once,
	// taking it from a replaced master that still holds it (docs/controller.md).
	MasterEpoch int64
	// Instance (zonemq, "zonemqInstance") names the broker's data
	// directory: made once, kept with the data. A name server refuses a
	// group's slot to a new instance while another recently held it (a
	// second process started with a copied config), see docs/security.md.
	Instance string
}

// Ext implements Header.
func (h *RegisterBrokerRequestHeader) Ext() map[string]string {
	w := ExtWriter{}
	w.Str("brokerName", h.BrokerName).Str("brokerAddr", h.BrokerAddr).Str("clusterName", h.ClusterName).
		Str("haServerAddr", h.HAServerAddr).Int("brokerId", h.BrokerID)
	nsOptInt(w, "heartbeatTimeoutMillis", h.HeartbeatTimeoutMillis)
	w.Bool("enableActingMaster", h.EnableActingMaster).Bool("compressed", h.Compressed).
		Int("bodyCrc32", int64(h.BodyCRC32))
	w.OptStr("zoneName", h.ZoneName).OptStr(ExtZoneName, h.ZoneName)
	if h.MasterEpoch != 0 {
		w.Int("masterEpoch", h.MasterEpoch)
	}
	w.OptStr("zonemqInstance", h.Instance)
	return w
}

// SetExt implements Header.
func (h *RegisterBrokerRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.BrokerName = r.String("brokerName")
	h.BrokerAddr = r.String("brokerAddr")
	h.ClusterName = r.String("clusterName")
	h.HAServerAddr = r.OptString("haServerAddr")
	h.BrokerID = r.Int64("brokerId")
	h.HeartbeatTimeoutMillis = r.OptInt64("heartbeatTimeoutMillis", 0)
	h.EnableActingMaster = r.OptBool("enableActingMaster", false)
	h.Compressed = r.OptBool("compressed", false)
	h.BodyCRC32 = r.OptInt32("bodyCrc32", 0)
	h.ZoneName = strings.TrimSpace(r.OptString(ExtZoneName))
	if h.ZoneName == "" {
		h.ZoneName = strings.TrimSpace(r.OptString("zoneName"))
	}
	h.MasterEpoch = r.OptInt64("masterEpoch", 0)
	h.Instance = r.OptString("zonemqInstance")
	return r.Err()
}

// RegisterBrokerResponseHeader is REGISTER_BROKER's reply header: for a
// slave, its master's HA and client addresses; empty for a master.
type RegisterBrokerResponseHeader struct {
	HAServerAddr string
	MasterAddr   string
}

// Ext implements Header.
func (h *RegisterBrokerResponseHeader) Ext() map[string]string {
	return ExtWriter{}.OptStr("haServerAddr", h.HAServerAddr).OptStr("masterAddr", h.MasterAddr)
}

// SetExt implements Header.
func (h *RegisterBrokerResponseHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.HAServerAddr = r.OptString("haServerAddr")
	h.MasterAddr = r.OptString("masterAddr")
	return r.Err()
}

// UnregisterBrokerRequestHeader is UNREGISTER_BROKER's header (a broker
// shutting down cleanly).
type UnregisterBrokerRequestHeader struct {
	BrokerName  string
	BrokerAddr  string
	ClusterName string
	BrokerID    int64
}

// Ext implements Header.
func (h *UnregisterBrokerRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("brokerName", h.BrokerName).Str("brokerAddr", h.BrokerAddr).
		Str("clusterName", h.ClusterName).Int("brokerId", h.BrokerID)
}

// SetExt implements Header.
func (h *UnregisterBrokerRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.BrokerName = r.String("brokerName")
	h.BrokerAddr = r.String("brokerAddr")
	h.ClusterName = r.String("clusterName")
	h.BrokerID = r.Int64("brokerId")
	return r.Err()
}

// BrokerHeartbeatRequestHeader is BROKER_HEARTBEAT's header (904): the light
// heartbeat that only refreshes a registered broker's last-seen time. A name
// server that does not know the broker answers BrokerNotExist.
type BrokerHeartbeatRequestHeader struct {
	ClusterName string
	BrokerAddr  string
	BrokerName  string
	BrokerID    int64 // optional on the wire; absent reads as 0
	Epoch       int32 // optional (controller mode); 0 = absent
	MaxOffset   int64 // optional; 0 = absent
	// ConfirmOffset is optional; 0 = absent.
	ConfirmOffset int64
	// HeartbeatTimeoutMillis (wire key heartbeatTimeoutMills, RocketMQ's
	// spelling) replaces the broker's expiry when non-zero.
	HeartbeatTimeoutMillis int64
	ElectionPriority       int32 // optional; 0 = absent
}

// Ext implements Header.
func (h *BrokerHeartbeatRequestHeader) Ext() map[string]string {
	w := ExtWriter{}
	w.Str("clusterName", h.ClusterName).Str("brokerAddr", h.BrokerAddr).Str("brokerName", h.BrokerName).
		Int("brokerId", h.BrokerID)
	nsOptInt(w, "epoch", int64(h.Epoch))
	nsOptInt(w, "maxOffset", h.MaxOffset)
	nsOptInt(w, "confirmOffset", h.ConfirmOffset)
	nsOptInt(w, "heartbeatTimeoutMills", h.HeartbeatTimeoutMillis)
	nsOptInt(w, "electionPriority", int64(h.ElectionPriority))
	return w
}

// SetExt implements Header.
func (h *BrokerHeartbeatRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.ClusterName = r.String("clusterName")
	h.BrokerAddr = r.String("brokerAddr")
	h.BrokerName = r.String("brokerName")
	h.BrokerID = r.OptInt64("brokerId", 0)
	h.Epoch = r.OptInt32("epoch", 0)
	h.MaxOffset = r.OptInt64("maxOffset", 0)
	h.ConfirmOffset = r.OptInt64("confirmOffset", 0)
	h.HeartbeatTimeoutMillis = r.OptInt64("heartbeatTimeoutMills", 0)
	h.ElectionPriority = r.OptInt32("electionPriority", 0)
	return r.Err()
}

// GetRouteInfoRequestHeader is GET_ROUTEINFO_BY_TOPIC's header. ZoneName and
// ZoneMode are RocketMQ 5's __ZONE_NAME / __ZONE_MODE ext fields: with
// ZoneMode set, a zonemq name server returns only ZoneName's brokers (or
// the full route when that zone has no live writable broker for the topic).
type GetRouteInfoRequestHeader struct {
	Topic                  string
	AcceptStandardJSONOnly bool
	ZoneName               string
	ZoneMode               bool
}

// Ext implements Header.
func (h *GetRouteInfoRequestHeader) Ext() map[string]string {
	w := ExtWriter{}.Str("topic", h.Topic)
	nsOptTrue(w, "acceptStandardJsonOnly", h.AcceptStandardJSONOnly)
	w.OptStr(ExtZoneName, h.ZoneName)
	nsOptTrue(w, ExtZoneMode, h.ZoneMode)
	return w
}

// SetExt implements Header.
func (h *GetRouteInfoRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Topic = r.String("topic")
	h.AcceptStandardJSONOnly = r.OptBool("acceptStandardJsonOnly", false)
	h.ZoneName = strings.TrimSpace(r.OptString(ExtZoneName))
	// RocketMQ compares __ZONE_MODE with "true" and treats anything else as
	// off, so a malformed value is "off" here too rather than an error.
	h.ZoneMode = strings.EqualFold(strings.TrimSpace(r.OptString(ExtZoneMode)), "true")
	return r.Err()
}

// DeleteTopicFromNamesrvRequestHeader is DELETE_TOPIC_IN_NAMESRV's header.
// With ClusterName set only that cluster's brokers lose the topic.
type DeleteTopicFromNamesrvRequestHeader struct {
	Topic       string
	ClusterName string
}

// Ext implements Header.
func (h *DeleteTopicFromNamesrvRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("topic", h.Topic).OptStr("clusterName", h.ClusterName)
}

// SetExt implements Header.
func (h *DeleteTopicFromNamesrvRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Topic = r.String("topic")
	h.ClusterName = r.OptString("clusterName")
	return r.Err()
}

// RegisterTopicRequestHeader is REGISTER_TOPIC_IN_NAMESRV's header; the body
// is a TopicRouteData whose queueDatas name registered brokers.
type RegisterTopicRequestHeader struct {
	Topic string
}

// Ext implements Header.
func (h *RegisterTopicRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("topic", h.Topic)
}

// SetExt implements Header.
func (h *RegisterTopicRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Topic = r.String("topic")
	return r.Err()
}

// PutKVConfigRequestHeader is PUT_KV_CONFIG's header.
type PutKVConfigRequestHeader struct {
	Namespace string
	Key       string
	Value     string
}

// Ext implements Header.
func (h *PutKVConfigRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("namespace", h.Namespace).Str("key", h.Key).Str("value", h.Value)
}

// SetExt implements Header.
func (h *PutKVConfigRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Namespace = r.String("namespace")
	h.Key = r.String("key")
	h.Value = r.String("value")
	return r.Err()
}

// GetKVConfigRequestHeader is GET_KV_CONFIG's header.
type GetKVConfigRequestHeader struct {
	Namespace string
	Key       string
}

// Ext implements Header.
func (h *GetKVConfigRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("namespace", h.Namespace).Str("key", h.Key)
}

// SetExt implements Header.
func (h *GetKVConfigRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Namespace = r.String("namespace")
	h.Key = r.String("key")
	return r.Err()
}

// GetKVConfigResponseHeader is GET_KV_CONFIG's reply header.
type GetKVConfigResponseHeader struct {
	Value string
}

// Ext implements Header.
func (h *GetKVConfigResponseHeader) Ext() map[string]string {
	return ExtWriter{}.Str("value", h.Value)
}

// SetExt implements Header.
func (h *GetKVConfigResponseHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Value = r.OptString("value")
	return r.Err()
}

// DeleteKVConfigRequestHeader is DELETE_KV_CONFIG's header.
type DeleteKVConfigRequestHeader struct {
	Namespace string
	Key       string
}

// Ext implements Header.
func (h *DeleteKVConfigRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("namespace", h.Namespace).Str("key", h.Key)
}

// SetExt implements Header.
func (h *DeleteKVConfigRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Namespace = r.String("namespace")
	h.Key = r.String("key")
	return r.Err()
}

// GetKVListByNamespaceRequestHeader is GET_KVLIST_BY_NAMESPACE's header; the
// reply body is a KVTable.
type GetKVListByNamespaceRequestHeader struct {
	Namespace string
}

// Ext implements Header.
func (h *GetKVListByNamespaceRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("namespace", h.Namespace)
}

// SetExt implements Header.
func (h *GetKVListByNamespaceRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Namespace = r.String("namespace")
	return r.Err()
}

// GetTopicsByClusterRequestHeader is GET_TOPICS_BY_CLUSTER's header (the
// wire key is RocketMQ's "cluster"); the reply body is a TopicList.
type GetTopicsByClusterRequestHeader struct {
	Cluster string
}

// Ext implements Header.
func (h *GetTopicsByClusterRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("cluster", h.Cluster)
}

// SetExt implements Header.
func (h *GetTopicsByClusterRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Cluster = r.String("cluster")
	return r.Err()
}

// QueryDataVersionRequestHeader is QUERY_DATA_VERSION's header; the body is
// the broker's DataVersion JSON.
type QueryDataVersionRequestHeader struct {
	BrokerName  string
	BrokerAddr  string
	ClusterName string
	BrokerID    int64
}

// Ext implements Header.
func (h *QueryDataVersionRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("brokerName", h.BrokerName).Str("brokerAddr", h.BrokerAddr).
		Str("clusterName", h.ClusterName).Int("brokerId", h.BrokerID)
}

// SetExt implements Header.
func (h *QueryDataVersionRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.BrokerName = r.String("brokerName")
	h.BrokerAddr = r.String("brokerAddr")
	h.ClusterName = r.String("clusterName")
	h.BrokerID = r.Int64("brokerId")
	return r.Err()
}

// QueryDataVersionResponseHeader is QUERY_DATA_VERSION's reply header:
// Changed means the name server's copy of the broker's topic table is not at
// the version the broker sent (or it has none), so the broker should send a
// full registration. The reply body is the name server's DataVersion, if any.
type QueryDataVersionResponseHeader struct {
	Changed bool
}

// Ext implements Header.
func (h *QueryDataVersionResponseHeader) Ext() map[string]string {
	return ExtWriter{}.Bool("changed", h.Changed)
}

// SetExt implements Header.
func (h *QueryDataVersionResponseHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.Changed = r.OptBool("changed", false)
	return r.Err()
}
