package proxy_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/zonemq/zonemq/internal/rmqpb"
)

// BenchmarkAccessPointSend sends 1 KiB messages through an access point
// with 64 calls in flight, over one plaintext gRPC connection (our own
// generated stub: the official client cannot share this binary). It
// measures the access point and the brokers behind it, in one process.
func BenchmarkAccessPointSend(b *testing.B) {
	_, ap := clusterB(b, "V5Bench")
	cl, ctx := rawGRPC(b, ap.Addr(), "bench-client")
	body := make([]byte, 1024)
	var n atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := n.Add(1)
				if i > int64(b.N) {
					return
				}
				id := fmt.Sprintf("BENCH%027d", i)
				resp, err := cl.SendMessage(ctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{{
					Topic:            &rmqpb.Resource{Name: "V5Bench"},
					SystemProperties: &rmqpb.SystemProperties{MessageId: id, MessageType: rmqpb.MessageType_NORMAL},
					Body:             body,
				}}})
				if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK {
					b.Errorf("send: %v %v", err, resp.GetStatus())
					return
				}
			}
		}()
	}
	wg.Wait()
}

// rawGRPC is our own generated stub on a plaintext connection to addr (closed
// at the end of the test), and a context carrying clientID.
func rawGRPC(t testing.TB, addr, clientID string) (rmqpb.MessagingServiceClient, context.Context) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rmqpb.NewMessagingServiceClient(conn), metadata.AppendToOutgoingContext(context.Background(), "x-mq-client-id", clientID)
}
