package client_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/broker"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/testutil"
)

const sdkACL = `accounts:
  - accessKey: clusterAdmin
    secretKey: clusterSecret
    admin: true
  - accessKey: sdkUser01
    secretKey: sdkSecret01
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - SdkAclTopic=PUB|SUB
    groupPerms:
      - sdk_acl_group=SUB
`

// TestSDKACLCredentials: with ACL on, the SDK signs with its credentials
// and produces and consumes; without them it is refused with NO_PERMISSION.
func TestSDKACLCredentials(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	testutil.NoError(t, os.WriteFile(path, []byte(sdkACL), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Options{IDCs: 1, DataDir: t.TempDir(), Logger: testLogger(),
		Namesrv: func(_ int, o *namesrv.Options) { o.ACLFile = path },
		Broker: func(_ int, o *broker.Options) {
			o.ACLFile, o.AccessKey, o.SecretKey = path, "clusterAdmin", "clusterSecret"
		},
		AccessKey: "clusterAdmin", SecretKey: "clusterSecret"})
	testutil.NoError(t, err, "devcluster.Start")
	t.Cleanup(func() { c.Close() })

	const topic = "SdkAclTopic"
	adminCfg := clientConfig(c, 1)
	adm, err := admin.New(admin.Config{ClientConfig: adminCfg})
	testutil.NoError(t, err)
	testutil.NoError(t, adm.Start(ctx))
	t.Cleanup(func() { adm.Shutdown(context.Background()) })
	testutil.NoError(t, adm.CreateTopic(ctx, admin.TopicSpec{Topic: topic, Queues: 2}), "CreateTopic")
	testutil.Eventually(t, 10*time.Second, func() error {
		_, err := adm.TopicRoute(ctx, topic)
		return err
	})

	bare := clientConfig(c, 1)
	bare.AccessKey, bare.SecretKey = "", ""
	p := newProducer(t, bare)
	_, err = p.SendSync(ctx, &client.Message{Topic: topic, Body: []byte("no")})
	var re *client.ResponseError
	testutil.True(t, errors.As(err, &re) && re.Code == client.CodeNoPermission, "send without credentials: %v", err)

	app := clientConfig(c, 1)
	app.AccessKey, app.SecretKey = "sdkUser01", "sdkSecret01"
	p = newProducer(t, app)
	keys, _ := sendN(t, p, topic, "acl", 20)
	rec := newRecorder()
	newConsumer(t, app, "sdk_acl_group", topic, rec.handler("c1"))
	rec.waitAll(t, keys, 30*time.Second)

}
