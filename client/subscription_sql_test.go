package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestClientSubscribeSQL: a SQL92 subscription receives exactly the
// messages whose properties match; a bad expression fails SubscribeSQL.
func TestClientSubscribeSQL(t *testing.T) {
	c := startCluster(t, 1)
	createTopic(t, c, "SQLEvents", 2)
	cc := clientConfig(c, 1)
	p := newProducer(t, cc)
	rec := newRecorder()
	pc, err := client.NewPushConsumer(client.ConsumerConfig{ClientConfig: cc, Group: "SQLGroup", ConsumeFromWhere: client.ConsumeFromFirstOffset})
	testutil.NoError(t, err)
	var cfgErr *client.ConfigError
	testutil.True(t, errors.As(pc.SubscribeSQL("SQLEvents", "amount > 'x'", rec.handler("idc1")), &cfgErr), "a bad expression is a ConfigError")
	testutil.NoError(t, pc.SubscribeSQL("SQLEvents", "region IN ('eu', 'us') AND amount >= 100", rec.handler("idc1")))
	testutil.NoError(t, pc.Start(context.Background()))
	t.Cleanup(func() { pc.Shutdown(context.Background()) })

	var want []string
	regions := []string{"eu", "us", "ap"}
	for i := range 60 {
		key := fmt.Sprintf("sql-%d", i)
		props := map[string]string{"region": regions[i%3], "amount": fmt.Sprint(i * 5)}
		if i%10 == 9 {
			delete(props, "amount")
		}
		if i%3 != 2 && i%10 != 9 && i*5 >= 100 {
			want = append(want, key)
		}
		_, err := p.SendSync(context.Background(), &client.Message{Topic: "SQLEvents", Keys: []string{key}, Body: []byte(key), Properties: props})
		testutil.NoError(t, err, "send "+key)
	}
	// A last matching message per queue, sent after all the others: once
	// each is in, every earlier message of its queue has been filtered.
	var last []string
	for q := range 2 {
		key := fmt.Sprintf("sql-last-%d", q)
		last = append(last, key)
		_, err := p.SendOrderly(context.Background(), &client.Message{Topic: "SQLEvents", Keys: []string{key}, Body: []byte(key),
			Properties: map[string]string{"region": "eu", "amount": "1000"}},
			client.QueueSelectorFunc(func(qs []client.MessageQueue, _ *client.Message, _ any) client.MessageQueue { return qs[q%len(qs)] }), nil)
		testutil.NoError(t, err, "send "+key)
	}
	rec.waitAll(t, append(want, last...), 30*time.Second)
	testutil.Equal(t, len(rec.deliveries())-rec.duplicates(), len(want)+len(last), "only matching messages delivered")
}
