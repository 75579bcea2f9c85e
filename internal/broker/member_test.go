package broker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/member"
	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

func newTestSecret(t *testing.T) *member.Secret {
	t.Helper()
	s, err := member.ParseSecret(member.NewSecretText())
	testutil.NoError(t, err)
	return s
}

// memberCluster is a name server and a sync-replicated group (master in
// idc1, replica in idc2, two copies required) sharing one cluster secret.
func memberCluster(t *testing.T) (secret *member.Secret, ns *namesrv.Server, master, replica *Server) {
	t.Helper()
	secret = newTestSecret(t)
	ns = startNamesrv(t, "127.0.1.1:0", "idc1", func(o *namesrv.Options) { o.ClusterSecret = secret })
	mopts := groupOptions(t, 1, "broker-m", 0, ReplicationSync, ns.Addr())
	mopts.MinInsyncReplicas = 2
	mopts.ClusterSecret = secret
	master, _ = runBroker(t, mopts)
	ropts := groupOptions(t, 2, "broker-m", 1, ReplicationSync, ns.Addr())
	ropts.ClusterSecret = secret
	replica, _ = runBroker(t, ropts)
	waitInSync(t, master, 1)
	return secret, ns, master, replica
}

// TestMemberSecretKeepsTheGroupWorking: with a secret on every member,
// registration, replication and sync acknowledgements work as before.
func TestMemberSecretKeepsTheGroupWorking(t *testing.T) {
	_, ns, master, replica := memberCluster(t)
	c := newRawClient(t)
	createTopic(t, c, master.Addr(), "MemberT", 4)
	waitRoute(t, c, ns.Addr(), "MemberT", master)
	acked := sendKeys(t, c, master.Addr(), "MemberT", "k", 20)
	testutil.Equal(t, len(acked), 20, "acknowledged with the replica in sync")
	waitCaughtUp(t, master, replica)
}

// TestMemberRequestsFromStrangersRefused plays issue 22's unauthenticated
// cluster requests against a cluster with a secret: each is refused
// NO_PERMISSION and changes nothing. Each one, unsigned, was obeyed before.
func TestMemberRequestsFromStrangersRefused(t *testing.T) {
	secret, ns, master, replica := memberCluster(t)
	c := newRawClient(t)
	createTopic(t, c, master.Addr(), "VictimT", 4)
	waitRoute(t, c, ns.Addr(), "VictimT", master)

	refused := func(what string, resp *remoting.Command) {
		t.Helper()
		expectCode(t, resp, protocol.NoPermission, what)
		testutil.True(t, strings.Contains(resp.Remark, "cluster"), what, resp.Remark)
	}

	// A new broker name registering the real broker's topic with perm 0:
	// it took 8 of 8 sends (clients pick among the route's brokers).
	evil := protocol.RegisterBrokerRequestHeader{BrokerName: "broker-evil", BrokerAddr: "127.0.9.9:10911",
		ClusterName: "DefaultCluster", BrokerID: 0, HeartbeatTimeoutMillis: 30000, ZoneName: "idc1"}
	body, _ := json.Marshal(protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: protocol.TopicConfigSerializeWrapper{
		TopicConfigTable: map[string]protocol.TopicConfig{"VictimT": {TopicName: "VictimT", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 0}},
		DataVersion:      protocol.DataVersion{Counter: 1, Timestamp: time.Now().UnixMilli()}}, FilterServerList: []string{}})
	refused("REGISTER_BROKER of a stranger", invoke(t, c, ns.Addr(), protocol.RegisterBroker, evil.Ext(), body))
	addr, _, err := registeredAt(t, c, ns.Addr(), "broker-evil")
	testutil.NoError(t, err)
	testutil.Equal(t, addr, "", "broker-evil's registered address")

	// A fake replica: HELLO and FETCH would have read the log and counted
	// it in sync for --min-insync-replicas 2.
	hello := protocol.ReplicaHelloRequestHeader{BrokerName: "broker-m", ReplicaID: 2, ReplicaAddr: "127.0.9.9:10911", IDC: "idcEVIL"}
	refused("REPLICA_HELLO of a stranger", invoke(t, c, master.Addr(), protocol.ReplicaHello, hello.Ext(), nil))
	fetch := protocol.ReplicaFetchRequestHeader{BrokerName: "broker-m", ReplicaID: 2, Offset: 0, MaxBytes: 1 << 20}
	refused("REPLICA_FETCH of a stranger", invoke(t, c, master.Addr(), protocol.ReplicaFetch, fetch.Ext(), nil))
	testutil.Equal(t, len(master.repl.replicaStates()), 1, "replicas the master knows")

	// Offsets set from outside the group.
	meta, _ := json.Marshal(protocol.ReplicaMeta{})
	refused("REPLICA_SYNC_META of a stranger", invoke(t, c, master.Addr(), protocol.ReplicaSyncMeta,
		map[string]string{"brokerName": "broker-m", "replicaId": "1"}, meta))

	// A promotion at epoch 2^40 gave two masters and lost acknowledged
	// messages.
	promote := protocol.ReplicaPromoteRequestHeader{BrokerName: "broker-m", Epoch: 1 << 40, LogEnd: -1}
	refused("REPLICA_PROMOTE of a stranger", invoke(t, c, replica.Addr(), protocol.ReplicaPromote, promote.Ext(), nil))
	testutil.True(t, !replica.IsMaster(), "the replica stayed a replica")
	sw := protocol.ReplicaSwitchRequestHeader{BrokerName: "broker-m", To: 1}
	refused("REPLICA_SWITCH of a stranger", invoke(t, c, master.Addr(), protocol.ReplicaSwitch, sw.Ext(), nil))
	testutil.True(t, master.IsMaster(), "the master stayed master")

	// Signed with another cluster's secret, or replayed after the window.
	other := newTestSecret(t)
	req := remoting.NewRequest(int32(protocol.ReplicaPromote), promote.Ext(), nil)
	other.Sign(req.Code, req.ExtFields, nil, time.Now())
	refused("REPLICA_PROMOTE signed with another secret", invokeCmd(t, c, replica.Addr(), req))
	req = remoting.NewRequest(int32(protocol.ReplicaPromote), promote.Ext(), nil)
	secret.Sign(req.Code, req.ExtFields, nil, time.Now().Add(-member.Window-time.Minute))
	refused("REPLICA_PROMOTE replayed after the window", invokeCmd(t, c, replica.Addr(), req))
	testutil.True(t, !replica.IsMaster(), "the replica stayed a replica")

	// Through it all every send is acknowledged by the real group.
	acked := sendKeys(t, c, master.Addr(), "VictimT", "v", 8)
	testutil.Equal(t, len(acked), 8, "acknowledged")
	waitCaughtUp(t, master, replica)
	testutil.Equal(t, len(readKeys(t, c, master.Addr(), "VictimT", 4)), 8, "readable on the master")
}

// invokeCmd sends a prepared request and fails the test on a transport
// error.
func invokeCmd(t *testing.T, c *remoting.Client, addr string, req *remoting.Command) *remoting.Command {
	t.Helper()
	resp, err := c.Invoke(t.Context(), addr, req)
	if err != nil {
		t.Fatal(fmt.Errorf("%s to %s: %w", protocol.RequestCode(req.Code), addr, err))
	}
	return resp
}

// TestMemberSecretWithACL: the member MAC and the ACL signature nest (the
// ACL's binding fields are added after the MAC): a name server and a
// sync-replicated group with both on register, replicate and acknowledge.
func TestMemberSecretWithACL(t *testing.T) {
	secret := newTestSecret(t)
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	testutil.NoError(t, os.WriteFile(path, []byte(testACL), 0o600))
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", func(o *namesrv.Options) { o.ClusterSecret, o.ACLFile = secret, path })
	group := func(idc int, id int64) Options {
		o := groupOptions(t, idc, "broker-both", id, ReplicationSync, ns.Addr())
		o.ClusterSecret, o.ACLFile = secret, path
		o.AccessKey, o.SecretKey = aclAdminKey, aclAdminSecret
		o.MinInsyncReplicas = 2
		return o
	}
	master, _ := runBroker(t, group(1, 0))
	replica, _ := runBroker(t, group(2, 1))
	waitInSync(t, master, 1)
	c := newRawClient(t)
	create := protocol.CreateTopicRequestHeader{Topic: aclTopic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	expectCode(t, signedInvoke(t, c, master.Addr(), protocol.UpdateAndCreateTopic, create.Ext(), nil, aclAdminKey, aclAdminSecret), protocol.Success, "create")
	h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: aclTopic, DefaultTopic: protocol.AutoCreateTopicKey,
		DefaultTopicQueueNums: 1, BornTimestamp: time.Now().UnixMilli()}
	for range 5 {
		expectCode(t, signedInvoke(t, c, master.Addr(), protocol.SendMessage, h.Ext(), []byte("x"), aclAppKey, aclAppSecret), protocol.Success, "send with two copies")
	}
	waitCaughtUp(t, master, replica)
	testutil.Eventually(t, 15*time.Second, func() error {
		resp := signedInvoke(t, c, ns.Addr(), protocol.GetRouteInfoByTopic, map[string]string{"topic": aclTopic}, nil, aclAppKey, aclAppSecret)
		if resp.Code != int32(protocol.Success) {
			return fmt.Errorf("route: %d %s", resp.Code, resp.Remark)
		}
		return nil
	})
}
