package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
)

// chaosLine is one line of the chaos mode, in test/rmqpeer's format.
type chaosLine struct {
	Op          string `json:"op"`
	Key         string `json:"key"`
	Broker      string `json:"broker,omitempty"`
	QueueID     int    `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	StartNs     int64  `json:"startNs,omitempty"`
	EndNs       int64  `json:"endNs,omitempty"`
	TS          int64  `json:"ts,omitempty"`
	Err         string `json:"err,omitempty"`
}

// chaos sends every --interval and consumes the same topic until SIGTERM.
func chaos(args []string, stdout io.Writer, stdin io.Reader) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "access point(s), HOST:PORT[;HOST:PORT]")
	topic := fs.String("topic", "", "topic")
	group := fs.String("group", "", "consumer group")
	prefix := fs.String("prefix", "v5-", "key prefix: keys are PREFIXn")
	interval := fs.Duration("interval", 50*time.Millisecond, "pause between two sends")
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	if *endpoint == "" || *topic == "" || *group == "" {
		fmt.Fprintln(os.Stderr, "v5peer chaos: --endpoint, --topic and --group are required")
		os.Exit(2)
	}
	setup(false)
	var mu sync.Mutex
	enc := json.NewEncoder(stdout)
	emit := func(l chaosLine) {
		mu.Lock()
		defer mu.Unlock()
		enc.Encode(l)
	}
	creds := &credentials.SessionCredentials{}
	pc, err := rmq.NewPushConsumer(&rmq.Config{Endpoint: *endpoint, ConsumerGroup: *group, Credentials: creds},
		rmq.WithPushSubscriptionExpressions(map[string]*rmq.FilterExpression{*topic: rmq.SUB_ALL}),
		rmq.WithPushMessageListener(&rmq.FuncMessageListener{Consume: func(mv *rmq.MessageView) rmq.ConsumerResult {
			l := chaosLine{Op: "recv", Key: string(mv.GetBody()), QueueOffset: mv.GetOffset(), TS: time.Now().UnixMilli()}
			// zonemq's receipt handle is broker/queue:offset:nonce.
			if broker, rest, ok := strings.Cut(mv.GetReceiptHandle(), "/"); ok {
				if parts := strings.Split(rest, ":"); len(parts) == 3 {
					q, err1 := strconv.Atoi(parts[0])
					off, err2 := strconv.ParseInt(parts[1], 10, 64)
					if err1 == nil && err2 == nil {
						l.Broker, l.QueueID, l.QueueOffset = broker, q, off
					}
				}
			}
			emit(l)
			return rmq.SUCCESS
		}}))
	if err != nil {
		return err
	}
	if err := pc.Start(); err != nil {
		return err
	}
	p, err := rmq.NewProducer(&rmq.Config{Endpoint: *endpoint, Credentials: creds}, rmq.WithTopics(*topic))
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	stopSend := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "stop" {
				close(stopSend)
				return
			}
		}
	}()
	tick := time.NewTicker(*interval)
	defer tick.Stop()
send:
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			break send
		case <-stopSend:
			break send
		case <-tick.C:
		}
		key := *prefix + strconv.Itoa(n)
		emit(chaosLine{Op: "attempt", Key: key})
		m := &rmq.Message{Topic: *topic, Body: []byte(key)}
		m.SetKeys(key)
		start := time.Now()
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		receipts, err := p.Send(sctx, m)
		scancel()
		end := time.Now()
		if err != nil || len(receipts) == 0 {
			emit(chaosLine{Op: "fail", Key: key, Err: fmt.Sprint(err)})
			continue
		}
		emit(chaosLine{Op: "send", Key: key, QueueOffset: receipts[0].Offset, StartNs: start.UnixNano(), EndNs: end.UnixNano()})
	}
	<-ctx.Done()
	p.GracefulStop()
	stopPush(pc)
	return nil
}
