package protocol

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Permission bits (PermName).
const (
	PermPriority = 8
	PermRead     = 4
	PermWrite    = 2
	PermInherit  = 1
	// PermReadWrite is a normal topic's permission.
	PermReadWrite = PermRead | PermWrite
)

// Readable reports whether perm allows reads.
func Readable(perm int) bool { return perm&PermRead != 0 }

// Writeable reports whether perm allows writes.
func Writeable(perm int) bool { return perm&PermWrite != 0 }

// MasterID is the broker id of a master.
const MasterID int64 = 0

// QueueData is one broker's queues of a topic.
type QueueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
	TopicSysFlag   int    `json:"topicSysFlag"`
}

// BrokerData is one broker (a master and its slaves) with its IDC.
type BrokerData struct {
	Cluster            string           `json:"cluster"`
	BrokerName         string           `json:"brokerName"`
	BrokerAddrs        map[int64]string `json:"brokerAddrs"`
	ZoneName           string           `json:"zoneName,omitempty"`
	EnableActingMaster bool             `json:"enableActingMaster"`
	// BrokerAddrZones is zonemq's own: the IDC of each address, by broker
	// id, since a group's replicas may live in different IDCs. ZoneName is
	// then the master's IDC (or, with no master, the lowest id's). Stock
	// clients ignore the field.
	BrokerAddrZones map[int64]string `json:"brokerAddrZones,omitempty"`
}

// AddrZone returns the IDC of broker id's address: its BrokerAddrZones
// entry, or ZoneName when the name server did not send one.
func (b *BrokerData) AddrZone(id int64) string {
	if z, ok := b.BrokerAddrZones[id]; ok && z != "" {
		return z
	}
	return b.ZoneName
}

// RefreshZoneName sets ZoneName from BrokerAddrZones: the master's IDC, or
// the lowest id's when there is no master. It leaves ZoneName alone when no
// address has a zone.
func (b *BrokerData) RefreshZoneName() {
	best := int64(-1)
	for id, z := range b.BrokerAddrZones {
		if _, ok := b.BrokerAddrs[id]; !ok || z == "" {
			continue
		}
		if best < 0 || id < best {
			best = id
		}
	}
	if best >= 0 {
		b.ZoneName = b.BrokerAddrZones[best]
	}
}

// MasterAddr returns the master's address, or "" if there is none.
func (b *BrokerData) MasterAddr() string { return b.BrokerAddrs[MasterID] }

// TopicRouteData is the route of a topic: its queues per broker and those
// brokers' addresses.
type TopicRouteData struct {
	OrderTopicConf    string                     `json:"orderTopicConf,omitempty"`
	QueueDatas        []QueueData                `json:"queueDatas"`
	BrokerDatas       []BrokerData               `json:"brokerDatas"`
	FilterServerTable map[string][]string        `json:"filterServerTable"`
	TopicQueueMapping map[string]json.RawMessage `json:"topicQueueMappingByBroker,omitempty"`
}

// Encode returns the route as compact JSON with every array and map present
// (rocketmq-client-go panics on a missing brokerAddrs, fails on a null
// queueDatas).
func (r *TopicRouteData) Encode() []byte {
	c := *r
	if c.QueueDatas == nil {
		c.QueueDatas = []QueueData{}
	}
	if c.BrokerDatas == nil {
		c.BrokerDatas = []BrokerData{}
	}
	bds := make([]BrokerData, len(c.BrokerDatas))
	for i, b := range c.BrokerDatas {
		if b.BrokerAddrs == nil {
			b.BrokerAddrs = map[int64]string{}
		}
		bds[i] = b
	}
	c.BrokerDatas = bds
	if c.FilterServerTable == nil {
		c.FilterServerTable = map[string][]string{}
	}
	out, _ := json.Marshal(&c)
	return out
}

// DecodeTopicRouteData parses a route body, including the unquoted integer
// keys fastjson writes for brokerAddrs.
func DecodeTopicRouteData(b []byte) (*TopicRouteData, error) {
	var r TopicRouteData
	if err := json.Unmarshal(QuoteIntegerKeys(b), &r); err != nil {
		return nil, fmt.Errorf("protocol: route body: %w", err)
	}
	return &r, nil
}

// QuoteIntegerKeys rewrites fastjson's bare integer object keys ({0:"a"})
// into valid JSON ({"0":"a"}). Text inside strings is left alone.
func QuoteIntegerKeys(b []byte) []byte {
	var out []byte
	inString, escaped := false, false
	last := 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if c == '"' {
			inString = true
			continue
		}
		if c != '{' && c != ',' {
			continue
		}
		j := i + 1
		for j < len(b) && (b[j] == ' ' || b[j] == '\n' || b[j] == '\t' || b[j] == '\r') {
			j++
		}
		k := j
		if k < len(b) && b[k] == '-' {
			k++
		}
		for k < len(b) && b[k] >= '0' && b[k] <= '9' {
			k++
		}
		if k == j || k >= len(b) || b[k] != ':' {
			continue
		}
		out = append(out, b[last:j]...)
		out = append(out, '"')
		out = append(out, b[j:k]...)
		out = append(out, '"')
		last = k
		i = k - 1
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// ClusterInfo is GET_BROKER_CLUSTER_INFO's body.
type ClusterInfo struct {
	BrokerAddrTable  map[string]BrokerData `json:"brokerAddrTable"`
	ClusterAddrTable map[string][]string   `json:"clusterAddrTable"`
}

// TopicList is GET_ALL_TOPIC_LIST_FROM_NAMESERVER's body.
type TopicList struct {
	TopicList  []string `json:"topicList"`
	BrokerAddr string   `json:"brokerAddr,omitempty"`
}

// DataVersion versions a broker's topic table.
type DataVersion struct {
	Counter      int64 `json:"counter"`
	StateVersion int64 `json:"stateVersion"`
	Timestamp    int64 `json:"timestamp"`
}

// TopicConfig is a topic as a broker holds it.
type TopicConfig struct {
	TopicName       string            `json:"topicName"`
	ReadQueueNums   int               `json:"readQueueNums"`
	WriteQueueNums  int               `json:"writeQueueNums"`
	Perm            int               `json:"perm"`
	TopicFilterType string            `json:"topicFilterType"`
	TopicSysFlag    int               `json:"topicSysFlag"`
	Order           bool              `json:"order"`
	Attributes      map[string]string `json:"attributes"`
}

// TopicConfigSerializeWrapper is a broker's topic table with its version.
type TopicConfigSerializeWrapper struct {
	TopicConfigTable map[string]TopicConfig `json:"topicConfigTable"`
	DataVersion      DataVersion            `json:"dataVersion"`
}

// RegisterBrokerBody is REGISTER_BROKER's body.
type RegisterBrokerBody struct {
	TopicConfigSerializeWrapper TopicConfigSerializeWrapper `json:"topicConfigSerializeWrapper"`
	FilterServerList            []string                    `json:"filterServerList"`
}

// KVTable is a namespace's key/value pairs (ORDER_TOPIC_CONFIG in a
// REGISTER_BROKER reply, GET_KVLIST_BY_NAMESPACE's body).
type KVTable struct {
	Table map[string]string `json:"table"`
}

// MessageQueue names one queue.
type MessageQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
}

// String renders the queue for logs: topic@broker#id.
func (q MessageQueue) String() string {
	return fmt.Sprintf("%s@%s#%d", q.Topic, q.BrokerName, q.QueueID)
}

// SortMessageQueues orders queues by topic, broker name and id, the order
// every allocation strategy starts from.
func SortMessageQueues(qs []MessageQueue) {
	sort.Slice(qs, func(i, j int) bool {
		a, b := qs[i], qs[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.BrokerName != b.BrokerName {
			return a.BrokerName < b.BrokerName
		}
		return a.QueueID < b.QueueID
	})
}

// ParseOrderTopicConf parses "brokerA:4;brokerB:8".
func ParseOrderTopicConf(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, item := range strings.Split(s, ";") {
		if item == "" {
			continue
		}
		name, n, ok := strings.Cut(item, ":")
		// Atoi, not Sscanf: Sscanf takes "4x" or " 4" for 4.
		num, err := strconv.Atoi(n)
		if !ok || err != nil || name == "" || num <= 0 {
			return nil, fmt.Errorf("protocol: bad orderTopicConf item %q (want brokerName:queueNums)", item)
		}
		out[name] = num
	}
	return out, nil
}
