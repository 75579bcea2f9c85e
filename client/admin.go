package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/idc"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// AdminConfig configures an Admin.
type AdminConfig struct {
	ClientConfig
}

// Admin manages topics and inspects the cluster: brokers by IDC, routes,
// group offsets, live clients, the name servers' KV config. It is safe for
// concurrent use.
type Admin struct {
	c *core
}

// NewAdmin validates cfg and returns an admin client that is not started.
func NewAdmin(cfg AdminConfig) (*Admin, error) {
	c, err := newCore(cfg.ClientConfig, "")
	if err != nil {
		return nil, err
	}
	return &Admin{c: c}, nil
}

// Start learns the name servers.
func (a *Admin) Start(ctx context.Context) error { return a.c.start(ctx) }

// Shutdown closes the admin's connections. It is idempotent.
func (a *Admin) Shutdown(ctx context.Context) error {
	_, err := a.c.stop(ctx)
	return err
}

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
func (a *Admin) Cluster(ctx context.Context) ([]BrokerStatus, error) {
	if err := a.c.running(); err != nil {
		return nil, err
	}
	resp, addr, err := a.nsInvoke(ctx, protocol.GetBrokerClusterInfo, nil, nil)
	if err != nil {
		return nil, err
	}
	if resp.Code != int32(protocol.Success) {
		return nil, responseError(protocol.GetBrokerClusterInfo, addr, resp)
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
func (a *Admin) CreateTopic(ctx context.Context, spec TopicSpec) error {
	if err := a.c.running(); err != nil {
		return err
	}
	if err := protocol.ValidateTopic(spec.Topic); err != nil {
		return &ConfigError{"TopicSpec.Topic", err.Error()}
	}
	queues := orDefaultInt(spec.Queues, 4)
	perm := orDefaultInt(spec.Perm, protocol.PermReadWrite)
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
			return fmt.Errorf("%w: no live broker to create %s on", ErrNoRoute, spec.Topic)
		}
	}
	h := protocol.CreateTopicRequestHeader{
		Topic: spec.Topic, DefaultTopic: protocol.AutoCreateTopicKey, ReadQueueNums: int32(queues), WriteQueueNums: int32(queues),
		Perm: int32(perm), TopicFilterType: "SINGLE_TAG", Order: spec.Order,
	}
	return a.eachAddr(ctx, addrs, func(addr string) error {
		resp, err := a.c.invoke(ctx, addr, request(protocol.UpdateAndCreateTopic, h.Ext(), nil), a.c.cfg.RequestTimeout)
		if err != nil {
			return err
		}
		if resp.Code != int32(protocol.Success) {
			return responseError(protocol.UpdateAndCreateTopic, addr, resp)
		}
		return nil
	})
}

// DeleteTopic deletes a topic from every broker hosting it
// (DELETE_TOPIC_IN_BROKER) and from every name server of every IDC
// (DELETE_TOPIC_IN_NAMESRV). The error joins every failure.
func (a *Admin) DeleteTopic(ctx context.Context, topic string) error {
	if err := a.c.running(); err != nil {
		return err
	}
	r, err := a.c.routes.fetch(ctx, topic)
	if err != nil {
		return err
	}
	var addrs []string
	for _, b := range r.brokers {
		if m := b.master(); m != "" {
			addrs = append(addrs, m)
		}
	}
	h := protocol.TopicRequestHeader{Topic: topic}
	errB := a.eachAddr(ctx, addrs, func(addr string) error {
		return a.expectSuccess(ctx, addr, protocol.DeleteTopicInBroker, h.Ext(), nil)
	})
	nh := protocol.DeleteTopicFromNamesrvRequestHeader{Topic: topic}
	errN := a.eachAddr(ctx, a.c.ns.addrs(), func(addr string) error {
		return a.expectSuccess(ctx, addr, protocol.DeleteTopicInNamesrv, nh.Ext(), nil)
	})
	return errors.Join(errB, errN)
}

// TopicRoute is a topic's route: its brokers with their IDC and queues.
type TopicRoute struct {
	Topic          string
	OrderTopicConf string
	Brokers        []BrokerRoute
}

// BrokerRoute is one broker of a route.
type BrokerRoute struct {
	Name    string
	Cluster string
	IDC     string
	// Addrs maps broker id (0 = master) to address.
	Addrs       map[int64]string
	ReadQueues  int
	WriteQueues int
	Perm        int
}

// TopicRoute asks a name server for topic's route (all IDCs, unless
// ZoneMode is set).
func (a *Admin) TopicRoute(ctx context.Context, topic string) (*TopicRoute, error) {
	if err := a.c.running(); err != nil {
		return nil, err
	}
	r, err := a.c.routes.fetch(ctx, topic)
	if err != nil {
		return nil, err
	}
	if r.notFound {
		return nil, &ResponseError{Op: protocol.GetRouteInfoByTopic.String(), Code: CodeTopicNotExist, Remark: "no route for " + topic}
	}
	out := &TopicRoute{Topic: topic, OrderTopicConf: r.data.OrderTopicConf}
	for _, qd := range r.data.QueueDatas {
		br := BrokerRoute{Name: qd.BrokerName, ReadQueues: qd.ReadQueueNums, WriteQueues: qd.WriteQueueNums, Perm: qd.Perm}
		if b := r.brokers[qd.BrokerName]; b != nil {
			br.Cluster, br.IDC, br.Addrs = b.cluster, b.idc, b.addrs
		}
		out.Brokers = append(out.Brokers, br)
	}
	sort.Slice(out.Brokers, func(i, j int) bool { return out.Brokers[i].Name < out.Brokers[j].Name })
	return out, nil
}

// TopicList lists every topic the name servers know (GET_ALL_TOPIC_LIST_FROM_NAMESERVER).
func (a *Admin) TopicList(ctx context.Context) ([]string, error) {
	if err := a.c.running(); err != nil {
		return nil, err
	}
	resp, addr, err := a.nsInvoke(ctx, protocol.GetAllTopicListFromNameServer, nil, nil)
	if err != nil {
		return nil, err
	}
	if resp.Code != int32(protocol.Success) {
		return nil, responseError(protocol.GetAllTopicListFromNameServer, addr, resp)
	}
	var tl protocol.TopicList
	if err := json.Unmarshal(resp.Body, &tl); err != nil {
		return nil, fmt.Errorf("zonemq client: topic list from %s: %w", addr, err)
	}
	sort.Strings(tl.TopicList)
	return tl.TopicList, nil
}

// QueueOffset is a group's position in one queue.
type QueueOffset struct {
	Queue      MessageQueue
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
func (a *Admin) GroupOffsets(ctx context.Context, group, topic string) ([]QueueOffset, error) {
	if err := a.c.running(); err != nil {
		return nil, err
	}
	r, err := a.c.routes.fetch(ctx, topic)
	if err != nil {
		return nil, err
	}
	var (
		mu  sync.Mutex
		out []QueueOffset
		wg  sync.WaitGroup
	)
	for _, rb := range r.readBrokers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := rb.broker.master()
			ids, lerr := a.c.consumerList(ctx, addr, group)
			eligible := idc.EligibleConsumers(rb.broker.idc, ids, r.idcHasLiveBroker)
			for q := 0; q < rb.queues; q++ {
				mq := MessageQueue{Topic: topic, BrokerName: rb.broker.name, QueueID: q}
				qo := QueueOffset{Queue: mq, BrokerAddr: addr, IDC: rb.broker.idc, Committed: -1, Err: lerr}
				if lerr == nil {
					for _, id := range eligible {
						if s, e := idc.AllocateAveragely(rb.queues, eligible, id); q >= s && q < e {
							qo.Owner = id
							break
						}
					}
					off, err := a.c.queryOffset(ctx, addr, group, mq)
					if err != nil && !errors.Is(err, ErrNoOffset) {
						qo.Err = err
					} else if err == nil {
						qo.Committed = off
					}
					if qo.Max, err = a.c.queueOffset(ctx, protocol.GetMaxOffset, addr, mq); err != nil && qo.Err == nil {
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
func (a *Admin) Clients(ctx context.Context, idcName string) ([]ClientInfo, error) {
	if err := a.c.running(); err != nil {
		return nil, err
	}
	ext := protocol.ExtWriter{}.OptStr(protocol.ExtClientIDC, idcName)
	resp, addr, err := a.nsInvoke(ctx, protocol.GetClientsByIDC, ext, nil)
	if err != nil {
		return nil, err
	}
	if resp.Code != int32(protocol.Success) {
		return nil, responseError(protocol.GetClientsByIDC, addr, resp)
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
func (a *Admin) PutKV(ctx context.Context, namespace, key, value string) error {
	if err := a.c.running(); err != nil {
		return err
	}
	h := protocol.PutKVConfigRequestHeader{Namespace: namespace, Key: key, Value: value}
	return a.eachAddr(ctx, a.c.ns.addrs(), func(addr string) error {
		return a.expectSuccess(ctx, addr, protocol.PutKVConfig, h.Ext(), nil)
	})
}

// DeleteKV removes key from namespace on every name server of every IDC.
func (a *Admin) DeleteKV(ctx context.Context, namespace, key string) error {
	if err := a.c.running(); err != nil {
		return err
	}
	h := protocol.DeleteKVConfigRequestHeader{Namespace: namespace, Key: key}
	return a.eachAddr(ctx, a.c.ns.addrs(), func(addr string) error {
		return a.expectSuccess(ctx, addr, protocol.DeleteKVConfig, h.Ext(), nil)
	})
}

// GetKV reads key from namespace on the first name server that answers. A
// missing key is a *ResponseError with CodeQueryNotFound.
func (a *Admin) GetKV(ctx context.Context, namespace, key string) (string, error) {
	if err := a.c.running(); err != nil {
		return "", err
	}
	h := protocol.GetKVConfigRequestHeader{Namespace: namespace, Key: key}
	resp, addr, err := a.nsInvoke(ctx, protocol.GetKVConfig, h.Ext(), nil)
	if err != nil {
		return "", err
	}
	if resp.Code != int32(protocol.Success) {
		return "", responseError(protocol.GetKVConfig, addr, resp)
	}
	return resp.Ext("value"), nil
}

// KVList reads every key of namespace from the first name server that
// answers.
func (a *Admin) KVList(ctx context.Context, namespace string) (map[string]string, error) {
	if err := a.c.running(); err != nil {
		return nil, err
	}
	h := protocol.GetKVListByNamespaceRequestHeader{Namespace: namespace}
	resp, addr, err := a.nsInvoke(ctx, protocol.GetKVListByNamespace, h.Ext(), nil)
	if err != nil {
		return nil, err
	}
	if resp.Code != int32(protocol.Success) {
		return nil, responseError(protocol.GetKVListByNamespace, addr, resp)
	}
	var t protocol.KVTable
	if err := json.Unmarshal(resp.Body, &t); err != nil {
		return nil, fmt.Errorf("zonemq client: KV list from %s: %w", addr, err)
	}
	if t.Table == nil {
		t.Table = map[string]string{}
	}
	return t.Table, nil
}

// nsInvoke sends one request to the best name server, failing over.
func (a *Admin) nsInvoke(ctx context.Context, code protocol.RequestCode, ext map[string]string, body []byte) (*remoting.Command, string, error) {
	return a.c.ns.invoke(ctx, func() *remoting.Command { return request(code, ext, body) })
}

func (a *Admin) expectSuccess(ctx context.Context, addr string, code protocol.RequestCode, ext map[string]string, body []byte) error {
	resp, err := a.c.invoke(ctx, addr, request(code, ext, body), a.c.cfg.RequestTimeout)
	if err != nil {
		return err
	}
	if resp.Code != int32(protocol.Success) {
		return responseError(code, addr, resp)
	}
	return nil
}

// eachAddr runs fn for every address in parallel and joins the errors.
func (a *Admin) eachAddr(ctx context.Context, addrs []string, fn func(addr string) error) error {
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
