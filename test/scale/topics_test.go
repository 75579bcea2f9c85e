package scale

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// BenchmarkTopicsPerBroker is the curve "topics per broker" of issue 25:
// one name server and one broker process, N topics of 8 queues created on
// the broker, and for each N
//
//	create-s       creating the N topics (64 requests in flight)
//	routed-s       from the last creation until the name server routes it
//	reg-KiB        the broker's full registration body (compressed above 1 MiB, as sent)
//	ns-MiB, broker-MiB   resident memory of the name server and the broker
//	route-p50-us, route-p99-us   GET_ROUTEINFO_BY_TOPIC of random topics, one at a time
//	ns-idle-%, broker-idle-%     CPU of an idle 10 s (heartbeats, registration checks)
//	kill9-routed-s, kill9-send-s after kill -9 and a restart: until the name server
//	               routes the last topic again, and until a send to it succeeds
//	stop-routed-s, stop-send-s   the same after a clean stop
//
// ZONEMQ_SCALE_TOPICS overrides the counts (comma-separated).
func BenchmarkTopicsPerBroker(b *testing.B) {
	curve(b, "TOPICS", []int{10, 100, 1000, 10000, 100000}, "topics", "topics-per-broker", "topics per broker", func(b *testing.B, n int) {
		topicsPoint(b, n)
	})
}

func topicsPoint(b *testing.B, n int) {
	ns, br := startBroker(b)
	c := remoting.NewClient(remoting.ClientOptions{MaxFrameSize: 256 << 20})
	b.Cleanup(func() { c.Close() })

	topics := make([]string, n)
	for i := range topics {
		topics[i] = fmt.Sprintf("ScaleTopic-%06d", i)
	}
	began := time.Now()
	createTopics(b, c, br.addr, topics)
	report(b, "topics-per-broker", n, time.Since(began).Seconds(), "create-s")
	last := topics[n-1]
	began = time.Now()
	waitFor(b, "the last topic routed", 5*time.Minute, func() error { return routed(c, ns.addr, last) })
	report(b, "topics-per-broker", n, time.Since(began).Seconds(), "routed-s")
	report(b, "topics-per-broker", n, float64(registrationBytes(topics))/1024, "reg-KiB")

	lat := make([]time.Duration, 0, 5000)
	for range cap(lat) {
		t0 := time.Now()
		if err := routed(c, ns.addr, topics[rand.IntN(n)]); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	report(b, "topics-per-broker", n, float64(lat[len(lat)/2].Microseconds()), "route-p50-us")
	report(b, "topics-per-broker", n, float64(lat[len(lat)*99/100].Microseconds()), "route-p99-us")
	report(b, "topics-per-broker", n, ns.rssMiB(), "ns-MiB")
	report(b, "topics-per-broker", n, br.rssMiB(), "broker-MiB")

	const idle = 10 * time.Second
	nsCPU, brCPU := ns.cpu(), br.cpu()
	time.Sleep(idle) // the measurement is the idle window itself
	report(b, "topics-per-broker", n, 100*float64(ns.cpu()-nsCPU)/float64(idle), "ns-idle-%")
	report(b, "topics-per-broker", n, 100*float64(br.cpu()-brCPU)/float64(idle), "broker-idle-%")

	restart := func(unit string, halt func()) {
		halt()
		// The name server drops a broker whose connection closed.
		waitFor(b, "the stopped broker out of the routes", time.Minute, func() error {
			if routed(c, ns.addr, last) == nil {
				return fmt.Errorf("%s still routed", last)
			}
			return nil
		})
		began := time.Now()
		br.start(b)
		waitFor(b, "routed after the restart", 5*time.Minute, func() error { return routed(c, ns.addr, last) })
		report(b, "topics-per-broker", n, time.Since(began).Seconds(), unit+"-routed-s")
		waitFor(b, "a send after the restart", 5*time.Minute, func() error { return send(c, br.addr, last) })
		report(b, "topics-per-broker", n, time.Since(began).Seconds(), unit+"-send-s")
	}
	restart("kill9", br.kill)
	restart("stop", func() { br.stop(b) })
}

// createTopics creates every topic with 8 queues, 64 requests in flight.
func createTopics(b *testing.B, c *remoting.Client, addr string, topics []string) {
	err := each(len(topics), func(i int) error {
		h := protocol.CreateTopicRequestHeader{Topic: topics[i], ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6}
		resp, err := invoke(c, addr, protocol.UpdateAndCreateTopic, h.Ext(), nil)
		if err == nil && resp.Code != int32(protocol.Success) {
			err = fmt.Errorf("creating %s: %d %s", topics[i], resp.Code, resp.Remark)
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

// registrationBytes is the size of the full registration a broker sends
// for these topics (8 queues each), made with the broker's own encoders:
// the JSON, or RocketMQ's compressed form above 1 MiB, as the broker
// chooses. (GET_ALL_TOPIC_CONFIG cannot say it at 100 000 topics: its JSON
// answer passes the 16 MiB frame.)
func registrationBytes(topics []string) int {
	w := protocol.TopicConfigSerializeWrapper{TopicConfigTable: make(map[string]protocol.TopicConfig, len(topics))}
	for _, t := range topics {
		w.TopicConfigTable[t] = protocol.TopicConfig{TopicName: t, ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6,
			TopicFilterType: "SINGLE_TAG"}
	}
	body, _ := json.Marshal(protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: w, FilterServerList: []string{}})
	if len(body) > 1<<20 {
		return len(protocol.EncodeCompressedRegisterBody(w, nil))
	}
	return len(body)
}

// send sends one message to queue 0 of topic.
func send(c *remoting.Client, addr, topic string) error {
	h := protocol.SendMessageRequestHeader{ProducerGroup: "scale_pg", Topic: topic, QueueID: 0, BornTimestamp: time.Now().UnixMilli()}
	return sendOK(c, addr, h, []byte("scale"))
}

// sendOK sends one message with header h and says why it was not stored.
func sendOK(c *remoting.Client, addr string, h protocol.SendMessageRequestHeader, body []byte) error {
	resp, err := invoke(c, addr, protocol.SendMessage, h.Ext(), body)
	if err != nil {
		return err
	}
	if resp.Code != int32(protocol.Success) {
		return fmt.Errorf("send: %d %s", resp.Code, resp.Remark)
	}
	return nil
}
