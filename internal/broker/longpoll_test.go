package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// suspendedPull is a long-polling PULL_MESSAGE as the Go push consumer
// sends it, but with the request's own subscription.
func suspendedPull(group, topic string, queueID int32, offset int64) *remoting.Command {
	h := protocol.PullMessageRequestHeader{
		ConsumerGroup: group, Topic: topic, QueueID: queueID, QueueOffset: offset, MaxMsgNums: 32,
		SysFlag: protocol.PullFlagSuspend | protocol.PullFlagSubscription, CommitOffset: -1,
		SuspendTimeoutMillis: 20000, Subscription: "*", ExpressionType: protocol.ExpressionTypeTag,
	}
	return remoting.NewRequest(int32(protocol.PullMessage), h.Ext(), nil)
}

// asyncInvoke sends req and delivers the outcome on the returned channel.
func asyncInvoke(c *remoting.Client, addr string, req *remoting.Command) <-chan *remoting.Command {
	out := make(chan *remoting.Command, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := c.Invoke(ctx, addr, req)
		if err != nil {
			resp = remoting.NewResponse(req, -1, err.Error())
		}
		out <- resp
	}()
	return out
}

func TestBrokerLongPollingWakesOnArrival(t *testing.T) {
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-lp"))
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "LPTopic", 2)

	answer := asyncInvoke(c, s.Addr(), suspendedPull("lp_cg", "LPTopic", 1, 0))
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := s.pulls.parked(); n != 1 {
			return fmt.Errorf("%d pulls parked", n)
		}
		return nil
	})
	// A message on another queue does not answer it.
	expectCode(t, sendRaw(t, c, s.Addr(), "LPTopic", 0, nil, []byte("other queue")), protocol.Success, "send q0")
	testutil.Equal(t, s.pulls.parked(), 1, "still parked after a message on another queue")

	expectCode(t, sendRaw(t, c, s.Addr(), "LPTopic", 1, nil, []byte("wake up")), protocol.Success, "send q1")
	resp := <-answer
	expectCode(t, resp, protocol.Success, "parked pull")
	ms := decodeAll(t, resp.Body)
	testutil.Equal(t, len(ms), 1, "messages")
	testutil.Equal(t, string(ms[0].Body), "wake up", "body")
	testutil.Equal(t, s.pulls.parked(), 0, "nothing parked")
}

func TestBrokerLongPollingTimesOutAtCap(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-lp")
	opts.LongPollingMax = 200 * time.Millisecond // below the request's 20 s
	s := startBroker(t, opts)
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "LPTopic", 1)
	resp := <-asyncInvoke(c, s.Addr(), suspendedPull("lp_cg", "LPTopic", 0, 0))
	expectCode(t, resp, protocol.PullNotFound, "pull held to the cap")
	var ph protocol.PullMessageResponseHeader
	testutil.NoError(t, ph.SetExt(resp.ExtFields), "pull answer header")
	testutil.Equal(t, s.pulls.parked(), 0, "nothing parked")
}

func TestBrokerLongPollingDroppedOnClose(t *testing.T) {
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-lp"))
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "LPTopic", 1)

	other := remoting.NewClient(remoting.ClientOptions{})
	_ = asyncInvoke(other, s.Addr(), suspendedPull("lp_cg", "LPTopic", 0, 0))
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := s.pulls.parked(); n != 1 {
			return fmt.Errorf("%d pulls parked", n)
		}
		return nil
	})
	other.Close()
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := s.pulls.parked(); n != 0 {
			return fmt.Errorf("%d pulls parked after the connection closed", n)
		}
		return nil
	})
	// The broker still serves.
	expectCode(t, sendRaw(t, c, s.Addr(), "LPTopic", 0, nil, []byte("x")), protocol.Success, "send after drop")
}

func TestBrokerLongPollingAnsweredAtShutdown(t *testing.T) {
	s := startBroker(t, testBrokerOptions(t, "127.0.1.1", "idc1", "broker-lp"))
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "LPTopic", 1)
	answer := asyncInvoke(c, s.Addr(), suspendedPull("lp_cg", "LPTopic", 0, 0))
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := s.pulls.parked(); n != 1 {
			return fmt.Errorf("%d pulls parked", n)
		}
		return nil
	})
	s.Shutdown()
	expectCode(t, <-answer, protocol.PullNotFound, "parked pull at shutdown")
}
