package console

import "time"

// Snapshot is everything one page shows: what the console saw at its last
// poll. It is also served as JSON at /api/snapshot.
type Snapshot struct {
	At       time.Time   `json:"at"`
	Addrsrvs []string    `json:"addrsrvs"` // as configured
	IDCs     []IDCView   `json:"idcs"`
	Flows    []FlowView  `json:"flows"`
	Topics   []TopicView `json:"topics"`
	Groups   []GroupView `json:"groups"`
	Events   []Event     `json:"events"` // newest first
	Problems []string    `json:"problems"`
}

// IDCView is one IDC's column: its servers and their health.
type IDCView struct {
	Name      string         `json:"name"`
	Healthy   bool           `json:"healthy"`
	Addrsrvs  []EndpointView `json:"addrsrvs"`
	Namesrvs  []EndpointView `json:"namesrvs"`
	Brokers   []BrokerView   `json:"brokers"`
	Producers int            `json:"producers"`
	Consumers int            `json:"consumers"`
}

// EndpointView is an address or name server.
type EndpointView struct {
	Addr   string `json:"addr"`
	Up     bool   `json:"up"`
	Detail string `json:"detail,omitempty"`
}

// BrokerView is one broker as the name servers and its runtime info show it.
type BrokerView struct {
	Name      string  `json:"name"`
	ID        int64   `json:"id"`  // 0: master; else a replica
	Key       string  `json:"key"` // name, or name#id for a replica
	Addr      string  `json:"addr"`
	Up        bool    `json:"up"`
	Detail    string  `json:"detail,omitempty"`
	InRate    float64 `json:"inRate"`  // messages stored per second
	OutRate   float64 `json:"outRate"` // messages pulled per second
	Topics    int     `json:"topics"`
	DiskRatio float64 `json:"diskRatio"`
	Conns     int     `json:"conns"`
	// Takeovers is the broker's running total of its queues taken over by
	// another IDC's consumers (its own IDC had none for them) since it
	// started; TakeoverRecent marks one within the last 30 s.
	Takeovers      int64 `json:"takeovers"`
	TakeoverRecent bool  `json:"takeoverRecent"`
}

// FlowView is where one IDC's producers send and its consumers read now.
type FlowView struct {
	IDC     string       `json:"idc"`
	Produce []FlowTarget `json:"produce"`
	Consume []FlowTarget `json:"consume"`
}

// FlowTarget is the rate from (or to) one IDC's clients at the brokers of
// another (or the same) IDC.
type FlowTarget struct {
	IDC     string  `json:"idc"`
	Rate    float64 `json:"rate"` // messages per second
	Percent float64 `json:"percent"`
	Home    bool    `json:"home"` // the clients' own IDC
}

// TopicView is one topic's queues per broker.
type TopicView struct {
	Name    string           `json:"name"`
	Brokers []TopicBrokerRow `json:"brokers"`
}

// TopicBrokerRow is one broker's share of a topic.
type TopicBrokerRow struct {
	Broker      string `json:"broker"`
	IDC         string `json:"idc"`
	ReadQueues  int    `json:"readQueues"`
	WriteQueues int    `json:"writeQueues"`
	Perm        string `json:"perm"`
}

// GroupView is one consumer group on one topic.
type GroupView struct {
	Name     string      `json:"name"`
	Topic    string      `json:"topic"`
	Members  []string    `json:"members"`
	TotalLag int64       `json:"totalLag"`
	Queues   []QueueView `json:"queues"`
}

// QueueView is one queue of a group: its owner and lag.
type QueueView struct {
	Broker    string `json:"broker"`
	IDC       string `json:"idc"`
	Queue     int    `json:"queue"`
	Owner     string `json:"owner"`
	OwnerIDC  string `json:"ownerIdc"`
	Committed int64  `json:"committed"`
	Max       int64  `json:"max"`
	Lag       int64  `json:"lag"`
	Err       string `json:"err,omitempty"`
	// Stale marks a queue of a broker that left the routes, shown with
	// the figures it had at SeenAt: its lag is stranded there.
	Stale  bool      `json:"stale,omitempty"`
	SeenAt time.Time `json:"seenAt"`
}

// Event is one line of the failover timeline.
type Event struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"` // "down", "up", "move", "info"
	IDC  string    `json:"idc"`
	Text string    `json:"text"`
}
