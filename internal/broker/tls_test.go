package broker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// tlsCluster starts a name server and a broker serving TLS in mode with a
// self-signed certificate made for the test; the broker registers over
// TLS. It returns a raw TLS client trusting the certificate.
func tlsCluster(t *testing.T, mode remoting.TLSMode) (*namesrv.Server, *Server, *remoting.Client) {
	t.Helper()
	certFile, keyFile := testutil.SelfSignedCert(t, t.TempDir(), "zonemq", "127.0.1.1")
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", func(o *namesrv.Options) {
		o.TLSMode, o.TLSCertFile, o.TLSKeyFile = mode, certFile, keyFile
	})
	clientTLS, err := remoting.ClientTLSConfig(certFile, false)
	testutil.NoError(t, err)
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-tls", ns.Addr())
	opts.TLSMode, opts.TLSCertFile, opts.TLSKeyFile = mode, certFile, keyFile
	opts.NamesrvTLS = clientTLS
	s := startBroker(t, opts)
	raw := remoting.NewClient(remoting.ClientOptions{Dial: remoting.TLSDialer(clientTLS, nil)})
	t.Cleanup(func() { raw.Close() })
	return ns, s, raw
}

// TestBrokerTLSRocketMQClient: rocketmq-client-go with WithTls(true)
// produces and consumes through a name server and broker that enforce TLS;
// a plain connection is refused.
func TestBrokerTLSRocketMQClient(t *testing.T) {
	// WithTls writes through a pointer to rocketmq-client-go's package-level
	// default remoting config, so it would turn TLS on for every client the
	// rest of this test binary creates. Registered first, this cleanup runs
	// last, after this test's clients have shut down, and turns it off again.
	t.Cleanup(func() {
		if _, err := producer.NewDefaultProducer(producer.WithTls(false),
			producer.WithNsResolver(primitive.NewPassthroughResolver([]string{"127.0.0.1:1"}))); err != nil {
			t.Errorf("resetting rocketmq-client-go's TLS default: %v", err)
		}
	})
	ns, s, raw := tlsCluster(t, remoting.TLSEnforcing)
	const topic = "TlsTopic"
	createTopic(t, raw, s.Addr(), topic, 2)
	waitRoute(t, raw, ns.Addr(), topic, s)

	plain := remoting.NewClient(remoting.ClientOptions{DialTimeout: 2 * time.Second})
	defer plain.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := plain.Invoke(ctx, s.Addr(), remoting.NewRequest(int32(protocol.GetBrokerRuntimeInfo), nil, nil))
	cancel()
	testutil.True(t, err != nil, "a plain request to an enforcing broker was answered")

	p := startRocketMQProducer(t, ns.Addr(), "tls_pg", "tls-p", producer.WithTls(true), producer.WithRetry(2))
	rmqRoundTrip(t, p.SendSync, ns.Addr(), topic, "tls", "tls_consumer", consumer.WithTls(true))
}

// TestBrokerTLSPermissive: during a migration one port serves TLS and
// plain clients side by side.
func TestBrokerTLSPermissive(t *testing.T) {
	ns, s, tlsRaw := tlsCluster(t, remoting.TLSPermissive)
	const topic = "MixedTopic"
	createTopic(t, tlsRaw, s.Addr(), topic, 1)
	plain := newRawClient(t)
	waitRoute(t, plain, ns.Addr(), topic, s)
	waitRoute(t, tlsRaw, ns.Addr(), topic, s)
	expectCode(t, sendRaw(t, plain, s.Addr(), topic, 0, nil, []byte("plain")), protocol.Success, "plain send")
	expectCode(t, sendRaw(t, tlsRaw, s.Addr(), topic, 0, nil, []byte("tls")), protocol.Success, "TLS send")
	msgs := decodeAll(t, pullRaw(t, plain, s.Addr(), "mixed_g", topic, 0, 0, "*", 32).Body)
	testutil.Equal(t, len(msgs), 2, "messages stored from both clients")
}

// TestBrokerReplicationUnderACLAndTLS: a master and its replica that
// enforce TLS and an ACL replicate with the brokers' admin credentials
// over TLS; a client's send reaches the replica; an application account
// cannot use the replication codes.
func TestBrokerReplicationUnderACLAndTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := testutil.SelfSignedCert(t, dir, "zonemq", "127.0.1.1", "127.0.2.1")
	aclFile := filepath.Join(dir, "plain_acl.yml")
	testutil.NoError(t, os.WriteFile(aclFile, []byte(testACL), 0o600))
	clientTLS, err := remoting.ClientTLSConfig(certFile, false)
	testutil.NoError(t, err)
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", func(o *namesrv.Options) {
		o.TLSMode, o.TLSCertFile, o.TLSKeyFile, o.ACLFile = remoting.TLSEnforcing, certFile, keyFile, aclFile
	})
	secure := func(o Options) Options {
		o.TLSMode, o.TLSCertFile, o.TLSKeyFile, o.NamesrvTLS = remoting.TLSEnforcing, certFile, keyFile, clientTLS
		o.ACLFile, o.AccessKey, o.SecretKey = aclFile, aclAdminKey, aclAdminSecret
		return o
	}
	master, _ := runBroker(t, secure(groupOptions(t, 1, "broker-sec", 0, ReplicationSync, ns.Addr())))
	replica, _ := runBroker(t, secure(groupOptions(t, 2, "broker-sec", 1, ReplicationSync, ns.Addr())))
	raw := remoting.NewClient(remoting.ClientOptions{Dial: remoting.TLSDialer(clientTLS, nil)})
	t.Cleanup(func() { raw.Close() })

	create := protocol.CreateTopicRequestHeader{Topic: aclTopic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	expectCode(t, signedInvoke(t, raw, master.Addr(), protocol.UpdateAndCreateTopic, create.Ext(), nil, aclAdminKey, aclAdminSecret), protocol.Success, "create")
	waitInSync(t, master, 1)
	h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: aclTopic, BornTimestamp: time.Now().UnixMilli()}
	expectCode(t, signedInvoke(t, raw, master.Addr(), protocol.SendMessage, h.Ext(), []byte("replicated"), aclAppKey, aclAppSecret), protocol.Success, "sync send")
	waitCaughtUp(t, master, replica)

	fetch := protocol.ReplicaFetchRequestHeader{BrokerName: "broker-sec", ReplicaID: 5, Offset: 0, MaxBytes: 1024}
	expectCode(t, signedInvoke(t, raw, master.Addr(), protocol.ReplicaFetch, fetch.Ext(), nil, aclAppKey, aclAppSecret), protocol.NoPermission, "replica fetch by an application")
}
