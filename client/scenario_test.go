package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestClientS1LocalTraffic: with nothing failed, every client uses its own
// IDC's name server and brokers, for sending and for consuming.
func TestClientS1LocalTraffic(t *testing.T) {
	c := startCluster(t, 2)
	const topic = "S1Topic"
	createTopic(t, c, topic, 4)
	rec := newRecorder()
	var producers []*client.Producer
	var consumers []*client.PushConsumer
	for n := 1; n <= 2; n++ {
		producers = append(producers, newProducer(t, clientConfig(c, n)))
		consumers = append(consumers, newConsumer(t, clientConfig(c, n), "S1Group", topic, rec.handler(devcluster.IDCName(n))))
	}
	// Each consumer holds exactly its own IDC's broker's queues.
	testutil.Eventually(t, 10*time.Second, func() error {
		for i, pc := range consumers {
			n := i + 1
			own := queuesOf(pc, topic, devcluster.BrokerName(n))
			if len(own) != 4 || len(pc.Queues()) != 4+1 { // + the retry queue on its own broker
				return fmt.Errorf("idc%d consumer holds %v", n, sortedQueues(pc.Queues()))
			}
		}
		return nil
	})
	var keys []string
	for i, p := range producers {
		n := i + 1
		testutil.Equal(t, p.NameServer(), c.NamesrvAddr(n), "producer's name server")
		testutil.Equal(t, consumers[i].NameServer(), c.NamesrvAddr(n), "consumer's name server")
		ks, results := sendN(t, p, topic, fmt.Sprintf("S1-p%d", n), 20)
		keys = append(keys, ks...)
		for _, r := range results {
			if r.IDC != devcluster.IDCName(n) || r.BrokerName != devcluster.BrokerName(n) || r.BrokerAddr != c.BrokerAddr(n) {
				t.Fatalf("idc%d producer's message went to %s %s (%s)", n, r.BrokerName, r.BrokerAddr, r.IDC)
			}
		}
	}
	rec.waitAll(t, keys, 10*time.Second)
	for _, d := range rec.deliveries() {
		if d.msg.IDC != d.consumer || d.msg.BrokerName != "broker-"+d.consumer || d.msg.BrokerAddr == "" {
			t.Fatalf("%s consumer got %s from %s@%s (%s)", d.consumer, d.key, d.msg.BrokerName, d.msg.BrokerAddr, d.msg.IDC)
		}
	}
	if n := rec.duplicates(); n != 0 {
		t.Fatalf("%d duplicates with nothing failing", n)
	}
}

// TestClientS2BrokerDownThenS5: idc1's broker stops while idc1's producer
// sends continuously: its messages land on idc2 with no error, and idc1's
// consumer reads there. When the broker returns, traffic goes back to idc1
// without restarting any client, and nothing is lost.
func TestClientS2BrokerDownThenS5(t *testing.T) {
	c := startCluster(t, 2)
	const topic = "S2Topic"
	createTopic(t, c, topic, 4)
	rec := newRecorder()
	c1 := newConsumer(t, clientConfig(c, 1), "S2Group", topic, rec.handler("idc1"))
	c2 := newConsumer(t, clientConfig(c, 2), "S2Group", topic, rec.handler("idc2"))
	p1 := newProducer(t, clientConfig(c, 1))
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(queuesOf(c1, topic, devcluster.BrokerName(1))) != 4 {
			return fmt.Errorf("idc1 consumer holds %v", sortedQueues(c1.Queues()))
		}
		return nil
	})

	load := startLoad(p1, topic, "S2", 5*time.Millisecond)
	defer load.halt()
	testutil.Eventually(t, 5*time.Second, func() error {
		if _, ok := load.firstAfter(time.Time{}, "idc1"); !ok {
			return fmt.Errorf("no send to idc1 yet")
		}
		return nil
	})

	t0 := time.Now()
	c.StopBroker(1)
	stopped := time.Since(t0)
	testutil.Eventually(t, 10*time.Second, func() error {
		if _, ok := load.firstAfter(t0, "idc2"); !ok {
			return fmt.Errorf("no send landed on idc2 yet")
		}
		return nil
	})
	first, _ := load.firstAfter(t0, "idc2")
	t.Logf("S2 RTO (broker stop begun → first idc1 send stored on idc2): %v (StopBroker itself took %v)", first.at.Sub(t0), stopped)
	// idc1's consumer reads idc2's broker too (its own IDC has no broker).
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(queuesOf(c1, topic, devcluster.BrokerName(2))) == 0 {
			return fmt.Errorf("idc1 consumer holds no idc2 queue: %v", sortedQueues(c1.Queues()))
		}
		for _, d := range rec.deliveries() {
			if d.consumer == "idc1" && d.msg.IDC == "idc2" && d.at.After(t0) {
				return nil
			}
		}
		return fmt.Errorf("idc1 consumer has read nothing from idc2")
	})

	// S5: idc1's broker returns; sends and idc1's consumer go back to it.
	t1 := time.Now()
	testutil.NoError(t, c.StartBroker(1))
	testutil.Eventually(t, 15*time.Second, func() error {
		if _, ok := load.firstAfter(t1, "idc1"); !ok {
			return fmt.Errorf("no send back on idc1 yet")
		}
		if len(queuesOf(c1, topic, devcluster.BrokerName(1))) != 4 || len(queuesOf(c1, topic, devcluster.BrokerName(2))) != 0 {
			return fmt.Errorf("idc1 consumer holds %v", sortedQueues(c1.Queues()))
		}
		// idc2's consumer takes back the idc2 queues idc1's consumer gave
		// up, without waiting for its route refresh.
		if len(queuesOf(c2, topic, devcluster.BrokerName(2))) != 4 {
			return fmt.Errorf("idc2 consumer holds %v", sortedQueues(c2.Queues()))
		}
		return nil
	})
	t.Logf("S5 hand-back (broker start → each consumer holds exactly its own IDC's queues): %v", time.Since(t1))
	back, _ := load.firstAfter(t1, "idc1")
	t.Logf("S5 fail-back (broker start → first send stored on idc1 again): %v", back.at.Sub(t1))
	load.halt()
	keys, _, errs := load.snapshot()
	testutil.Equal(t, errs, 0, "application-visible send errors")
	rec.waitAll(t, keys, 15*time.Second)
	t.Logf("S2/S5: %d messages sent, 0 errors, %d duplicates", len(keys), rec.duplicates())
}

// TestClientS3BrokerAndNamesrvDownThenS5: idc1 loses its broker and its
// name server. idc1's address server stops listing the name server within
// two probe intervals; idc1's clients go through idc2's name server and
// brokers; when idc1 returns they come back.
func TestClientS3BrokerAndNamesrvDownThenS5(t *testing.T) {
	c := startCluster(t, 2)
	const topic = "S3Topic"
	createTopic(t, c, topic, 4)
	rec := newRecorder()
	c1 := newConsumer(t, clientConfig(c, 1), "S3Group", topic, rec.handler("idc1"))
	newConsumer(t, clientConfig(c, 2), "S3Group", topic, rec.handler("idc2"))
	p1 := newProducer(t, clientConfig(c, 1))
	load := startLoad(p1, topic, "S3", 5*time.Millisecond)
	defer load.halt()
	testutil.Eventually(t, 5*time.Second, func() error {
		if _, ok := load.firstAfter(time.Time{}, "idc1"); !ok {
			return fmt.Errorf("no send to idc1 yet")
		}
		return nil
	})

	t0 := time.Now()
	c.StopBroker(1)
	c.StopNamesrv(1)
	var unlisted time.Duration
	testutil.Eventually(t, 5*time.Second, func() error {
		list, err := addrsrvList(c.AddrsrvURL(1))
		if err != nil {
			return err
		}
		for _, ns := range list {
			if ns.Addr == c.NamesrvAddr(1) && ns.Alive {
				return fmt.Errorf("idc1's name server still listed alive")
			}
		}
		unlisted = time.Since(t0)
		return nil
	})
	t.Logf("S3: idc1's address server marked idc1's name server down after %v (probe 1 s, down after 2 misses)", unlisted)
	if unlisted > 3500*time.Millisecond {
		t.Fatalf("name server still listed after %v; want within 2 probe intervals", unlisted)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if p1.NameServer() != c.NamesrvAddr(2) || c1.NameServer() != c.NamesrvAddr(2) {
			return fmt.Errorf("clients use %s / %s", p1.NameServer(), c1.NameServer())
		}
		if _, ok := load.firstAfter(t0, "idc2"); !ok {
			return fmt.Errorf("no send on idc2 yet")
		}
		return nil
	})
	first, _ := load.firstAfter(t0, "idc2")
	t.Logf("S3 RTO (stop begun → first idc1 send stored on idc2): %v", first.at.Sub(t0))
	// A topic the clients have not used yet is resolved through idc2's
	// name server.
	ks, res := sendN(t, p1, topic+"New", "S3new", 1)
	testutil.Equal(t, res[0].IDC, "idc2", "new topic's broker IDC")
	_ = ks

	t1 := time.Now()
	testutil.NoError(t, c.StartNamesrv(1))
	testutil.NoError(t, c.StartBroker(1))
	testutil.Eventually(t, 15*time.Second, func() error {
		if p1.NameServer() != c.NamesrvAddr(1) {
			return fmt.Errorf("producer still on %s", p1.NameServer())
		}
		if _, ok := load.firstAfter(t1, "idc1"); !ok {
			return fmt.Errorf("no send back on idc1 yet")
		}
		return nil
	})
	load.halt()
	keys, _, errs := load.snapshot()
	testutil.Equal(t, errs, 0, "application-visible send errors")
	rec.waitAll(t, keys, 15*time.Second)
	t.Logf("S3/S5: %d messages sent, 0 errors, %d duplicates", len(keys), rec.duplicates())
}

// TestClientS4ConsumersDownThenS5: idc1's consumers stop; idc2's consumers
// take over idc1's broker's queues and drain them; a new idc1 consumer gets
// them back.
func TestClientS4ConsumersDownThenS5(t *testing.T) {
	c := startCluster(t, 2)
	const topic = "S4Topic"
	createTopic(t, c, topic, 4)
	rec := newRecorder()
	c1 := newConsumer(t, clientConfig(c, 1), "S4Group", topic, rec.handler("idc1"))
	c2 := newConsumer(t, clientConfig(c, 2), "S4Group", topic, rec.handler("idc2"))
	p1 := newProducer(t, clientConfig(c, 1))
	load := startLoad(p1, topic, "S4", 5*time.Millisecond)
	defer load.halt()
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(queuesOf(c1, topic, devcluster.BrokerName(1))) != 4 {
			return fmt.Errorf("idc1 consumer holds %v", sortedQueues(c1.Queues()))
		}
		return nil
	})

	t0 := time.Now()
	testutil.NoError(t, c1.Shutdown(t.Context()))
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := len(queuesOf(c2, topic, devcluster.BrokerName(1))); n != 4 {
			return fmt.Errorf("idc2 consumer holds %d of idc1's queues", n)
		}
		return nil
	})
	t.Logf("S4 takeover (idc1 consumer shut down → idc2 consumer holds all idc1 queues): %v", time.Since(t0))
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, d := range rec.deliveries() {
			if d.consumer == "idc2" && d.msg.IDC == "idc1" {
				t.Logf("S4 RTO (→ first idc1 message consumed in idc2): %v", d.at.Sub(t0))
				return nil
			}
		}
		return fmt.Errorf("idc2 consumer has read nothing from idc1's broker")
	})

	// Everything sent to idc1's broker meanwhile is drained by idc2.
	testutil.Eventually(t, 10*time.Second, func() error {
		n := 0
		_, outs, _ := load.snapshot()
		for _, o := range outs {
			if o.err == nil && o.at.After(t0) && o.res.IDC == "idc1" {
				n++
			}
		}
		if n < 30 {
			return fmt.Errorf("only %d messages sent to idc1 since the consumers left", n)
		}
		return nil
	})
	drained, _, _ := load.snapshot()
	rec.waitAll(t, drained, 10*time.Second)

	// S5: an idc1 consumer returns and gets idc1's queues back.
	t1 := time.Now()
	c1b := newConsumer(t, clientConfig(c, 1), "S4Group", topic, rec.handler("idc1"))
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(queuesOf(c1b, topic, devcluster.BrokerName(1))) != 4 || len(queuesOf(c2, topic, devcluster.BrokerName(1))) != 0 {
			return fmt.Errorf("idc1: %v idc2: %v", sortedQueues(c1b.Queues()), sortedQueues(c2.Queues()))
		}
		return nil
	})
	t.Logf("S5 hand-back (new idc1 consumer started → holds idc1's queues): %v", time.Since(t1))
	load.halt()
	keys, _, errs := load.snapshot()
	testutil.Equal(t, errs, 0, "send errors")
	rec.waitAll(t, keys, 10*time.Second)
	t.Logf("S4/S5: %d messages, %d duplicates", len(keys), rec.duplicates())
}
