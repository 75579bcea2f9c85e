package client

import (
	"context"
	"sort"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Conn is the SDK's connection core for tools that speak RocketMQ's
// remoting protocol themselves, as package client/admin does: the name
// servers (learnt from the address servers, failing over), topic routes,
// and single requests to any server, sent with the client's TLS, ACL
// credentials and cluster secret. Producers and consumers each have their
// own; a Conn shares nothing with them.
//
// Request codes are RocketMQ's (docs/protocol.md lists those zonemq serves).
type Conn struct {
	c *core
}

// NewConn validates cfg and returns a Conn that is not started.
func NewConn(cfg ClientConfig) (*Conn, error) {
	c, err := newCore(cfg, "")
	if err != nil {
		return nil, err
	}
	return &Conn{c: c}, nil
}

// Start learns the name servers.
func (n *Conn) Start(ctx context.Context) error { return n.c.start(ctx) }

// Shutdown closes every connection. It is idempotent.
func (n *Conn) Shutdown(ctx context.Context) error {
	_, err := n.c.stop(ctx)
	return err
}

// Running is nil while the Conn runs, else ErrNotStarted or ErrShutdown.
func (n *Conn) Running() error { return n.c.running() }

// NameServers lists the name servers of every IDC, own IDC first.
func (n *Conn) NameServers() []string { return n.c.ns.addrs() }

// Request is one remoting request.
type Request struct {
	Code int32 // RocketMQ's request code
	Ext  map[string]string
	Body []byte
	// Timeout bounds the wait for the answer; zero means
	// ClientConfig.RequestTimeout.
	Timeout time.Duration
}

// Response is a server's SUCCESS answer to a Request.
type Response struct {
	Addr string // who answered
	Ext  map[string]string
	Body []byte
}

// Call sends req to the server at addr. An answer other than SUCCESS is a
// *ResponseError; a transport failure wraps ErrTimeout or ErrUnreachable.
func (n *Conn) Call(ctx context.Context, addr string, req Request) (*Response, error) {
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = n.c.cfg.RequestTimeout
	}
	resp, err := n.c.invoke(ctx, addr, request(protocol.RequestCode(req.Code), req.Ext, req.Body), timeout)
	if err != nil {
		return nil, err
	}
	if resp.Code != int32(protocol.Success) {
		return nil, responseError(protocol.RequestCode(req.Code), addr, resp)
	}
	return &Response{Addr: addr, Ext: resp.ExtFields, Body: resp.Body}, nil
}

// CallNameServer sends req to the best name server, failing over to the
// others (req.Timeout is not used: each try waits RequestTimeout).
func (n *Conn) CallNameServer(ctx context.Context, req Request) (*Response, error) {
	resp, addr, err := n.c.ns.invoke(ctx, func() *remoting.Command { return request(protocol.RequestCode(req.Code), req.Ext, req.Body) })
	if err != nil {
		return nil, err
	}
	if resp.Code != int32(protocol.Success) {
		return nil, responseError(protocol.RequestCode(req.Code), addr, resp)
	}
	return &Response{Addr: addr, Ext: resp.ExtFields, Body: resp.Body}, nil
}

// TopicRoute is a topic's route as the name servers give it: its brokers,
// with their IDC and queues.
type TopicRoute struct {
	Topic          string
	OrderTopicConf string
	Brokers        []BrokerRoute // sorted by name

	r *route
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

	b *brokerInfo
}

// Master is the broker group's master address ("" while it has none).
func (b BrokerRoute) Master() string { return b.Addrs[protocol.MasterID] }

// Readable reports whether consumers can read the broker's queues: it has
// readable queues and a master, or a replica while the group has no master.
func (b BrokerRoute) Readable() bool {
	return b.b != nil && b.b.readAddr() != "" && protocol.Readable(b.Perm) && b.ReadQueues > 0
}

// ReadAddr is where the broker's queues are read.
func (b BrokerRoute) ReadAddr() string {
	if b.b == nil {
		return ""
	}
	return b.b.readAddr()
}

// IDCHasLiveBroker reports whether the route has a readable and writable
// broker of IDC x with a master: whether x's consumers keep their own
// queues (the input of the IDC takeover rule).
func (t *TopicRoute) IDCHasLiveBroker(x string) bool { return t.r.idcHasLiveBroker(x) }

// Route returns topic's route, fresh from a name server. A topic the name
// servers do not know is a *ResponseError with CodeTopicNotExist.
func (n *Conn) Route(ctx context.Context, topic string) (*TopicRoute, error) {
	r, err := n.c.routes.fetch(ctx, topic)
	if err != nil {
		return nil, err
	}
	return topicRoute(topic, r)
}

// CachedRoute is Route from the Conn's route cache, which is refreshed in
// the background (every RouteRefreshInterval, and every 500 ms while a
// broker of it is silent); the first call for a topic asks a name server.
func (n *Conn) CachedRoute(ctx context.Context, topic string) (*TopicRoute, error) {
	r, err := n.c.routes.get(ctx, topic)
	if err != nil {
		return nil, err
	}
	return topicRoute(topic, r)
}

func topicRoute(topic string, r *route) (*TopicRoute, error) {
	if r.notFound {
		return nil, &ResponseError{Op: protocol.GetRouteInfoByTopic.String(), Code: CodeTopicNotExist, Remark: "no route for " + topic}
	}
	out := &TopicRoute{Topic: topic, OrderTopicConf: r.data.OrderTopicConf, r: r}
	for _, qd := range r.data.QueueDatas {
		br := BrokerRoute{Name: qd.BrokerName, ReadQueues: qd.ReadQueueNums, WriteQueues: qd.WriteQueueNums, Perm: qd.Perm}
		if b := r.brokers[qd.BrokerName]; b != nil {
			br.Cluster, br.IDC, br.Addrs, br.b = b.cluster, b.idc, b.addrs, b
		}
		out.Brokers = append(out.Brokers, br)
	}
	sort.Slice(out.Brokers, func(i, j int) bool { return out.Brokers[i].Name < out.Brokers[j].Name })
	return out, nil
}

// Pull reads up to max messages of queue queueID of broker b from offset,
// every tag, as group, committing nothing.
func (n *Conn) Pull(ctx context.Context, b BrokerRoute, topic string, queueID int, group string, offset int64, max int) (*PullResult, error) {
	sub, err := newSubscription(topic, protocol.SubscribeAll, nil)
	if err != nil {
		return nil, err
	}
	mq := MessageQueue{Topic: topic, BrokerName: b.Name, QueueID: queueID}
	return n.c.pull(ctx, b.b, pullRequest{group: group, mq: mq, offset: offset, maxNums: max, commitOffset: -1, sub: sub},
		n.c.cfg.RequestTimeout)
}

// CommittedOffset is group's committed offset of mq on the broker at addr,
// or ErrNoOffset.
func (n *Conn) CommittedOffset(ctx context.Context, addr, group string, mq MessageQueue) (int64, error) {
	return n.c.queryOffset(ctx, addr, group, mq)
}

// MaxOffset is the offset the next message stored in mq gets.
func (n *Conn) MaxOffset(ctx context.Context, addr string, mq MessageQueue) (int64, error) {
	return n.c.queueOffset(ctx, protocol.GetMaxOffset, addr, mq)
}

// MinOffset is the oldest offset mq still holds.
func (n *Conn) MinOffset(ctx context.Context, addr string, mq MessageQueue) (int64, error) {
	return n.c.queueOffset(ctx, protocol.GetMinOffset, addr, mq)
}

// ConsumerIDs lists group's consumers as the broker at addr sees them.
func (n *Conn) ConsumerIDs(ctx context.Context, addr, group string) ([]string, error) {
	return n.c.consumerList(ctx, addr, group)
}

// DecodeMessages decodes stored messages (a pull, query or view answer's
// body), stamped with the broker from when it is not nil.
func DecodeMessages(body []byte, from *BrokerRoute) ([]*MessageExt, error) {
	var b *brokerInfo
	if from != nil {
		b = from.b
	}
	return decodeMessages(body, b)
}
