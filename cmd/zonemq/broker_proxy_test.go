package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/zonemq/zonemq/internal/rmqpb"
	"github.com/zonemq/zonemq/internal/testutil"
)

var accessPointRE = regexp.MustCompile(`access point on (\S+)`)

// `zonemq broker --proxy-listen` serves the RocketMQ 5 gRPC access point in
// the broker's process: messages sent through it are stored in the
// cluster and read back by a remoting consumer; the access point stops
// with the broker.
func TestBrokerCmdServesTheAccessPoint(t *testing.T) {
	c := cliCluster(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr := &cliBuffer{}, &cliBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- commands["broker"].run(ctx, []string{"--listen", "127.0.1.1:0", "--idc", "idc1", "--name", "broker-ap",
			"--data", filepath.Join(t.TempDir(), "data"), "--addrsrv", c.AddrsrvURL(1), "--proxy-listen", "127.0.1.1:0"}, stdout, stderr)
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			testutil.NoError(t, err, "broker run", stderr.String())
		case <-time.After(15 * time.Second):
			t.Fatal("broker and access point did not stop within 15 s")
		}
	}()
	var addr string
	testutil.Eventually(t, 10*time.Second, func() error {
		m := accessPointRE.FindStringSubmatch(stdout.String())
		if m == nil {
			return fmt.Errorf("no access-point line on stdout %q (stderr %q)", stdout.String(), stderr.String())
		}
		addr = m[1]
		return nil
	})
	testutil.True(t, brokerListeningRE.MatchString(stdout.String()), "the broker's line too", stdout.String())

	// The topic exists once a remoting producer sent to it.
	r := cli(t, cliArgs(c, 1, []string{"send"}, "--topic", "ApT", "--count", "1", "--key-prefix", "R")...)
	testutil.Equal(t, r.code, 0, r.stderr)

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	testutil.NoError(t, err)
	defer conn.Close()
	cl := rmqpb.NewMessagingServiceClient(conn)
	callCtx := metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", "ap-in-broker-test")
	for i := 1; i <= 3; i++ {
		testutil.Eventually(t, 10*time.Second, func() error {
			resp, err := cl.SendMessage(callCtx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{{
				Topic: &rmqpb.Resource{Name: "ApT"},
				SystemProperties: &rmqpb.SystemProperties{MessageId: fmt.Sprintf("APINBROKER%022d", i),
					MessageType: rmqpb.MessageType_NORMAL, Keys: []string{fmt.Sprintf("G-%d", i)}},
				Body: []byte(fmt.Sprintf("through the broker's access point %d", i)),
			}}})
			if err != nil {
				return err
			}
			if resp.GetStatus().GetCode() != rmqpb.Code_OK {
				return fmt.Errorf("send %d: %v", i, resp.GetStatus())
			}
			return nil
		})
	}

	r = cli(t, cliArgs(c, 1, []string{"consume"}, "--topic", "ApT", "--group", "ApG", "--from", "first", "--count", "4",
		"--duration", "20s", "--output", "json")...)
	testutil.Equal(t, r.code, 0, r.stderr)
	for i := 1; i <= 3; i++ {
		want := fmt.Sprintf("through the broker's access point %d", i)
		testutil.True(t, strings.Contains(r.stdout, want), "consumed", want, r.stdout)
	}
}
