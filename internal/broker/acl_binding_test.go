package broker

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/acl"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// secretTopic is a topic the app account of testACL may not read.
const secretTopic = "SecretTopic"

// aclWithSecretTopic is aclCluster plus a message on secretTopic (stored
// by the admin account) and the commit-log offset it was stored at.
func aclWithSecretTopic(t *testing.T) (*Server, *remoting.Client, int64) {
	t.Helper()
	_, s := aclCluster(t)
	raw := newRawClient(t)
	for _, topic := range []string{aclTopic, secretTopic} {
		create := protocol.CreateTopicRequestHeader{Topic: topic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
		expectCode(t, signedInvoke(t, raw, s.Addr(), protocol.UpdateAndCreateTopic, create.Ext(), nil, aclAdminKey, aclAdminSecret), protocol.Success, "create "+topic)
	}
	h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: secretTopic, DefaultTopic: protocol.AutoCreateTopicKey,
		DefaultTopicQueueNums: 1, BornTimestamp: time.Now().UnixMilli(), Properties: "KEYS\x01secret-key\x02"}
	resp := signedInvoke(t, raw, s.Addr(), protocol.SendMessage, h.Ext(), []byte("the secret body"), aclAdminKey, aclAdminSecret)
	expectCode(t, resp, protocol.Success, "admin send to "+secretTopic)
	_, off, err := protocol.ParseOffsetMessageID(resp.Ext("msgId"))
	testutil.NoError(t, err, "the send's offset message id")
	return s, raw, off
}

// TestBrokerACLSignatureBindsTheCode: a signature made for one request
// cannot be replayed as another. Issue 22: an admin-signed stats read,
// replayed as DELETE_TOPIC_IN_BROKER with the same fields, deleted the
// topic. Stock (unbound) signatures are refused for admin codes.
func TestBrokerACLSignatureBindsTheCode(t *testing.T) {
	s, raw, _ := aclWithSecretTopic(t)
	// What an eavesdropper saw: the admin reading a topic's stats.
	read := map[string]string{"topic": secretTopic}
	acl.Sign(int32(protocol.GetTopicStatsInfo), read, nil, aclAdminKey, aclAdminSecret, time.Now())
	expectCode(t, invokeCmd(t, raw, s.Addr(), remoting.NewRequest(int32(protocol.GetTopicStatsInfo), copyExt(read), nil)), protocol.Success, "the stats read")
	resp := invokeCmd(t, raw, s.Addr(), remoting.NewRequest(int32(protocol.DeleteTopicInBroker), copyExt(read), nil))
	expectCode(t, resp, protocol.NoPermission, "the read's signature replayed as a deletion")
	testutil.True(t, strings.Contains(resp.Remark, "not 215"), resp.Remark)

	// The same with a stock client's signature, which binds nothing.
	stock := map[string]string{"topic": secretTopic}
	stockSign(stock, nil, aclAdminKey, aclAdminSecret)
	resp = invokeCmd(t, raw, s.Addr(), remoting.NewRequest(int32(protocol.DeleteTopicInBroker), stock, nil))
	expectCode(t, resp, protocol.NoPermission, "a stock signature on an admin request")
	_, exists := s.topics.get(secretTopic)
	testutil.True(t, exists, "the topic survived")

	// A zonemq-signed request replayed after the window.
	old := map[string]string{"topic": secretTopic}
	acl.Sign(int32(protocol.GetTopicStatsInfo), old, nil, aclAdminKey, aclAdminSecret, time.Now().Add(-acl.BindWindow-time.Minute))
	expectCode(t, invokeCmd(t, raw, s.Addr(), remoting.NewRequest(int32(protocol.GetTopicStatsInfo), old, nil)), protocol.NoPermission, "a stale signature")
}

// TestBrokerACLUpdateConfigIsAdmin: a plain account set
// diskMaxUsedSpaceRatio=1 and stopped every send. RocketMQ lists
// UPDATE_BROKER_CONFIG as an admin code; so does zonemq now.
func TestBrokerACLUpdateConfigIsAdmin(t *testing.T) {
	s, raw, _ := aclWithSecretTopic(t)
	before := s.store.DiskMaxUsedRatio()
	resp := signedInvoke(t, raw, s.Addr(), protocol.UpdateBrokerConfig, nil, []byte("diskMaxUsedSpaceRatio=1\n"), aclAppKey, aclAppSecret)
	expectCode(t, resp, protocol.NoPermission, "a plain account's UPDATE_BROKER_CONFIG")
	testutil.Equal(t, s.store.DiskMaxUsedRatio(), before, "diskMaxUsedSpaceRatio")
	h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: aclTopic, DefaultTopic: protocol.AutoCreateTopicKey,
		DefaultTopicQueueNums: 1, BornTimestamp: time.Now().UnixMilli()}
	expectCode(t, signedInvoke(t, raw, s.Addr(), protocol.SendMessage, h.Ext(), []byte("x"), aclAppKey, aclAppSecret), protocol.Success, "a send after it")
}

// TestBrokerACLContentPathsCheckTheRecordsTopic: every path that returns or
// copies a message checks SUB on the topic the record belongs to, not on a
// topic the request names. Issue 22: VIEW_MESSAGE_BY_ID walked every
// topic, and CONSUMER_SEND_MSG_BACK of another topic's offset copied that
// message into the caller's retry topic.
func TestBrokerACLContentPathsCheckTheRecordsTopic(t *testing.T) {
	s, raw, off := aclWithSecretTopic(t)
	view := protocol.ViewMessageRequestHeader{Offset: off}
	resp := signedInvoke(t, raw, s.Addr(), protocol.ViewMessageByID, view.Ext(), nil, aclAppKey, aclAppSecret)
	expectCode(t, resp, protocol.NoPermission, "viewing another topic's record by offset")
	testutil.True(t, !strings.Contains(string(resp.Body), "secret body"), "the body leaked")
	expectCode(t, signedInvoke(t, raw, s.Addr(), protocol.ViewMessageByID, view.Ext(), nil, aclAdminKey, aclAdminSecret), protocol.Success, "the admin's view")

	back := map[string]string{"group": "acl_consumer", "offset": strconv.FormatInt(off, 10), "delayLevel": "0", "originMsgId": "x", "originTopic": aclTopic}
	resp = signedInvoke(t, raw, s.Addr(), protocol.ConsumerSendMsgBack, back, nil, aclAppKey, aclAppSecret)
	expectCode(t, resp, protocol.NoPermission, "sending another topic's record back into the caller's retry topic")
	got := maxOffset(t, raw, s.Addr(), protocol.RetryTopic("acl_consumer"))
	testutil.True(t, got == "" || got == "0", "records copied to the retry topic:", got)

	// QUERY_MESSAGE names its topic; the account needs SUB on it.
	q := protocol.QueryMessageRequestHeader{Topic: secretTopic, Key: "secret-key", MaxNum: 32, EndTimestamp: time.Now().Add(time.Hour).UnixMilli()}
	expectCode(t, signedInvoke(t, raw, s.Addr(), protocol.QueryMessage, q.Ext(), nil, aclAppKey, aclAppSecret), protocol.NoPermission, "querying another topic by key")
}

func copyExt(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// stockSign signs ext and body as a stock RocketMQ ACL 1.0 client does:
// HMAC-SHA1 over the values in sorted-key order and the body, binding
// neither the request code nor a time.
func stockSign(ext map[string]string, body []byte, ak, sk string) {
	ext[acl.ExtAccessKey] = ak
	keys := make([]string, 0, len(ext))
	for k := range ext {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	mac := hmac.New(sha1.New, []byte(sk))
	for _, k := range keys {
		mac.Write([]byte(ext[k]))
	}
	mac.Write(body)
	ext[acl.ExtSignature] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// TestBrokerACLEndTransactionNeedsPub: resolving a half message commits it
// into, or drops it from, its real topic, so only an account that may send
// there may do it; the producer's own commit still works.
func TestBrokerACLEndTransactionNeedsPub(t *testing.T) {
	s, raw, _ := aclWithSecretTopic(t)
	const group = "tx_pg"
	h := protocol.SendMessageRequestHeader{ProducerGroup: group, Topic: secretTopic, SysFlag: protocol.SysFlagTransactionPrep,
		BornTimestamp: time.Now().UnixMilli(), Properties: protocol.EncodeProperties(map[string]string{
			protocol.PropertyTransactionPrepared: "true", protocol.PropertyProducerGroup: group, protocol.PropertyUniqClientMessageID: "U-tx"})}
	resp := signedInvoke(t, raw, s.Addr(), protocol.SendMessage, h.Ext(), []byte("tx-body"), aclAdminKey, aclAdminSecret)
	expectCode(t, resp, protocol.Success, "the admin's half message")
	var rh protocol.SendMessageResponseHeader
	testutil.NoError(t, rh.SetExt(resp.ExtFields))
	_, off, err := protocol.ParseOffsetMessageID(rh.MsgID)
	testutil.NoError(t, err)
	end := func(ak, sk string) *remoting.Command {
		eh := endTransactionHeader{ProducerGroup: group, TranStateTableOffset: rh.QueueOffset, CommitLogOffset: off,
			CommitOrRollback: protocol.SysFlagTransactionCommit, MsgID: "U-tx"}
		return signedInvoke(t, raw, s.Addr(), protocol.EndTransaction, eh.ext(), nil, ak, sk)
	}
	expectCode(t, end(aclAppKey, aclAppSecret), protocol.NoPermission, "another account committing the admin's transaction")
	testutil.Equal(t, maxOffset(t, raw, s.Addr(), secretTopic), "1", "messages in the real topic after the refused commit")
	expectCode(t, end(aclAdminKey, aclAdminSecret), protocol.Success, "the producer's own commit")
	testutil.Equal(t, maxOffset(t, raw, s.Addr(), secretTopic), "2", "messages in the real topic after the commit")
}
