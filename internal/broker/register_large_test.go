package broker

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// longTopic is the i-th of issue 22's 121-character topic names.
func longTopic(i int) string {
	return fmt.Sprintf("%s-%06d", strings.Repeat("t", 114), i)
}

// TestBrokerRegistersManyLongTopics replays issue 22's topic flood: 46 k
// auto-created topics of 121 characters made the JSON registration exceed
// the 16 MiB frame limit, and the broker left the routes for good, logged
// as "name server unreachable". Such a table now goes in RocketMQ's
// compressed form: every topic is routed, and again after a restart.
func TestBrokerRegistersManyLongTopics(t *testing.T) {
	const n = 46_000
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-many", ns.Addr())
	s, stop := runBroker(t, opts)
	// Fill the table as n auto-creations would, with one write of
	// topics.json rather than n journal fsyncs.
	s.topics.mu.Lock()
	for i := range n {
		s.topics.configs[longTopic(i)] = protocol.TopicConfig{TopicName: longTopic(i), ReadQueueNums: 8, WriteQueueNums: 8,
			Perm: protocol.PermReadWrite, TopicFilterType: "SINGLE_TAG", Attributes: map[string]string{}}
	}
	s.topics.version.Counter++
	testutil.NoError(t, s.topics.compactLocked())
	w := s.topics.wrapperLocked()
	s.topics.mu.Unlock()
	js, _ := json.Marshal(protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: w, FilterServerList: []string{}})
	testutil.True(t, len(js) > remoting.DefaultMaxFrameSize, "the JSON registration exceeds a frame:", len(js))
	req := s.namesrvs.registerRequest()
	testutil.True(t, len(req.Body) < 4<<20, "the compressed registration (bytes):", len(req.Body))

	c := newRawClient(t)
	s.namesrvs.kickAll()
	for _, i := range []int{0, n / 2, n - 1} {
		waitRoute(t, c, ns.Addr(), longTopic(i), s)
	}

	stop()
	opts.Listen = s.Addr()
	s, _ = runBroker(t, opts)
	for _, i := range []int{1, n - 2} {
		waitRoute(t, c, ns.Addr(), longTopic(i), s)
	}
}

// TestBrokerRefusesTopicsOverItsLimit: past MaxTopics a topic is not
// created, by an admin or by a send's auto-creation, and the error names
// the limit.
func TestBrokerRefusesTopicsOverItsLimit(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-cap", ns.Addr())
	opts.MaxTopics = 0
	s := startBroker(t, opts)
	s.topics.mu.Lock()
	s.topics.max = len(s.topics.configs) + 1
	s.topics.mu.Unlock()
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "Fits", 1)
	h := protocol.CreateTopicRequestHeader{Topic: "OneTooMany", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	resp := invoke(t, c, s.Addr(), protocol.UpdateAndCreateTopic, h.Ext(), nil)
	testutil.True(t, resp.Code != int32(protocol.Success) && strings.Contains(resp.Remark, "its limit"), resp.Code, resp.Remark)
	resp = sendRaw(t, c, s.Addr(), "AutoTooMany", 0, nil, []byte("x"))
	testutil.True(t, resp.Code != int32(protocol.Success) && strings.Contains(resp.Remark, "its limit"), resp.Code, resp.Remark)
	_, exists := s.topics.get("AutoTooMany")
	testutil.True(t, !exists, "the auto-created topic")
}
