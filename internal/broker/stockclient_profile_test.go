package broker

import (
	"context"
	"os"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/zonemq/zonemq/internal/store"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestProfileStockClientSend profiles the broker under rocketmq-client-go's
// SendAsync, 64 in flight, 1 KiB bodies (issue 25's stock-client path):
// ZONEMQ_PROFILE=FILE writes a CPU profile of the whole process (client
// and broker) to FILE; focus on internal/broker and internal/remoting to
// see the broker's share. A measurement, skipped without the variable.
func TestProfileStockClientSend(t *testing.T) {
	path := os.Getenv("ZONEMQ_PROFILE")
	if path == "" {
		t.Skip("a measurement: set ZONEMQ_PROFILE=FILE")
	}
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-prof", ns.Addr())
	opts.Flush = store.FlushAsync
	s := startBroker(t, opts)
	raw := newRawClient(t)
	createTopic(t, raw, s.Addr(), "ProfTopic", 4)
	waitRoute(t, raw, ns.Addr(), "ProfTopic", s)
	p := startRocketMQProducer(t, ns.Addr(), "prof_pg", "P", producer.WithRetry(2))
	body := make([]byte, 1024)
	send := func(n int) {
		window := make(chan struct{}, 64)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			window <- struct{}{}
			wg.Add(1)
			err := p.SendAsync(context.Background(), func(_ context.Context, _ *primitive.SendResult, err error) {
				if err != nil {
					t.Error(err)
				}
				<-window
				wg.Done()
			}, primitive.NewMessage("ProfTopic", body))
			testutil.NoError(t, err)
		}
		wg.Wait()
	}
	send(2000) // warm up
	f, err := os.Create(path)
	testutil.NoError(t, err)
	defer f.Close()
	testutil.NoError(t, pprof.StartCPUProfile(f))
	start := time.Now()
	const n = 100000
	send(n)
	pprof.StopCPUProfile()
	t.Logf("%d sends in %v (%.0f/s)", n, time.Since(start), n/time.Since(start).Seconds())
}
