package devcluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/testutil"
)

func TestDevclusterStartStopRestart(t *testing.T) {
	ctx := context.Background()
	c, err := Start(ctx, Options{IDCs: 3, DataDir: t.TempDir()})
	testutil.NoError(t, err)
	defer c.Close()
	testutil.Equal(t, c.IDCs(), 3, "IDCs")
	for n := 1; n <= 3; n++ {
		host := fmt.Sprintf("127.0.%d.1:", n)
		for what, addr := range map[string]string{"namesrv": c.NamesrvAddr(n), "broker": c.BrokerAddr(n), "addrsrv": strings.TrimPrefix(c.AddrsrvURL(n), "http://")} {
			if !strings.HasPrefix(addr, host) {
				t.Fatalf("idc%d %s at %s, want %s*", n, what, addr, host)
			}
		}
		cc := c.ClientConfig(n)
		testutil.Equal(t, cc.IDC, IDCName(n), "client IDC")
		testutil.Equal(t, cc.AddrsrvURLs[0], c.AddrsrvURL(n), "own address server first")
		testutil.Equal(t, len(cc.AddrsrvURLs), 3, "address servers")
	}

	// A stopped IDC comes back on the same addresses, with its data, and
	// its broker registers with every name server again.
	brokerAddr, nsAddr := c.BrokerAddr(2), c.NamesrvAddr(2)
	p, err := client.NewProducer(client.ProducerConfig{ClientConfig: c.ClientConfig(2)})
	testutil.NoError(t, err)
	testutil.NoError(t, p.Start(ctx))
	defer p.Shutdown(ctx)
	res, err := p.SendSync(ctx, &client.Message{Topic: "DevTopic", Body: []byte("before")})
	testutil.NoError(t, err)
	testutil.Equal(t, res.IDC, "idc2", "stored in")

	c.StopIDC(2)
	testutil.NoError(t, c.StartIDC(2))
	testutil.Equal(t, c.BrokerAddr(2), brokerAddr, "broker address after restart")
	testutil.Equal(t, c.NamesrvAddr(2), nsAddr, "name server address after restart")
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	testutil.NoError(t, c.WaitRegistered(rctx))

	pc, err := client.NewPullConsumer(client.PullConsumerConfig{ClientConfig: c.ClientConfig(2), Group: "DevGroup"})
	testutil.NoError(t, err)
	testutil.NoError(t, pc.Start(ctx))
	defer pc.Shutdown(ctx)
	r, err := pc.Pull(ctx, res.Queue, res.QueueOffset, 1)
	testutil.NoError(t, err)
	testutil.Equal(t, len(r.Messages), 1, "messages kept across the restart")
	testutil.Equal(t, string(r.Messages[0].Body), "before", "body")

	testutil.NoError(t, c.Close())
	testutil.NoError(t, c.Close())
	if err := c.StartBroker(1); err == nil {
		t.Fatal("StartBroker after Close succeeded")
	}
}

func TestDevclusterOptions(t *testing.T) {
	for _, o := range []Options{{IDCs: -1}, {IDCs: 255}, {BasePort: 60000}} {
		if _, err := Start(context.Background(), o); err == nil {
			t.Fatalf("Start(%+v) succeeded", o)
		}
	}
	c := &Cluster{opts: Options{BasePort: 10000}}
	node := &idcNode{host: "127.0.2.1"}
	testutil.Equal(t, c.listenAddr(node, "", 8080), "127.0.2.1:18080", "address server port")
	testutil.Equal(t, c.listenAddr(node, "", 9876), "127.0.2.1:19876", "name server port")
	testutil.Equal(t, c.listenAddr(node, "", 911), "127.0.2.1:10911", "broker port")
	testutil.Equal(t, c.listenAddr(node, "127.0.2.1:5555", 911), "127.0.2.1:5555", "restart keeps the address")
	free := &Cluster{}
	testutil.Equal(t, free.listenAddr(node, "", 911), "127.0.2.1:0", "free port")
}
