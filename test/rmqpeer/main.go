// Command rmqpeer runs the stock remoting Go client,
// github.com/apache/rocketmq-client-go/v2, as one application of the chaos
// campaign (`zonemq drill --chaos --stock-peer BINARY`): a producer sending
// a message every --interval and a push consumer (clustering) reading the
// same topic, both finding the name servers through an address server as
// a RocketMQ user would (WithNameServerDomain). It writes one JSON object
// per line on stdout:
//
//	{"op":"attempt","key":K}                       before each send
//	{"op":"send","key":K,"broker":B,"queueId":Q,"queueOffset":O,"startNs":S,"endNs":E}
//	{"op":"fail","key":K,"err":"…"}                a send that returned an error
//	{"op":"recv","key":K,"broker":B,"queueId":Q,"queueOffset":O,"ts":MS}
//
// A line "stop" on stdin ends the sending; SIGTERM or SIGINT ends the
// process after the consumer shut down (it commits its offsets).
//
//	rmqpeer --addrsrv URL --topic T --group G --producer-group PG --prefix P [--interval D]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rmqpeer:", err)
		os.Exit(1)
	}
}

// out writes the JSON lines; one line per Write, whole.
type out struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (o *out) line(v map[string]any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_ = o.enc.Encode(v)
}

func run() error {
	fs := flag.NewFlagSet("rmqpeer", flag.ContinueOnError)
	addrsrv := fs.String("addrsrv", "", "the address server's base URL (http://host:port)")
	topic := fs.String("topic", "", "the topic to send to and consume")
	group := fs.String("group", "", "the consumer group")
	pgroup := fs.String("producer-group", "", "the producer group")
	prefix := fs.String("prefix", "", "the prefix of every message key (unique per run)")
	instance := fs.String("instance", "", "the client instance name (default: the prefix)")
	interval := fs.Duration("interval", 20*time.Millisecond, "the pause between sends")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if *addrsrv == "" || *topic == "" || *group == "" || *pgroup == "" || *prefix == "" {
		return fmt.Errorf("--addrsrv, --topic, --group, --producer-group and --prefix are required")
	}
	if *instance == "" {
		*instance = *prefix
	}
	rlog.SetLogLevel("warn")
	domain := *addrsrv + "/rocketmq/nsaddr"
	o := &out{enc: json.NewEncoder(os.Stdout)}

	c, err := consumer.NewPushConsumer(
		consumer.WithGroupName(*group),
		consumer.WithInstance(*instance+"-c"),
		consumer.WithNameServerDomain(domain),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err != nil {
		return err
	}
	err = c.Subscribe(*topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				o.line(map[string]any{"op": "recv", "key": m.GetKeys(), "broker": m.Queue.BrokerName,
					"queueId": m.Queue.QueueId, "queueOffset": m.QueueOffset, "ts": time.Now().UnixMilli()})
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return fmt.Errorf("starting the consumer: %w", err)
	}
	p, err := producer.NewDefaultProducer(
		producer.WithGroupName(*pgroup),
		producer.WithInstanceName(*instance+"-p"),
		producer.WithNameServerDomain(domain),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(3*time.Second),
	)
	if err != nil {
		c.Shutdown()
		return err
	}
	if err := p.Start(); err != nil {
		c.Shutdown()
		return fmt.Errorf("starting the producer: %w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	sendCtx, stopSending := context.WithCancel(ctx)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "stop" {
				stopSending()
			}
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; sendCtx.Err() == nil; n++ {
			key := *prefix + strconv.Itoa(n)
			o.line(map[string]any{"op": "attempt", "key": key})
			start := time.Now()
			msg := primitive.NewMessage(*topic, []byte("body of "+key)).WithKeys([]string{key})
			r, err := p.SendSync(context.Background(), msg)
			end := time.Now()
			switch {
			case err != nil:
				o.line(map[string]any{"op": "fail", "key": key, "err": err.Error()})
			case r.Status != primitive.SendOK:
				o.line(map[string]any{"op": "fail", "key": key, "err": fmt.Sprintf("send status %d", r.Status)})
			default:
				o.line(map[string]any{"op": "send", "key": key, "broker": r.MessageQueue.BrokerName,
					"queueId": r.MessageQueue.QueueId, "queueOffset": r.QueueOffset,
					"startNs": start.UnixNano(), "endNs": end.UnixNano()})
			}
			select {
			case <-sendCtx.Done():
			case <-time.After(*interval):
			}
		}
	}()
	<-ctx.Done()
	stopSending()
	<-done
	p.Shutdown()
	c.Shutdown()
	return nil
}
