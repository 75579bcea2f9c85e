package devcluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/broker"
	"github.com/zonemq/zonemq/internal/controller"
	"github.com/zonemq/zonemq/internal/testutil"
)

// With Controller, one voter per IDC elects the masters: stopping idc1's
// brokers makes the controller elect broker-idc1's replica, which takes
// writes; stopping and starting a name server keeps its voter's state.
func TestDevclusterController(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Options{IDCs: 3, Replicas: 2, Replication: broker.ReplicationSync, Controller: true,
		DataDir: t.TempDir(), ReadyTimeout: 30 * time.Second})
	testutil.NoError(t, err)
	defer c.Close()
	addrs := c.ControllerAddrs()
	testutil.Equal(t, len(addrs), 3, "one voter per IDC")
	cl := controller.NewClient(addrs)
	defer cl.Close()
	epochOf := func(group string) (int64, string, error) {
		for _, a := range addrs {
			st, err := cl.Status(ctx, a)
			if err != nil || !st.IsLeader {
				continue
			}
			for _, g := range st.Groups {
				if g.BrokerName == group {
					return g.Epoch, g.MasterAddr, nil
				}
			}
		}
		return 0, "", errors.New("no leader view of " + group)
	}
	epoch, master, err := epochOf(BrokerName(1))
	testutil.NoError(t, err)
	testutil.Equal(t, master, c.BrokerAddr(1), "idc1's broker is broker-idc1's master")

	adm, err := admin.New(admin.Config{ClientConfig: c.ClientConfig(2)})
	testutil.NoError(t, err)
	testutil.NoError(t, adm.Start(ctx))
	defer adm.Shutdown(ctx)
	c.StopBroker(1)
	testutil.Eventually(t, 30*time.Second, func() error {
		e, m, err := epochOf(BrokerName(1))
		if err != nil {
			return err
		}
		if e <= epoch || m != c.ReplicaAddr(1, 1) {
			return fmt.Errorf("broker-idc1 at epoch %d master %s", e, m)
		}
		return nil
	})
	// The elected master takes a topic and writes to it.
	testutil.Eventually(t, 30*time.Second, func() error {
		return adm.CreateTopic(ctx, admin.TopicSpec{Topic: "DevCtlTopic", Queues: 1,
			Brokers: []string{c.ReplicaAddr(1, 1), c.BrokerAddr(2), c.BrokerAddr(3)}})
	})
	p, err := client.NewProducer(client.ProducerConfig{ClientConfig: c.ClientConfig(1)})
	testutil.NoError(t, err)
	testutil.NoError(t, p.Start(ctx))
	defer p.Shutdown(ctx)
	testutil.Eventually(t, 30*time.Second, func() error {
		toIDC1 := client.QueueSelectorFunc(func(qs []client.MessageQueue, _ *client.Message, _ any) client.MessageQueue {
			for _, q := range qs {
				if q.BrokerName == BrokerName(1) {
					return q
				}
			}
			return qs[0]
		})
		res, err := p.SendOrderly(ctx, &client.Message{Topic: "DevCtlTopic", Body: []byte("x")}, toIDC1, nil)
		if err != nil {
			return err
		}
		if res.BrokerName != BrokerName(1) {
			r, _ := adm.TopicRoute(ctx, "DevCtlTopic")
			return fmt.Errorf("stored by %s, waiting for broker-idc1's new master (route %+v)", res.BrokerName, r)
		}
		return nil
	})

	// A voter stopped with its name server comes back with its state.
	c.StopNamesrv(3)
	testutil.NoError(t, c.StartNamesrv(3))
	testutil.Eventually(t, 30*time.Second, func() error {
		st, err := cl.Status(ctx, addrs[2])
		if err != nil {
			return err
		}
		if st.Leader == "" || len(st.Groups) != 3 {
			return fmt.Errorf("restarted voter sees leader %q and %d groups", st.Leader, len(st.Groups))
		}
		return nil
	})
}
