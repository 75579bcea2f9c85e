package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// checkRecord is one CHECK_TRANSACTION_STATE a test client received.
type checkRecord struct {
	at     int64 // ms
	header map[string]string
	msg    *protocol.MessageExt
}

// checkRecorder collects the checks a raw client receives.
type checkRecorder struct {
	mu     sync.Mutex
	checks []checkRecord
}

func (r *checkRecorder) handle(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	m, _, err := protocol.DecodeStoredMessage(req.Body, true, true)
	if err != nil {
		m = nil
	}
	r.mu.Lock()
	r.checks = append(r.checks, checkRecord{at: time.Now().UnixMilli(), header: req.ExtFields, msg: m})
	r.mu.Unlock()
	return nil
}

// of returns the checks of the half message with UNIQ_KEY uniq.
func (r *checkRecorder) of(uniq string) []checkRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []checkRecord
	for _, c := range r.checks {
		if c.header["msgId"] == uniq {
			out = append(out, c)
		}
	}
	return out
}

func TestBrokerTransactionRaw(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-tx")
	opts.TransactionCheckInterval = 100 * time.Millisecond
	opts.TransactionTimeout = 300 * time.Millisecond
	opts.TransactionCheckMax = 3
	s := startBroker(t, opts)
	c := newRawClient(t)
	checks := &checkRecorder{}
	c.Handle(int32(protocol.CheckTransactionState), checks.handle)
	const topic, group = "TxTopic", "tx_pg"
	createTopic(t, c, s.Addr(), topic, 2)

	type half struct {
		key     string
		queue   int64 // half-queue offset
		offset  int64 // half commit-log offset
		storeTs int64
	}
	sendHalf := func(key string) half {
		t.Helper()
		h := protocol.SendMessageRequestHeader{
			ProducerGroup: group, Topic: topic, QueueID: 1, SysFlag: protocol.SysFlagTransactionPrep, BornTimestamp: time.Now().UnixMilli(),
			Properties: protocol.EncodeProperties(map[string]string{
				protocol.PropertyTransactionPrepared: "true", protocol.PropertyProducerGroup: group,
				protocol.PropertyUniqClientMessageID: "U-" + key, protocol.PropertyKeys: key,
			}),
		}
		resp := invoke(t, c, s.Addr(), protocol.SendMessage, h.Ext(), []byte(key))
		expectCode(t, resp, protocol.Success, "half "+key)
		var rh protocol.SendMessageResponseHeader
		testutil.NoError(t, rh.SetExt(resp.ExtFields), "half answer")
		testutil.Equal(t, rh.TransactionID, "U-"+key, "transactionId")
		testutil.Equal(t, rh.QueueID, int32(1), "answer names the producer's queue")
		_, off, err := protocol.ParseOffsetMessageID(rh.MsgID)
		testutil.NoError(t, err, "half msgId")
		hm, err := s.store.MessageAt(off)
		testutil.NoError(t, err, "half record")
		testutil.Equal(t, hm.Topic, transHalfTopic, "half topic")
		testutil.Equal(t, hm.SysFlag&protocol.SysFlagTransactionMask, int32(0), "half sysflag")
		testutil.Equal(t, prop(hm, protocol.PropertyRealTopic), topic, "REAL_TOPIC")
		testutil.Equal(t, hm.QueueOffset, rh.QueueOffset, "queueOffset answered")
		return half{key: key, queue: rh.QueueOffset, offset: off, storeTs: hm.StoreTimestamp}
	}
	end := func(h half, state int32, producerGroup string, want protocol.ResponseCode) {
		t.Helper()
		eh := endTransactionHeader{ProducerGroup: producerGroup, TranStateTableOffset: h.queue, CommitLogOffset: h.offset,
			CommitOrRollback: state, MsgID: "U-" + h.key}
		expectCode(t, invoke(t, c, s.Addr(), protocol.EndTransaction, eh.ext(), nil), want, fmt.Sprintf("END_TRANSACTION %s %d", h.key, state))
	}

	commitMe, rollbackMe, askMe, forgotten := sendHalf("commit-me"), sendHalf("rollback-me"), sendHalf("ask-me"), sendHalf("forgotten")
	noGroup := protocol.SendMessageRequestHeader{ProducerGroup: group, Topic: topic, QueueID: 1, SysFlag: protocol.SysFlagTransactionPrep,
		BornTimestamp: time.Now().UnixMilli()}
	expectCode(t, invoke(t, c, s.Addr(), protocol.SendMessage, noGroup.Ext(), []byte("x")), protocol.MessageIllegal, "half without PGROUP")
	testutil.Equal(t, len(queueMessages(t, c, s.Addr(), topic, 1)), 0, "half messages are invisible")

	end(commitMe, protocol.SysFlagTransactionCommit, group, protocol.Success)
	ms := waitQueueLen(t, c, s.Addr(), topic, 1, 1)
	m := ms[0]
	testutil.Equal(t, string(m.Body), "commit-me", "committed body")
	testutil.Equal(t, m.SysFlag&protocol.SysFlagTransactionMask, protocol.SysFlagTransactionCommit, "committed sysflag")
	testutil.Equal(t, m.PreparedTransactionOffset, commitMe.offset, "preparedTransactionOffset")
	testutil.Equal(t, prop(m, protocol.PropertyUniqClientMessageID), "U-commit-me", "UNIQ_KEY kept")
	testutil.Equal(t, prop(m, protocol.PropertyProducerGroup), group, "PGROUP kept")
	for _, gone := range []string{protocol.PropertyTransactionPrepared, protocol.PropertyRealTopic, protocol.PropertyRealQueueID} {
		_, ok := protocol.Property(m.Properties, gone)
		testutil.True(t, !ok, gone+" removed from the committed message")
	}
	end(commitMe, protocol.SysFlagTransactionCommit, group, protocol.Success) // a duplicate commit stores nothing
	end(rollbackMe, protocol.SysFlagTransactionRollbck, group, protocol.Success)
	end(askMe, protocol.SysFlagTransactionCommit, "other_pg", protocol.SystemError)
	end(half{key: "ask-me", queue: askMe.queue, offset: m.CommitLogOffset}, protocol.SysFlagTransactionCommit, group, protocol.SystemError)
	end(half{key: "ask-me", queue: askMe.queue + 1, offset: askMe.offset}, protocol.SysFlagTransactionCommit, group, protocol.SystemError)
	end(askMe, 5, group, protocol.InvalidParameter)

	// ask-me is left pending: the broker asks the producer connection, no
	// earlier than the timeout after it was stored.
	var ask checkRecord
	testutil.Eventually(t, 10*time.Second, func() error {
		cs := checks.of("U-ask-me")
		if len(cs) == 0 {
			return fmt.Errorf("no check for ask-me yet")
		}
		ask = cs[0]
		return nil
	})
	testutil.True(t, ask.at >= askMe.storeTs+300, "checked no earlier than the timeout")
	testutil.Equal(t, ask.header["tranStateTableOffset"], fmt.Sprint(askMe.queue), "check tranStateTableOffset")
	testutil.Equal(t, ask.header["commitLogOffset"], fmt.Sprint(askMe.offset), "check commitLogOffset")
	testutil.True(t, ask.msg != nil, "check body decodes")
	testutil.Equal(t, ask.msg.Topic, topic, "check body shows the real topic")
	testutil.Equal(t, ask.msg.QueueID, int32(1), "check body shows the real queue")
	testutil.Equal(t, prop(ask.msg, protocol.PropertyProducerGroup), group, "check body PGROUP")
	testutil.Equal(t, len(checks.of("U-commit-me"))+len(checks.of("U-rollback-me")), 0, "resolved messages are not checked")
	eh := endTransactionHeader{ProducerGroup: group, TranStateTableOffset: askMe.queue, CommitLogOffset: askMe.offset,
		CommitOrRollback: protocol.SysFlagTransactionCommit, FromTransactionCheck: true, MsgID: "U-ask-me"}
	testutil.NoError(t, c.InvokeOneway(context.Background(), s.Addr(), remoting.NewRequest(int32(protocol.EndTransaction), eh.ext(), nil)), "oneway commit")
	ms = waitQueueLen(t, c, s.Addr(), topic, 1, 2)
	testutil.Equal(t, string(ms[1].Body), "ask-me", "committed after the check")

	// forgotten is never answered: checked transactionCheckMax times, then
	// discarded.
	tx := s.extra.transactions
	testutil.Eventually(t, 15*time.Second, func() error {
		if !tx.isResolved(forgotten.queue) {
			return fmt.Errorf("forgotten not discarded yet (%d checks)", len(checks.of("U-forgotten")))
		}
		return nil
	})
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := len(checks.of("U-forgotten")); n != 3 {
			return fmt.Errorf("forgotten was checked %d times, want 3", n)
		}
		return nil
	})
	testutil.Equal(t, len(queueMessages(t, c, s.Addr(), topic, 1)), 2, "rolled back and discarded messages never appear")

	// The resolutions survive a restart: nothing is pending afterwards.
	s.Shutdown()
	s2 := startBroker(t, opts)
	tx2 := s2.extra.transactions
	for _, h := range []half{commitMe, rollbackMe, askMe, forgotten} {
		testutil.True(t, tx2.isResolved(h.queue), h.key+" still resolved after the restart")
	}
	// A commit of an already resolved message after the restart is a no-op.
	eh = endTransactionHeader{ProducerGroup: group, TranStateTableOffset: commitMe.queue, CommitLogOffset: commitMe.offset,
		CommitOrRollback: protocol.SysFlagTransactionCommit}
	expectCode(t, invoke(t, c, s2.Addr(), protocol.EndTransaction, eh.ext(), nil), protocol.Success, "late duplicate commit")
	testutil.Equal(t, len(queueMessages(t, c, s2.Addr(), topic, 1)), 2, "no duplicate after the restart")
}

// txListener is a rocketmq-client-go transaction listener: the message key
// says what the local transaction does; "unknown" commits when checked.
type txListener struct {
	mu      sync.Mutex
	checked map[string]int
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch m.GetKeys() {
	case "commit":
		return primitive.CommitMessageState
	case "rollback":
		return primitive.RollbackMessageState
	}
	return primitive.UnkonwnState
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	l.checked[m.GetKeys()]++
	l.mu.Unlock()
	if m.GetKeys() == "rollback" {
		return primitive.RollbackMessageState
	}
	return primitive.CommitMessageState
}

func TestBrokerTransactionRocketMQClient(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-tx-go", ns.Addr())
	opts.TransactionCheckInterval = 100 * time.Millisecond
	opts.TransactionTimeout = 300 * time.Millisecond
	s := startBroker(t, opts)
	raw := newRawClient(t)
	const topic = "TxGoTopic"
	createTopic(t, raw, s.Addr(), topic, 2)
	waitRoute(t, raw, ns.Addr(), topic, s)

	l := &txListener{checked: map[string]int{}}
	p, err := producer.NewTransactionProducer(l,
		producer.WithGroupName("tx_go_pg_"+runToken),
		producer.WithInstanceName(instanceName("tx"+runToken)),
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})),
	)
	testutil.NoError(t, err, "NewTransactionProducer")
	testutil.NoError(t, p.Start(), "transaction producer Start")
	t.Cleanup(func() { p.Shutdown() })
	for _, key := range []string{"commit", "rollback", "unknown"} {
		r, err := p.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte(key)).WithKeys([]string{key}))
		testutil.NoError(t, err, "SendMessageInTransaction "+key)
		testutil.Equal(t, r.Status, primitive.SendOK, "half send status "+key)
	}

	delivered := func() map[string]int {
		out := map[string]int{}
		for q := range int32(2) {
			for _, m := range queueMessages(t, raw, s.Addr(), topic, q) {
				out[string(m.Body)]++
			}
		}
		return out
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		got := delivered()
		if got["commit"] != 1 || got["unknown"] != 1 {
			return fmt.Errorf("delivered %v", got)
		}
		return nil
	})
	l.mu.Lock()
	checkedUnknown := l.checked["unknown"]
	l.mu.Unlock()
	testutil.True(t, checkedUnknown >= 1, "the unknown transaction was checked")
	got := delivered()
	testutil.Equal(t, got["rollback"], 0, "rolled back message delivered")
	testutil.Equal(t, len(got), 2, fmt.Sprintf("delivered %v", got))
}

// TestBrokerTransactionCheckFollowsTheOrigin: a check goes to the connection
// its half message came on while that is open, even when another member of
// the producer group is known; once it closes, to a member of the group.
func TestBrokerTransactionCheckFollowsTheOrigin(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-tx-origin")
	opts.TransactionCheckInterval = 100 * time.Millisecond
	opts.TransactionTimeout = 300 * time.Millisecond
	s := startBroker(t, opts)
	const topic, group = "TxOriginTopic", "tx_origin_pg"
	member, origin, gone := newRawClient(t), newRawClient(t), newRawClient(t)
	memberChecks, originChecks := &checkRecorder{}, &checkRecorder{}
	member.Handle(int32(protocol.CheckTransactionState), memberChecks.handle)
	origin.Handle(int32(protocol.CheckTransactionState), originChecks.handle)
	createTopic(t, member, s.Addr(), topic, 1)
	body, _ := json.Marshal(protocol.HeartbeatData{ClientID: "member@1", ProducerDataSet: []protocol.ProducerData{{GroupName: group}}})
	expectCode(t, invoke(t, member, s.Addr(), protocol.HeartBeat, nil, body), protocol.Success, "producer heartbeat")

	sendHalf := func(c *remoting.Client, key string) {
		t.Helper()
		h := protocol.SendMessageRequestHeader{
			ProducerGroup: group, Topic: topic, SysFlag: protocol.SysFlagTransactionPrep, BornTimestamp: time.Now().UnixMilli(),
			Properties: protocol.EncodeProperties(map[string]string{
				protocol.PropertyTransactionPrepared: "true", protocol.PropertyProducerGroup: group, protocol.PropertyUniqClientMessageID: "U-" + key,
			}),
		}
		expectCode(t, invoke(t, c, s.Addr(), protocol.SendMessage, h.Ext(), []byte(key)), protocol.Success, "half "+key)
	}
	sendHalf(origin, "kept")
	sendHalf(gone, "orphan")
	gone.Close()

	testutil.Eventually(t, 10*time.Second, func() error {
		if len(originChecks.of("U-kept")) == 0 {
			return fmt.Errorf("no check for kept on its origin connection")
		}
		if len(memberChecks.of("U-orphan")) == 0 {
			return fmt.Errorf("no check for orphan on the group member")
		}
		return nil
	})
	testutil.Equal(t, len(memberChecks.of("U-kept")), 0, "kept is checked on its origin only")
	testutil.Equal(t, len(originChecks.of("U-orphan")), 0, "orphan is not checked on another producer's connection")
}
