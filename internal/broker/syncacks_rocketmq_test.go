package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/zonemq/zonemq/internal/store"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestBrokerSyncFlushRocketMQClient: the stock rocketmq-client-go producer
// against a broker with --flush sync, whose answers leave in groups after
// each fsync (not in request order): synchronous and asynchronous sends
// and a batch are all acknowledged SEND_OK, and every answered message is
// durable.
func TestBrokerSyncFlushRocketMQClient(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-a", ns.Addr())
	opts.Flush = store.FlushSync
	s := startBroker(t, opts)
	raw := newRawClient(t)
	const topic = "SyncRMQ"
	createTopic(t, raw, s.Addr(), topic, 4)
	waitRoute(t, raw, ns.Addr(), topic, s)
	p := startRocketMQProducer(t, ns.Addr(), "sync_rmq_"+runToken, "SyncRMQ")
	ctx := context.Background()

	for i := range 20 {
		res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(fmt.Sprintf("sync-%d", i))))
		testutil.NoError(t, err, "SendSync")
		testutil.Equal(t, res.Status, primitive.SendOK, "SendSync status")
	}
	const async = 200
	var wg sync.WaitGroup
	errs := make(chan error, async)
	for i := range async {
		wg.Add(1)
		err := p.SendAsync(ctx, func(_ context.Context, res *primitive.SendResult, err error) {
			defer wg.Done()
			if err == nil && res.Status != primitive.SendOK {
				err = fmt.Errorf("status %d", res.Status)
			}
			errs <- err
		}, primitive.NewMessage(topic, []byte(fmt.Sprintf("async-%d", i))))
		if err != nil {
			wg.Done()
			errs <- err
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		testutil.NoError(t, err, "SendAsync")
	}
	batch := []*primitive.Message{primitive.NewMessage(topic, []byte("b-0")), primitive.NewMessage(topic, []byte("b-1"))}
	res, err := p.SendSync(ctx, batch...)
	testutil.NoError(t, err, "batch SendSync")
	testutil.Equal(t, res.Status, primitive.SendOK, "batch status")
	testutil.True(t, s.store.FlushedOffset() >= s.store.CommitLogMaxOffset(), "every answered message is durable")
}
