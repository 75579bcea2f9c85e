package loadgen

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/zonemq/zonemq/internal/rmqpb"
)

// sendThroughAccessPoint is the send phase of `bench --access-point`: the
// RocketMQ 5 protocol (MessagingService.SendMessage, plaintext gRPC) to a
// gRPC access point, from --inflight (else --producers) goroutines with
// one call each in flight, each call one message. It measures the access
// point and the brokers behind it with a client far leaner than the
// official ones (compare them with test/v5peer, docs/grpc.md).
func (r *runner) sendThroughAccessPoint(ctx context.Context) error {
	conn, err := grpc.NewClient(r.o.AccessPoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("access point %s: %v", r.o.AccessPoint, err)
	}
	defer conn.Close()
	svc := rmqpb.NewMessagingServiceClient(conn)
	callCtx := metadata.AppendToOutgoingContext(context.WithoutCancel(ctx), "x-mq-client-id", "zonemq-bench-"+r.runID,
		"x-mq-language", "GOLANG", "x-mq-protocol", "v2")
	workers := r.o.Inflight
	if workers <= 0 {
		workers = r.o.Producers
	}
	prefix := r.keyPrefix()
	count := int64(r.o.Count)
	hists := make([]*latencyHistogram, workers)
	var wg sync.WaitGroup
	r.sendStart = time.Now()
	deadline := r.sendStart.Add(r.o.Duration)
	for i := range hists {
		hists[i] = &latencyHistogram{}
		wg.Add(1)
		go func(h *latencyHistogram) {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				seq := r.seq.Add(1)
				if count > 0 && seq > count {
					return
				}
				if !r.pace(ctx, seq) {
					return
				}
				key := prefix + strconv.FormatInt(seq, 10)
				sctx, cancel := context.WithTimeout(callCtx, r.o.SendTimeout)
				start := time.Now()
				resp, err := svc.SendMessage(sctx, &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{{
					Topic: &rmqpb.Resource{Name: r.o.Topic},
					SystemProperties: &rmqpb.SystemProperties{MessageId: key, Keys: []string{key},
						MessageType: rmqpb.MessageType_NORMAL, BodyEncoding: rmqpb.Encoding_IDENTITY},
					Body: r.body,
				}}})
				took := time.Since(start)
				cancel()
				r.sendCalls.Add(1)
				if err == nil && resp.GetStatus().GetCode() != rmqpb.Code_OK {
					err = fmt.Errorf("%s: %s", resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
				}
				if err != nil {
					r.sendErrs.Add(1)
					r.lastErr.Store(oneLine(err.Error()))
					continue
				}
				h.record(took)
				r.acked.Add(1)
				r.ackedSeqs.addRange(seq, seq)
			}
		}(hists[i])
	}
	wg.Wait()
	r.sendEnd = time.Now()
	for _, h := range hists {
		r.sendHist.merge(h)
	}
	return nil
}
