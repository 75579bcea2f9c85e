package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/broker"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/testutil"
)

// A half message is invisible until EndTransaction commits it; a rolled
// back one never shows; one left pending is checked with the group's
// TransactionChecker, whose commit makes it visible.
func TestProducerTransactions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Options{IDCs: 1, DataDir: t.TempDir(), Logger: testLogger(),
		Broker: func(_ int, o *broker.Options) {
			o.TransactionCheckInterval = 200 * time.Millisecond
			o.TransactionTimeout = 500 * time.Millisecond
		}})
	testutil.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	createTopic(t, c, "TxTopic", 2)

	var (
		mu      sync.Mutex
		checked = map[string]int{}
	)
	cc := clientConfig(c, 1)
	p, err := client.NewProducer(client.ProducerConfig{ClientConfig: cc, Group: "tx_pg",
		TransactionChecker: func(_ context.Context, half client.HalfMessage, m *client.MessageExt) client.TransactionState {
			mu.Lock()
			defer mu.Unlock()
			checked[string(m.Body)]++
			testutil.Equal(t, half.MsgID, m.MsgID, "the check names the message")
			return client.TransactionCommit
		}})
	testutil.NoError(t, err)
	testutil.NoError(t, p.Start(ctx))
	t.Cleanup(func() { p.Shutdown(context.Background()) })

	send := func(body string) client.HalfMessage {
		_, half, err := p.SendHalf(ctx, &client.Message{Topic: "TxTopic", Keys: []string{body}, Body: []byte(body)})
		testutil.NoError(t, err, body)
		return half
	}
	committed, rolledBack := send("committed"), send("rolled-back")
	send("checked")
	testutil.NoError(t, p.EndTransaction(ctx, committed, client.TransactionCommit, false))
	testutil.NoError(t, p.EndTransaction(ctx, rolledBack, client.TransactionRollback, false))

	rec := newRecorder()
	newConsumer(t, cc, "tx_cg", "TxTopic", rec.handler("c"))
	rec.waitAll(t, []string{"committed", "checked"}, 20*time.Second)
	mu.Lock()
	testutil.True(t, checked["checked"] >= 1, "the pending one was checked", checked)
	testutil.Equal(t, checked["committed"], 0, "a resolved one is not checked")
	mu.Unlock()
	// "rolled-back" was resolved at once, "checked" only at a check pass
	// after the transaction timeout: had the rollback committed it, it
	// would have arrived before "checked" did.
	testutil.Equal(t, len(rec.missing([]string{"rolled-back"})), 1, "rolled back: never delivered")
}
