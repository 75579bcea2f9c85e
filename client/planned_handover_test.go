package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/broker"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestPlannedBrokerRestartReplaysNothing: a clean stop of a broker is a
// planned hand-over. Its consumers must be able to commit what they
// consumed before it goes, so that stopping and starting it again
// redelivers nothing, nor does the fail-back after it
// (docs/disaster-recovery.md: a planned hand-over
// replays nothing; crashes stay at-least-once).
func TestPlannedBrokerRestartReplaysNothing(t *testing.T) {
	c := startCluster(t, 2)
	p := newProducer(t, clientConfig(c, 1))
	rec := newRecorder()
	newConsumer(t, clientConfig(c, 1), "PlannedG", "PlannedT", rec.handler("idc1"))
	newConsumer(t, clientConfig(c, 2), "PlannedG", "PlannedT", rec.handler("idc2"))
	keys, res := sendN(t, p, "PlannedT", "before", 20)
	testutil.Equal(t, res[0].IDC, "idc1")
	rec.waitAll(t, keys, 15*time.Second)

	// The stop hands idc1's consumer over to broker-idc2's queues (shared
	// with idc2's consumer), the start hands it back: every hand-over is
	// planned, so nothing may be read twice.
	c.StopBroker(1)
	during, res := sendN(t, p, "PlannedT", "during", 20)
	testutil.Equal(t, res[0].IDC, "idc2")
	rec.waitAll(t, during, 15*time.Second)
	keys = append(keys, during...)
	testutil.NoError(t, c.StartBroker(1))
	// Traffic returns to idc1's broker; everything sent is read once.
	var after []string
	testutil.Eventually(t, 15*time.Second, func() error {
		k := fmt.Sprintf("after-%d", len(after)+1)
		r, err := p.SendSync(context.Background(), &client.Message{Topic: "PlannedT", Keys: []string{k}, Body: []byte(k)})
		if err != nil {
			return err
		}
		after = append(after, k)
		if r.IDC != "idc1" {
			return fmt.Errorf("still sent to %s", r.IDC)
		}
		return nil
	})
	rec.waitAll(t, append(keys, after...), 15*time.Second)
	if rec.duplicates() > 0 {
		// Which message, read by whom, from where, when: what the next
		// look at this hand-over needs.
		ds := rec.deliveries()
		n := map[string]int{}
		for _, d := range ds {
			n[d.key]++
		}
		for _, d := range ds {
			if n[d.key] > 1 {
				t.Logf("delivered twice: %s by %s from %s queue %d offset %d at %s", d.key, d.consumer, d.msg.BrokerName,
					d.msg.QueueID, d.msg.QueueOffset, d.at.Format("15:04:05.000"))
			}
		}
	}
	testutil.Equal(t, rec.duplicates(), 0, "messages delivered twice across a clean broker restart")
}

// TestPlannedSwitchoverReplaysNothing: a switchover is planned too. The old
// master asks its consumers to commit before the new master takes the
// metadata, so reading on at the new master repeats nothing.
func TestPlannedSwitchoverReplaysNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "SwitchT"
	c := startReplicated(t, broker.ReplicationSync, topic)

	p := newProducer(t, clientConfig(c, 1))
	rec := newRecorder()
	newConsumer(t, clientConfig(c, 1), "SwitchG", topic, rec.handler("idc1"))
	keys, res := sendN(t, p, topic, "before", 20)
	testutil.Equal(t, res[0].BrokerName, devcluster.BrokerName(1))
	rec.waitAll(t, keys, 15*time.Second)

	adm, err := admin.New(admin.Config{ClientConfig: clientConfig(c, 1)})
	testutil.NoError(t, err, "admin.New")
	testutil.NoError(t, adm.Start(ctx))
	t.Cleanup(func() { adm.Shutdown(context.Background()) })
	_, err = adm.SwitchMaster(ctx, devcluster.BrokerName(1), 1, false, 5*time.Second)
	testutil.NoError(t, err, "switchover")

	var after []string
	testutil.Eventually(t, 20*time.Second, func() error {
		k := fmt.Sprintf("after-%d", len(after)+1)
		r, err := p.SendSync(ctx, &client.Message{Topic: topic, Keys: []string{k}, Body: []byte(k)})
		if err != nil {
			return err
		}
		after = append(after, k)
		if r.BrokerAddr != c.ReplicaAddr(1, 1) {
			return fmt.Errorf("still sent to %s", r.BrokerAddr)
		}
		return nil
	})
	rec.waitAll(t, append(keys, after...), 20*time.Second)
	testutil.Equal(t, rec.duplicates(), 0, "messages delivered twice across a switchover")
}

// startReplicated starts two IDCs whose broker groups each keep a replica
// in the other IDC (mode: sync or async), creates topic with 4 queues and
// waits until the replicas are in sync.
func startReplicated(t *testing.T, mode, topic string) *devcluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Options{IDCs: 2, Replicas: 2, Replication: mode,
		DataDir: t.TempDir(), Logger: testLogger()})
	testutil.NoError(t, err, "devcluster.Start")
	t.Cleanup(func() { c.Close() })
	createTopic(t, c, topic, 4)
	testutil.NoError(t, c.WaitReplicasInSync(ctx), "replicas in sync")
	return c
}
