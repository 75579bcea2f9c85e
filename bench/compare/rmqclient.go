package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

const rmqTopic = "BenchTopic"

// runRmqClient is a client process of zonemq that uses the stock Apache
// rocketmq-client-go instead of zonemq's SDK: the broker must keep up with
// a client it does not control. It publishes (--inflight 1: SendSync, from
// --senders goroutines; more: SendAsync with that many sends in flight) or consumes the topic from its
// first offset with a push consumer, and prints a clientResult as JSON.
func runRmqClient(args []string, stdout io.Writer) error {
	f, err := parseClientFlags("rmq-client", "namesrv", "name server host:port", args)
	if err != nil {
		return err
	}
	rlog.SetLogLevel("error") // its log goes to stderr; stdout carries the result
	var res clientResult
	switch f.mode {
	case "publish":
		res, err = rmqPublish(f.addr, f.inflight, f.senders, f.size, f.duration)
	case "consume":
		res, err = rmqConsume(f.addr, f.idle)
	default:
		err = fmt.Errorf("unknown --mode %q", f.mode)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(res)
}

func rmqPublish(namesrv string, inflight, senders, size int, d time.Duration) (clientResult, error) {
	p, err := rocketmq.NewProducer(producer.WithNameServer([]string{namesrv}), producer.WithGroupName("bench_rmq_producer"),
		producer.WithRetry(2), producer.WithSendMsgTimeout(10*time.Second))
	if err != nil {
		return clientResult{}, err
	}
	if err := p.Start(); err != nil {
		return clientResult{}, err
	}
	defer p.Shutdown()
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(rand.Uint32())
	}
	ctx := context.Background()
	newMsg := func() *primitive.Message { return primitive.NewMessage(rmqTopic, body) }
	// The first send creates the topic (auto-create) and warms the route;
	// it is not counted.
	if _, err := p.SendSync(ctx, newMsg()); err != nil {
		return clientResult{}, fmt.Errorf("first send: %w", err)
	}
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	start := time.Now()
	if inflight <= 1 {
		return syncSenders(max(senders, 1), d, func() error {
			_, err := p.SendSync(ctx, newMsg())
			return err
		})
	}
	window := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	for time.Since(start) < d {
		window <- struct{}{}
		wg.Add(1)
		t := time.Now()
		err := p.SendAsync(ctx, func(_ context.Context, _ *primitive.SendResult, err error) {
			took := time.Since(t)
			mu.Lock()
			if err != nil && firstErr == nil {
				firstErr = err
			} else if err == nil {
				lat = append(lat, took)
			}
			mu.Unlock()
			<-window
			wg.Done()
		}, newMsg())
		if err != nil {
			<-window
			wg.Done()
			return clientResult{}, err
		}
	}
	wg.Wait()
	took := time.Since(start)
	if firstErr != nil {
		return clientResult{}, firstErr
	}
	return summarize(lat, took), nil
}

func rmqConsume(namesrv string, idle time.Duration) (clientResult, error) {
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer([]string{namesrv}), consumer.WithGroupName("bench_rmq_consumer"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		return clientResult{}, err
	}
	var n atomic.Int64
	var first, last atomic.Int64 // unix ns
	err = c.Subscribe(rmqTopic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		last.Store(now)
		n.Add(int64(len(msgs)))
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		return clientResult{}, err
	}
	if err := c.Start(); err != nil {
		return clientResult{}, err
	}
	defer c.Shutdown()
	// Stop once nothing arrived for idle (and something did, or the idle
	// time passed twice without any message at all).
	began := time.Now()
	for {
		time.Sleep(100 * time.Millisecond)
		l := last.Load()
		if l == 0 && time.Since(began) > 2*idle+10*time.Second {
			break
		}
		if l != 0 && time.Since(time.Unix(0, l)) > idle {
			break
		}
	}
	res := clientResult{Messages: n.Load()}
	if secs := time.Duration(last.Load() - first.Load()).Seconds(); secs > 0 {
		res.Seconds = secs
		res.MsgsPerSec = float64(res.Messages) / secs
	}
	return res, nil
}
