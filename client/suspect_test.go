package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/testutil"
)

// hungBrokerProducer runs a 2-IDC cluster with idc1's broker behind a proxy
// (delaying every chunk by latency) for idc1's producer, configured by cfg,
// and sends three messages through it.
func hungBrokerProducer(t *testing.T, topic string, latency time.Duration, cfg func(*client.ProducerConfig)) (*client.Producer, *testutil.Proxy) {
	t.Helper()
	c := startCluster(t, 2)
	createTopic(t, c, topic, 4)
	proxy, err := testutil.NewProxy(c.Host(1)+":0", c.BrokerAddr(1))
	testutil.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })
	proxy.SetLatency(latency)
	dc := newDialCounter(c.Host(1))
	dc.redirect(c.BrokerAddr(1), proxy.Addr())
	pc := client.ProducerConfig{ClientConfig: clientConfig(c, 1)}
	pc.Dial = dc.dial
	cfg(&pc)
	p, err := client.NewProducer(pc)
	testutil.NoError(t, err)
	testutil.NoError(t, p.Start(context.Background()))
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	for i := range 3 {
		r, err := p.SendSync(context.Background(), &client.Message{Topic: topic, Body: []byte(fmt.Sprint("warm", i))})
		testutil.NoError(t, err, "warm-up send")
		testutil.Equal(t, r.IDC, "idc1", "warm-up send stored locally")
	}
	return p, proxy
}

// TestProducerLeavesSilentBrokerEarly: idc1's broker goes silent (the proxy
// forwards nothing) while idc2's answers. With a 10 s attempt timeout, the
// send in flight still moves to idc2 within seconds: only the liveness
// check (suspect after 100 ms, idc2 answers, idc1 does not) can move it.
func TestProducerLeavesSilentBrokerEarly(t *testing.T) {
	const topic = "SilentTopic"
	p, proxy := hungBrokerProducer(t, topic, 0, func(pc *client.ProducerConfig) {
		pc.SendAttemptTimeout = 10 * time.Second
		pc.SendTimeout = 30 * time.Second
	})
	proxy.Blackhole(true)
	t0 := time.Now()
	type outcome struct {
		res *client.SendResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := p.SendSync(context.Background(), &client.Message{Topic: topic, Body: []byte("during")})
		done <- outcome{r, err}
	}()
	var got outcome
	testutil.Eventually(t, 5*time.Second, func() error {
		select {
		case got = <-done:
			return nil
		default:
			return fmt.Errorf("send still waiting on the silent broker")
		}
	})
	testutil.NoError(t, got.err, "send during the silence")
	testutil.Equal(t, got.res.IDC, "idc2", "stored by the broker that answers")
	t.Logf("silent broker left after %v (attempt timeout 10 s)", time.Since(t0).Round(time.Millisecond))
	st := p.Stats()
	testutil.True(t, st.Retries >= 1 && st.Failovers >= 1, "a retry and a failover counted", st)
}

// TestProducerWaitsForSlowBroker: idc1's broker answers, but every chunk
// to and from it takes 80 ms (a round trip of 160 ms and more, over the
// 100 ms after which an attempt is suspected). A broker that is slow from
// the start (far away) is judged by its own answer times, so no send leaves
// it. (One whose link turns that slow all at once is left like a silent
// one until its sends show the new times: docs/client.md.)
func TestProducerWaitsForSlowBroker(t *testing.T) {
	const topic = "SlowTopic"
	p, _ := hungBrokerProducer(t, topic, 80*time.Millisecond, func(*client.ProducerConfig) {})
	for i := range 20 {
		r, err := p.SendSync(context.Background(), &client.Message{Topic: topic, Body: []byte(fmt.Sprint("slow", i))})
		testutil.NoError(t, err, "send to the slow broker")
		testutil.Equal(t, r.IDC, "idc1", "send stayed on the slow broker", i)
	}
	testutil.Equal(t, p.Stats().Retries, int64(0), "retries")
}
