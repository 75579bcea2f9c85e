// Package admin manages a zonemq cluster and inspects it: brokers by IDC,
// topics and their routes, group offsets and lag, live clients, messages
// by id, key or offset, dead-letter queues, offset resets, switchovers and
// the name servers' KV config. It is built on the SDK's client.Conn, as
// rocketmq-client-go keeps its admin apart from its producer and
// consumers; `zonemq admin` and the console are its users.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/idc"
	"github.com/zonemq/zonemq/internal/protocol"
)

// Config configures a Client.
type Config struct {
	client.ClientConfig
}

// Client is an admin client. It is safe for concurrent use.
type Client struct {
	conn *client.Conn
}

// New validates cfg and returns an admin client that is not started.
func New(cfg Config) (*Client, error) {
	conn, err := client.NewConn(cfg.ClientConfig)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn}, nil
}

// Start learns the name servers.
func (a *Client) Start(ctx context.Context) error { return a.conn.Start(ctx) }

// Shutdown closes the admin's connections. It is idempotent.
func (a *Client) Shutdown(ctx context.Context) error { return a.conn.Shutdown(ctx) }

// BrokerStatus is one broker as the name servers know it.
type BrokerStatus struct {
	Cluster string
	Name    string
	ID      int64 // 0 = master
	IDC     string
	Addr    string
	// Alive is true while the name server has a registration from it.
	Alive bool
	// LastHeartbeat is its last registration or heartbeat (zero when the
	// name server does not report it).
	LastHeartbeat time.Time
}

// Cluster lists every registered broker, sorted by IDC, name and id
// (GET_BROKER_CLUSTER_INFO).
func (a *Client) Cluster(ctx context.Context) ([]BrokerStatus, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	resp, err := a.conn.CallNameServer(ctx, req(protocol.GetBrokerClusterInfo, nil, nil))
	if err != nil {
		return nil, err
	}
	info, err := protocol.DecodeClusterLiveInfo(resp.Body)
	if err != nil {
		return nil, err
	}
	var out []BrokerStatus
	for name, bd := range info.BrokerAddrTable {
		for id, baddr := range bd.BrokerAddrs {
			st := BrokerStatus{Cluster: bd.Cluster, Name: name, ID: id, IDC: bd.AddrZone(id), Addr: baddr, Alive: true}
			if live, ok := info.BrokerLiveTable[baddr]; ok {
				st.LastHeartbeat = time.UnixMilli(live.LastUpdateTimestamp)
			} else if len(info.BrokerLiveTable) > 0 {
				st.Alive = false
			}
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		x, y := out[i], out[j]
		if x.IDC != y.IDC {
			return x.IDC < y.IDC
		}
		if x.Name != y.Name {
			return x.Name < y.Name
		}
		return x.ID < y.ID
	})
	return out, nil
}

// TopicSpec describes a topic to create.
type TopicSpec struct {
	Topic string
	// Queues is the read and write queue count on each broker. Zero means 4.
	Queues int
	// Perm is RocketMQ's permission bits. Zero means 6 (read and write).
	Perm int
	// Order marks the topic ordered.
	Order bool
	// Brokers are the broker addresses to create it on. Empty means every
	// master of every IDC (of Cluster, if set).
	Brokers []string
	// Cluster restricts the default broker set to one cluster.
	Cluster string
}

// CreateTopic creates (or updates) a topic on each broker with
// UPDATE_AND_CREATE_TOPIC. Each broker registers the topic with every name
// server itself. The error joins every broker's failure.
func (a *Client) CreateTopic(ctx context.Context, spec TopicSpec) error {
	if err := a.conn.Running(); err != nil {
		return err
	}
	if err := protocol.ValidateTopic(spec.Topic); err != nil {
		return &client.ConfigError{Field: "TopicSpec.Topic", Reason: err.Error()}
	}
	queues, perm := spec.Queues, spec.Perm
	if queues <= 0 {
		queues = 4
	}
	if perm <= 0 {
		perm = protocol.PermReadWrite
	}
	addrs := spec.Brokers
	if len(addrs) == 0 {
		brokers, err := a.Cluster(ctx)
		if err != nil {
			return err
		}
		for _, b := range brokers {
			if b.ID == protocol.MasterID && b.Alive && (spec.Cluster == "" || spec.Cluster == b.Cluster) {
				addrs = append(addrs, b.Addr)
			}
		}
		if len(addrs) == 0 {
			return fmt.Errorf("%w: no live broker to create %s on", client.ErrNoRoute, spec.Topic)
		}
	}
	h := protocol.CreateTopicRequestHeader{
		Topic: spec.Topic, DefaultTopic: protocol.AutoCreateTopicKey, ReadQueueNums: int32(queues), WriteQueueNums: int32(queues),
		Perm: int32(perm), TopicFilterType: "SINGLE_TAG", Order: spec.Order,
	}
	return a.eachAddr(ctx, addrs, func(addr string) error {
		return a.do(ctx, addr, req(protocol.UpdateAndCreateTopic, h.Ext(), nil))
	})
}

// GroupSpec is a consumer group's config, as `mqadmin updateSubGroup` sets
// it.
type GroupSpec struct {
	Group string
	// Orderly (consumeMessageOrderly) makes the group FIFO for POP
	// consumers, the RocketMQ 5 clients through the access point: a queue
	// hands out nothing new while one of its messages is in flight.
	Orderly bool
	// RetryMaxTimes is how often a message is redelivered before it goes to
	// the dead-letter queue. Zero means 16.
	RetryMaxTimes int
}

// UpdateGroup creates or replaces a consumer group's config on every live
// master of every IDC (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP; an admin
// request when the ACL is on). The error joins every broker's failure.
func (a *Client) UpdateGroup(ctx context.Context, spec GroupSpec) error {
	if err := a.conn.Running(); err != nil {
		return err
	}
	if err := protocol.ValidateGroup(spec.Group); err != nil {
		return &client.ConfigError{Field: "GroupSpec.Group", Reason: err.Error()}
	}
	retries := spec.RetryMaxTimes
	if retries <= 0 {
		retries = 16
	}
	cfg := protocol.NewSubscriptionGroupConfig(spec.Group)
	cfg.ConsumeMessageOrderly, cfg.RetryMaxTimes = spec.Orderly, retries
	body, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	brokers, err := a.Cluster(ctx)
	if err != nil {
		return err
	}
	var addrs []string
	for _, b := range brokers {
		if b.ID == protocol.MasterID && b.Alive {
			addrs = append(addrs, b.Addr)
		}
	}
	if len(addrs) == 0 {
		return fmt.Errorf("%w: no live broker to update group %s on", client.ErrNoRoute, spec.Group)
	}
	return a.eachAddr(ctx, addrs, func(addr string) error {
		return a.do(ctx, addr, req(protocol.UpdateAndCreateSubscriptionGrp, nil, body))
	})
}

// DeleteTopic deletes a topic from every broker hosting it
// (DELETE_TOPIC_IN_BROKER) and from every name server of every IDC
// (DELETE_TOPIC_IN_NAMESRV). The error joins every failure.
func (a *Client) DeleteTopic(ctx context.Context, topic string) error {
	if err := a.conn.Running(); err != nil {
		return err
	}
	r, err := a.conn.Route(ctx, topic)
	if err != nil {
		return err
	}
	var addrs []string
	for _, b := range r.Brokers {
		if m := b.Master(); m != "" {
			addrs = append(addrs, m)
		}
	}
	h := protocol.TopicRequestHeader{Topic: topic}
	errB := a.eachAddr(ctx, addrs, func(addr string) error {
		return a.do(ctx, addr, req(protocol.DeleteTopicInBroker, h.Ext(), nil))
	})
	nh := protocol.DeleteTopicFromNamesrvRequestHeader{Topic: topic}
	errN := a.eachAddr(ctx, a.conn.NameServers(), func(addr string) error {
		return a.do(ctx, addr, req(protocol.DeleteTopicInNamesrv, nh.Ext(), nil))
	})
	return errors.Join(errB, errN)
}

// TopicRoute asks a name server for topic's route (all IDCs, unless
// ZoneMode is set).
func (a *Client) TopicRoute(ctx context.Context, topic string) (*client.TopicRoute, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	return a.conn.Route(ctx, topic)
}

// TopicList lists every topic the name servers know (GET_ALL_TOPIC_LIST_FROM_NAMESERVER).
func (a *Client) TopicList(ctx context.Context) ([]string, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	resp, err := a.conn.CallNameServer(ctx, req(protocol.GetAllTopicListFromNameServer, nil, nil))
	if err != nil {
		return nil, err
	}
	var tl protocol.TopicList
	if err := json.Unmarshal(resp.Body, &tl); err != nil {
		return nil, fmt.Errorf("zonemq client: topic list from %s: %w", resp.Addr, err)
	}
	sort.Strings(tl.TopicList)
	return tl.TopicList, nil
}

// QueueOffset is a group's position in one queue.
type QueueOffset struct {
	Queue      client.MessageQueue
	BrokerAddr string
	IDC        string
	// Committed is the group's committed offset, -1 if none.
	Committed int64
	// Max is the offset the next stored message will get.
	Max int64
	// Lag is Max - Committed (Max when nothing is committed).
	Lag int64
	// Owner is the consumer that holds the queue by the allocation rule,
	// computed from the broker's view of the group ("" if none).
	Owner string
	// Err is why the figures above are missing, e.g. the broker is down.
	Err error
}

// GroupOffsets reports the group's committed offset, the max offset, the
// lag and the owner of every readable queue of topic.
func (a *Client) GroupOffsets(ctx context.Context, group, topic string) ([]QueueOffset, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	r, rbs, err := a.readBrokers(ctx, topic)
	if err != nil {
		return nil, err
	}
	var (
		mu  sync.Mutex
		out []QueueOffset
		wg  sync.WaitGroup
	)
	for _, rb := range rbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := rb.Master()
			ids, lerr := a.conn.ConsumerIDs(ctx, addr, group)
			eligible := idc.EligibleConsumers(rb.IDC, ids, r.IDCHasLiveBroker)
			for q := 0; q < rb.ReadQueues; q++ {
				mq := client.MessageQueue{Topic: topic, BrokerName: rb.Name, QueueID: q}
				qo := QueueOffset{Queue: mq, BrokerAddr: addr, IDC: rb.IDC, Committed: -1, Err: lerr}
				if lerr == nil {
					for _, id := range eligible {
						if s, e := idc.AllocateAveragely(rb.ReadQueues, eligible, id); q >= s && q < e {
							qo.Owner = id
							break
						}
					}
					off, err := a.conn.CommittedOffset(ctx, addr, group, mq)
					if err != nil && !errors.Is(err, client.ErrNoOffset) {
						qo.Err = err
					} else if err == nil {
						qo.Committed = off
					}
					if qo.Max, err = a.conn.MaxOffset(ctx, addr, mq); err != nil && qo.Err == nil {
						qo.Err = err
					}
					qo.Lag = qo.Max - max(qo.Committed, 0)
				}
				mu.Lock()
				out = append(out, qo)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool {
		x, y := out[i].Queue, out[j].Queue
		if x.BrokerName != y.BrokerName {
			return x.BrokerName < y.BrokerName
		}
		return x.QueueID < y.QueueID
	})
	return out, nil
}

// ClientInfo is one live client as a name server knows it.
type ClientInfo struct {
	ClientID string
	IDC      string
	Role     string
	Groups   []string
	// Addr is where its last heartbeat came from.
	Addr     string
	LastSeen time.Time
}

// Clients lists the live clients a name server knows (zonemq request
// 9002), of every IDC, or only of idcName if it is not empty.
func (a *Client) Clients(ctx context.Context, idcName string) ([]ClientInfo, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	ext := protocol.ExtWriter{}.OptStr(protocol.ExtClientIDC, idcName)
	resp, err := a.conn.CallNameServer(ctx, req(protocol.GetClientsByIDC, ext, nil))
	if err != nil {
		return nil, err
	}
	list, err := protocol.DecodeClientList(resp.Body)
	if err != nil {
		return nil, err
	}
	out := make([]ClientInfo, len(list.Clients))
	for i, c := range list.Clients {
		out[i] = ClientInfo{ClientID: c.ClientID, IDC: c.IDC, Role: c.Role, Groups: c.Groups, Addr: c.Addr, LastSeen: time.UnixMilli(c.LastSeen)}
	}
	return out, nil
}

// PutKV stores key=value in namespace on every name server of every IDC.
// The error joins every name server's failure.
func (a *Client) PutKV(ctx context.Context, namespace, key, value string) error {
	if err := a.conn.Running(); err != nil {
		return err
	}
	h := protocol.PutKVConfigRequestHeader{Namespace: namespace, Key: key, Value: value}
	return a.eachAddr(ctx, a.conn.NameServers(), func(addr string) error {
		return a.do(ctx, addr, req(protocol.PutKVConfig, h.Ext(), nil))
	})
}

// DeleteKV removes key from namespace on every name server of every IDC.
func (a *Client) DeleteKV(ctx context.Context, namespace, key string) error {
	if err := a.conn.Running(); err != nil {
		return err
	}
	h := protocol.DeleteKVConfigRequestHeader{Namespace: namespace, Key: key}
	return a.eachAddr(ctx, a.conn.NameServers(), func(addr string) error {
		return a.do(ctx, addr, req(protocol.DeleteKVConfig, h.Ext(), nil))
	})
}

// GetKV reads key from namespace on the first name server that answers. A
// missing key is a *ResponseError with CodeQueryNotFound.
func (a *Client) GetKV(ctx context.Context, namespace, key string) (string, error) {
	if err := a.conn.Running(); err != nil {
		return "", err
	}
	h := protocol.GetKVConfigRequestHeader{Namespace: namespace, Key: key}
	resp, err := a.conn.CallNameServer(ctx, req(protocol.GetKVConfig, h.Ext(), nil))
	if err != nil {
		return "", err
	}
	return resp.Ext["value"], nil
}

// KVList reads every key of namespace from the first name server that
// answers.
func (a *Client) KVList(ctx context.Context, namespace string) (map[string]string, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	h := protocol.GetKVListByNamespaceRequestHeader{Namespace: namespace}
	resp, err := a.conn.CallNameServer(ctx, req(protocol.GetKVListByNamespace, h.Ext(), nil))
	if err != nil {
		return nil, err
	}
	var t protocol.KVTable
	if err := json.Unmarshal(resp.Body, &t); err != nil {
		return nil, fmt.Errorf("zonemq client: KV list from %s: %w", resp.Addr, err)
	}
	if t.Table == nil {
		t.Table = map[string]string{}
	}
	return t.Table, nil
}

// SetOrderPolicy sets topic's order policy on every name server of every
// IDC.
func (a *Client) SetOrderPolicy(ctx context.Context, topic string, p client.OrderPolicy) error {
	if p != client.OrderAvailable && p != client.OrderStrict {
		return &client.ConfigError{Field: "OrderPolicy", Reason: fmt.Sprintf("%q is neither %q nor %q", p, client.OrderAvailable, client.OrderStrict)}
	}
	return a.PutKV(ctx, client.OrderPolicyNamespace, topic, string(p))
}

// readBrokers returns topic's route and its readable brokers. A topic the
// name servers do not know has none.
func (a *Client) readBrokers(ctx context.Context, topic string) (*client.TopicRoute, []client.BrokerRoute, error) {
	r, err := a.conn.Route(ctx, topic)
	if errors.Is(err, &client.ResponseError{Code: client.CodeTopicNotExist}) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var out []client.BrokerRoute
	for _, b := range r.Brokers {
		if b.Readable() {
			out = append(out, b)
		}
	}
	return r, out, nil
}

// req builds a request.
func req(code protocol.RequestCode, ext map[string]string, body []byte) client.Request {
	return client.Request{Code: int32(code), Ext: ext, Body: body}
}

// do sends req to addr and keeps the error only.
func (a *Client) do(ctx context.Context, addr string, r client.Request) error {
	_, err := a.conn.Call(ctx, addr, r)
	return err
}

// eachAddr runs fn for every address in parallel and joins the errors.
func (a *Client) eachAddr(ctx context.Context, addrs []string, fn func(addr string) error) error {
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(addr)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
