package broker

import (
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestBrokerDLQClientFallback covers the path a client takes when
// CONSUMER_SEND_MSG_BACK fails: it sends the message itself to
// %RETRY%<group> with reconsumeTimes already increased and a DELAY.
func TestBrokerDLQClientFallback(t *testing.T) {
	levels := testDelayLevels()
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-fallback")
	opts.MessageDelayLevel = delayLevelString(levels)
	s := startBroker(t, opts)
	c := newRawClient(t)
	const group = "fb_cg"
	retryTopic, dlqTopic := protocol.RetryTopic(group), protocol.DLQTopic(group)
	// maxTimes < 0 leaves maxReconsumeTimes out, as Java clients do.
	sendRetry := func(key string, reconsume, maxTimes int32, delay string) {
		t.Helper()
		props := map[string]string{protocol.PropertyKeys: key, protocol.PropertyRetryTopic: "FBTopic",
			protocol.PropertyOriginMessageID: "ORIG-" + key}
		if delay != "" {
			props[protocol.PropertyDelayLevel] = delay
		}
		h := protocol.SendMessageRequestHeader{
			ProducerGroup: "CLIENT_INNER_PRODUCER", Topic: retryTopic, QueueID: 0, BornTimestamp: time.Now().UnixMilli(),
			Properties: protocol.EncodeProperties(props), ReconsumeTimes: reconsume, MaxReconsumeTimes: maxTimes,
		}
		ext := h.Ext()
		if maxTimes < 0 {
			delete(ext, "maxReconsumeTimes")
		}
		expectCode(t, invoke(t, c, s.Addr(), protocol.SendMessage, ext, []byte(key)), protocol.Success, "retry send "+key)
	}

	// Past the maximum: a dead letter at once, its DELAY dropped.
	sendRetry("dead", 3, 2, "5")
	dead := waitQueueLen(t, c, s.Addr(), dlqTopic, 0, 1)[0]
	testutil.Equal(t, prop(dead, protocol.PropertyKeys), "dead", "dead letter")
	testutil.Equal(t, dead.ReconsumeTimes, int32(3), "dead letter reconsumeTimes")
	testutil.Equal(t, prop(dead, protocol.PropertyDLQOriginTopic), "FBTopic", "DLQ_ORIGIN_TOPIC")
	testutil.Equal(t, prop(dead, protocol.PropertyDLQOriginMessageID), "ORIG-dead", "DLQ_ORIGIN_MESSAGE_ID")
	_, hasDelay := protocol.Property(dead.Properties, protocol.PropertyDelayLevel)
	testutil.True(t, !hasDelay, "dead letter has no DELAY")
	testutil.Equal(t, len(queueMessages(t, c, s.Addr(), retryTopic, 0)), 0, "nothing in the retry topic")

	// Within the maximum: delayed, then in the retry topic.
	sendRetry("again", 1, 2, "2")
	again := waitQueueLen(t, c, s.Addr(), retryTopic, 0, 1)[0]
	testutil.Equal(t, prop(again, protocol.PropertyKeys), "again", "retried")
	testutil.Equal(t, again.ReconsumeTimes, int32(1), "retried reconsumeTimes")

	// maxReconsumeTimes absent: the group's retryMaxTimes, 16.
	sendRetry("sixteen", 16, -1, "")
	sendRetry("seventeen", 17, -1, "")
	ms := waitQueueLen(t, c, s.Addr(), dlqTopic, 0, 2)
	testutil.Equal(t, prop(ms[1], protocol.PropertyKeys), "seventeen", "17 > 16 is a dead letter")
	ms = waitQueueLen(t, c, s.Addr(), retryTopic, 0, 2)
	testutil.Equal(t, prop(ms[1], protocol.PropertyKeys), "sixteen", "16 is retried")

	// An explicit 0 is 0 (the fallback of a consumer with
	// WithMaxReconsumeTimes(0)), as in Java; rocketmq-client-go's ordinary
	// send (maxReconsumeTimes "0", reconsumeTimes 0) still goes to the
	// retry topic.
	sendRetry("zero-max", 1, 0, "")
	ms = waitQueueLen(t, c, s.Addr(), dlqTopic, 0, 3)
	testutil.Equal(t, prop(ms[2], protocol.PropertyKeys), "zero-max", "1 > 0 is a dead letter")
	sendRetry("ordinary", 0, 0, "")
	ms = waitQueueLen(t, c, s.Addr(), retryTopic, 0, 3)
	testutil.Equal(t, prop(ms[2], protocol.PropertyKeys), "ordinary", "an ordinary send is stored in the retry topic")
}
