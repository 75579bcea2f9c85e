package broker

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// popRaw pops up to max messages of topic (every queue) for group and
// returns the bodies with their handles and attempts, or the answer's code.
func popRaw(t *testing.T, c *remoting.Client, addr, group, topic string, max int, invisible time.Duration, extra map[string]string) (bodies, handles []string, attempts []int, code protocol.ResponseCode) {
	t.Helper()
	ext := map[string]string{"consumerGroup": group, "topic": topic, "queueId": "-1", "maxMsgNums": strconv.Itoa(max),
		"invisibleTime": strconv.FormatInt(invisible.Milliseconds(), 10)}
	for k, v := range extra {
		ext[k] = v
	}
	resp := invoke(t, c, addr, protocol.PopMessages, ext, nil)
	code = protocol.ResponseCode(resp.Code)
	if code != protocol.Success {
		return nil, nil, nil, code
	}
	for _, m := range decodeAll(t, resp.Body) {
		bodies = append(bodies, string(m.Body))
	}
	handles = strings.Split(resp.ExtFields[protocol.ExtPopHandles], ";")
	for _, a := range strings.Split(resp.ExtFields["zonemqPopAttempts"], ",") {
		n, _ := strconv.Atoi(a)
		attempts = append(attempts, n)
	}
	testutil.Equal(t, len(handles), len(bodies), "a handle per message")
	return bodies, handles, attempts, code
}

// POP hands each message out once while it is invisible, again (attempt 2)
// once its invisible time runs out, never after its ack; the committed
// offset follows the acks; a void handle is QUERY_NOT_FOUND; a changed
// invisible time gives a new handle and voids the old one; past the
// attempts the message goes to the dead-letter queue.
func TestBrokerPop(t *testing.T) {
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-pop"))
	c := newRawClient(t)
	const topic, group = "PopTopic", "pop_cg"
	createTopic(t, c, s.Addr(), topic, 2)
	for i := 0; i < 6; i++ {
		expectCode(t, sendRaw(t, c, s.Addr(), topic, int32(i%2), nil, []byte(fmt.Sprintf("m%d", i))), protocol.Success, "send")
	}

	bodies, handles, attempts, code := popRaw(t, c, s.Addr(), group, topic, 32, 2*time.Second, nil)
	testutil.Equal(t, code, protocol.Success, "first pop")
	testutil.Equal(t, len(bodies), 6, "every message", bodies)
	for _, a := range attempts {
		testutil.Equal(t, a, 1, "first delivery")
	}
	_, _, _, code = popRaw(t, c, s.Addr(), group, topic, 32, 2*time.Second, nil)
	testutil.Equal(t, code, protocol.PullNotFound, "all invisible")

	// Ack four; change one's invisible time; leave one.
	ack := func(hs ...string) protocol.ResponseCode {
		resp := invoke(t, c, s.Addr(), protocol.AckPopMessages,
			map[string]string{"consumerGroup": group, "topic": topic, "handles": strings.Join(hs, ";")}, nil)
		return protocol.ResponseCode(resp.Code)
	}
	byBody := map[string]string{}
	for i, b := range bodies {
		byBody[b] = handles[i]
	}
	testutil.Equal(t, ack(byBody["m0"], byBody["m1"], byBody["m2"], byBody["m3"]), protocol.Success, "ack four")
	testutil.Equal(t, ack(byBody["m0"]), protocol.QueryNotFound, "an acked handle is void")
	testutil.Equal(t, ack("0:999:abc"), protocol.QueryNotFound, "a forged handle is void")
	resp := invoke(t, c, s.Addr(), protocol.ChangePopInvisibleTime, map[string]string{"consumerGroup": group, "topic": topic,
		"handle": byBody["m4"], "invisibleTime": "60000"}, nil)
	expectCode(t, resp, protocol.Success, "change invisible time")
	newHandle := resp.ExtFields["handle"]
	testutil.True(t, newHandle != "" && newHandle != byBody["m4"], "a new handle", newHandle)
	testutil.Equal(t, ack(byBody["m4"]), protocol.QueryNotFound, "the old handle is void")

	// m5's invisible time runs out: it comes back, attempt 2; m4 does not.
	var again []string
	testutil.Eventually(t, 10*time.Second, func() error {
		var att []int
		again, _, att, code = popRaw(t, c, s.Addr(), group, topic, 32, 2*time.Second, nil)
		if code != protocol.Success {
			return fmt.Errorf("pop: %s", code)
		}
		testutil.Equal(t, att[0], 2, "second delivery")
		return nil
	})
	testutil.Equal(t, strings.Join(again, ","), "m5", "only the expired, unacked message")
	testutil.Equal(t, ack(newHandle), protocol.Success, "the new handle acks")

	// Committed offsets: queue 0 held m0 m2 m4 (all acked), queue 1 m1 m3 m5.
	q0, _ := s.store.QueryOffset(group, topic, 0)
	testutil.Equal(t, q0, int64(3), "queue 0 committed past its acked messages")
	q1, _ := s.store.QueryOffset(group, topic, 1)
	testutil.Equal(t, q1, int64(2), "queue 1 stops at m5, in flight")

	// Past maxAttempts the message is dead-lettered.
	testutil.Eventually(t, 10*time.Second, func() error {
		_, _, _, code = popRaw(t, c, s.Addr(), group, topic, 32, time.Second, map[string]string{"maxAttempts": "2"})
		if q, _ := s.store.QueryOffset(group, topic, 1); q != 3 {
			return fmt.Errorf("queue 1 committed %d, want 3 (m5 dead-lettered)", q)
		}
		return nil
	})
	dlq := pullRaw(t, c, s.Addr(), "dlq_reader", protocol.DLQTopic(group), 0, 0, "*", 32)
	expectCode(t, dlq, protocol.Success, "pull the DLQ")
	testutil.Equal(t, string(decodeAll(t, dlq.Body)[0].Body), "m5", "m5 in the dead-letter queue")

	// Bad input.
	_, _, _, code = popRaw(t, c, s.Addr(), group, topic, 32, 10*time.Millisecond, nil)
	testutil.Equal(t, code, protocol.InvalidParameter, "an invisible time under a second")
	_, _, _, code = popRaw(t, c, s.Addr(), "bad group!", topic, 32, time.Second, nil)
	testutil.Equal(t, code, protocol.InvalidParameter, "a bad group")
	_, _, _, code = popRaw(t, c, s.Addr(), group, "NoSuchPopTopic", 32, time.Second, nil)
	testutil.Equal(t, code, protocol.TopicNotExist, "an unknown topic")
}

// A FIFO pop hands out nothing new from a queue while a message of it is
// in flight, and hands the queue's messages out in order.
func TestBrokerPopFIFO(t *testing.T) {
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-popfifo"))
	c := newRawClient(t)
	const topic, group = "PopFifoTopic", "popfifo_cg"
	createTopic(t, c, s.Addr(), topic, 1)
	for i := 0; i < 4; i++ {
		expectCode(t, sendRaw(t, c, s.Addr(), topic, 0, nil, []byte(fmt.Sprintf("f%d", i))), protocol.Success, "send")
	}
	fifo := map[string]string{"fifo": "true"}
	bodies, handles, _, code := popRaw(t, c, s.Addr(), group, topic, 2, 30*time.Second, fifo)
	testutil.Equal(t, code, protocol.Success)
	testutil.Equal(t, strings.Join(bodies, ","), "f0,f1", "in order")
	_, _, _, code = popRaw(t, c, s.Addr(), group, topic, 2, 30*time.Second, fifo)
	testutil.Equal(t, code, protocol.PullNotFound, "nothing new while f0 and f1 are in flight")
	resp := invoke(t, c, s.Addr(), protocol.AckPopMessages, map[string]string{"consumerGroup": group, "topic": topic,
		"handles": strings.Join(handles, ";")}, nil)
	expectCode(t, resp, protocol.Success, "ack")
	bodies, _, _, code = popRaw(t, c, s.Addr(), group, topic, 2, 30*time.Second, fifo)
	testutil.Equal(t, code, protocol.Success)
	testutil.Equal(t, strings.Join(bodies, ","), "f2,f3", "the next ones once acked")
}
