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

// TestClientDeliverAt: a message with DeliverAt reaches the consumer at or
// after that time, never before; bad combinations fail before any send.
func TestClientDeliverAt(t *testing.T) {
	c := startCluster(t, 1)
	createTopic(t, c, "TimedEvents", 2)
	cc := clientConfig(c, 1)
	p := newProducer(t, cc)
	rec := newRecorder()
	newConsumer(t, cc, "TimedGroup", "TimedEvents", rec.handler("idc1"))

	due := map[string]time.Time{}
	var keys []string
	for i := range 20 {
		key := fmt.Sprintf("timed-%d", i)
		at := time.Now().Add(time.Duration(300+40*(19-i)) * time.Millisecond)
		due[key] = at
		keys = append(keys, key)
		_, err := p.SendSync(context.Background(), &client.Message{Topic: "TimedEvents", Keys: []string{key}, Body: []byte(key), DeliverAt: at})
		testutil.NoError(t, err, "send "+key)
	}
	rec.waitAll(t, keys, 20*time.Second)
	for _, d := range rec.deliveries() {
		if d.msg.StoreTimestamp.UnixMilli() < due[d.key].UnixMilli() {
			t.Fatalf("%s stored %v before its DeliverAt", d.key, due[d.key].Sub(d.msg.StoreTimestamp))
		}
		if d.at.Before(due[d.key]) {
			t.Fatalf("%s consumed %v before its DeliverAt", d.key, due[d.key].Sub(d.at))
		}
	}

	for _, bad := range [][]*client.Message{
		{{Topic: "TimedEvents", Body: []byte("x"), DeliverAt: time.Now().Add(time.Second), DelayLevel: 2}},
		{{Topic: "TimedEvents", Body: []byte("x"), DeliverAt: time.Now().Add(time.Second)}, {Topic: "TimedEvents", Body: []byte("y")}},
	} {
		_, err := p.SendSync(context.Background(), bad...)
		testutil.True(t, errors.Is(err, client.ErrInvalidMessage), fmt.Sprintf("refused locally: %v", err))
	}
	_, err := p.SendSync(context.Background(), &client.Message{Topic: "TimedEvents", Body: []byte("far"), DeliverAt: time.Now().Add(100 * 24 * time.Hour)})
	var re *client.ResponseError
	testutil.True(t, errors.As(err, &re) && re.Code == client.CodeMessageIllegal, fmt.Sprintf("beyond the broker's bound: %v", err))
}
