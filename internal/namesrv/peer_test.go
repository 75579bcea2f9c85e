package namesrv

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	rmqerrors "github.com/apache/rocketmq-client-go/v2/errors"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// rocketmqGoroutines lists the live goroutines running rocketmq-client-go
// code.
func rocketmqGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "rocketmq-client-go") {
			out = append(out, g)
		}
	}
	return out
}

// fakeBrokerServer is a remoting listener standing in for a broker's
// client port: it records the DELETE_TOPIC_IN_BROKER requests it gets.
type fakeBrokerServer struct {
	rs      *remoting.Server
	mu      sync.Mutex
	deleted []string
}

func startFakeBrokerServer(t *testing.T, ip string) *fakeBrokerServer {
	t.Helper()
	rs, err := remoting.NewServer(remoting.ServerOptions{Listen: ip + ":0"})
	testutil.NoError(t, err)
	f := &fakeBrokerServer{rs: rs}
	rs.Handle(int32(protocol.DeleteTopicInBroker), func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		f.mu.Lock()
		f.deleted = append(f.deleted, req.Ext("topic"))
		f.mu.Unlock()
		return remoting.NewResponse(req, int32(protocol.Success), "")
	})
	done := make(chan struct{})
	go func() { defer close(done); rs.Serve() }()
	t.Cleanup(func() { rs.Close(); <-done })
	return f
}

func (f *fakeBrokerServer) deletedTopics() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deleted)
}

// TestNamesrvOfficialClient: the real rocketmq-client-go (its admin
// package) reads routes from a zonemq name server — queue lists, the
// orderTopicConf, the cluster list, the topic list, TOPIC_NOT_EXIST — and
// DeleteTopic dials the broker address it decoded from the route, then
// deletes the topic in the name server.
//
// The producer package is not used here: its Start leaves a goroutine in
// an unstoppable 10 s sleep, so it could not be shut down at test end.
func TestNamesrvOfficialClient(t *testing.T) {
	rlog.SetLogLevel("error")
	// Registered first, so it runs last: after the admin is closed and the
	// name server and fake broker have closed their connections, no client
	// goroutine may be left.
	t.Cleanup(func() {
		testutil.Eventually(t, 5*time.Second, func() error {
			if gs := rocketmqGoroutines(); len(gs) > 0 {
				return fmt.Errorf("%d rocketmq-client-go goroutines still running, e.g.\n%s", len(gs), gs[0])
			}
			return nil
		})
	})

	ns := startNamesrv(t, "127.0.1.1", "idc1", nil)
	brokerA := startFakeBrokerServer(t, "127.0.1.1")
	a := newFakeBroker(t, "broker-a", brokerA.rs.Addr(), "idc1")
	b := newFakeBroker(t, "broker-b", "127.0.2.1:10911", "idc2")
	a.mustRegister(ns.Addr(), map[string]int{"TopicA": 4, "TopicOrder": 2, "TopicOnlyA": 1}, 1)
	b.mustRegister(ns.Addr(), map[string]int{"TopicA": 2}, 1)
	c := newClient(t)
	wantCode(t, putKV(t, c, ns.Addr(), protocol.OrderTopicConfigNamespace, "TopicOrder", "broker-a:3"), protocol.Success)

	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})))
	testutil.NoError(t, err, "NewAdmin")
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	queues := func(topic string) (string, error) {
		mqs, err := adm.FetchPublishMessageQueues(ctx, topic)
		if err != nil {
			return "", err
		}
		var items []string
		for _, mq := range mqs {
			items = append(items, fmt.Sprintf("%s#%d", mq.BrokerName, mq.QueueId))
		}
		return strings.Join(items, " "), nil
	}
	got, err := queues("TopicA")
	testutil.NoError(t, err, "FetchPublishMessageQueues TopicA")
	testutil.Equal(t, got, "broker-a#0 broker-a#1 broker-a#2 broker-a#3 broker-b#0 broker-b#1", "TopicA queues")
	// With an orderTopicConf the client builds its queues from it.
	got, err = queues("TopicOrder")
	testutil.NoError(t, err, "FetchPublishMessageQueues TopicOrder")
	testutil.Equal(t, got, "broker-a#0 broker-a#1 broker-a#2", "TopicOrder queues from orderTopicConf")

	_, err = queues("NoSuchTopic")
	if !errors.Is(err, rmqerrors.ErrTopicNotExist) {
		t.Fatalf("unknown topic: got %v, want ErrTopicNotExist", err)
	}

	clusters, err := adm.FetchClusterList("TopicA")
	testutil.NoError(t, err, "FetchClusterList")
	testutil.Equal(t, strings.Join(clusters, ","), "DefaultCluster", "clusters")

	list, err := adm.FetchAllTopicList(ctx)
	testutil.NoError(t, err, "FetchAllTopicList")
	slices.Sort(list.TopicList)
	testutil.Equal(t, strings.Join(list.TopicList, ","), "TopicA,TopicOnlyA,TopicOrder", "topic list")

	// DeleteTopic finds the broker from the route it decoded (the fake
	// broker's real address), deletes there, then in the name server.
	testutil.NoError(t, adm.DeleteTopic(ctx, admin.WithTopicDelete("TopicOnlyA")), "DeleteTopic")
	testutil.Equal(t, strings.Join(brokerA.deletedTopics(), ","), "TopicOnlyA", "topics deleted on the broker")
	_, resp := getRoute(t, c, ns.Addr(), "TopicOnlyA", nil)
	wantCode(t, resp, protocol.TopicNotExist)
}
