package remoting_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/zonemq/zonemq/internal/remoting"
)

// TestRemotingRealClientProducer serves rocketmq-client-go's producer from a
// remoting.Server: the client must accept our JSON responses (route body,
// send results) and our server must decode its requests. Only the producer
// path runs here; the consumer paths of the client have data races of their
// own that -race reports (the capture test exercises them without -race).
func TestRemotingRealClientProducer(t *testing.T) {
	rlog.SetLogLevel("error")
	s, err := remoting.NewServer(remoting.ServerOptions{Listen: "127.0.0.1:0"})
	mustNil(t, err)
	var (
		mu    sync.Mutex
		seen  = map[int32]*remoting.Command{}
		sends atomic.Int64
	)
	record := func(req *remoting.Command) {
		mu.Lock()
		defer mu.Unlock()
		seen[req.Code] = req
	}
	s.Handle(105, func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		record(req)
		resp := remoting.NewResponse(req, 0, "")
		resp.Body = []byte(fmt.Sprintf(`{"queueDatas":[{"brokerName":"broker-a","readQueueNums":2,"writeQueueNums":2,"perm":6,"topicSysFlag":0}],`+
			`"brokerDatas":[{"cluster":"DefaultCluster","brokerName":"broker-a","brokerAddrs":{"0":%q}}],"filterServerTable":{}}`, s.Addr()))
		return resp
	})
	send := func(_ context.Context, _ *remoting.Conn, req *remoting.Command) *remoting.Command {
		record(req)
		off := sends.Add(1) - 1
		resp := remoting.NewResponse(req, 0, "")
		resp.SetExt("msgId", fmt.Sprintf("7F00000100004DC7%016X", 1000+off))
		resp.SetExt("queueId", req.Ext("queueId")+req.Ext("e"))
		resp.SetExt("queueOffset", strconv.FormatInt(off, 10))
		return resp
	}
	s.Handle(10, send)
	s.Handle(320, send)
	go s.Serve()
	t.Cleanup(func() { s.Close() })

	p, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{s.Addr()}),
		producer.WithGroupName("interop_pg"), producer.WithInstanceName("interop-"+strconv.Itoa(int(time.Now().UnixNano()))),
		producer.WithRetry(0))
	mustNil(t, err)
	mustNil(t, p.Start())
	defer p.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	msg := primitive.NewMessage("InteropTopic", []byte("hello \x00 zonemq"))
	msg.WithTag("TagA")
	res, err := p.SendSync(ctx, msg)
	mustNil(t, err)
	if res.Status != primitive.SendOK || res.OffsetMsgID != "7F00000100004DC700000000000003E8" || res.QueueOffset != 0 {
		t.Fatalf("send result %+v", res)
	}
	res, err = p.SendSync(ctx, primitive.NewMessage("InteropTopic", []byte("b1")), primitive.NewMessage("InteropTopic", []byte("b2")))
	mustNil(t, err)
	if res.Status != primitive.SendOK || res.QueueOffset != 1 {
		t.Fatalf("batch send result %+v", res)
	}

	mu.Lock()
	defer mu.Unlock()
	if r := seen[105]; r == nil || r.Ext("topic") != "InteropTopic" || r.Language != "GO" || r.Version != 317 {
		t.Fatalf("route request %v", r)
	}
	if r := seen[10]; r == nil || string(r.Body) != "hello \x00 zonemq" || r.Ext("producerGroup") != "interop_pg" {
		t.Fatalf("send request %v", r)
	}
	if r := seen[320]; r == nil || r.Ext("b") != "InteropTopic" || r.Ext("m") != "true" {
		t.Fatalf("batch request %v", r)
	}
}
