// Command v5peer runs the official RocketMQ 5 Go client
// (github.com/apache/rocketmq-clients/golang/v5) against an access point,
// for zonemq's tests. It runs as its own process: the client registers the
// same protobuf names as zonemq's internal/rmqpb, so the two cannot share a
// binary. It writes one JSON object per line on stdout:
//
//	v5peer produce --endpoint HOST:PORT --topic T --count N [--prefix P] [--tag T] [--keys K]
//	               [--fifo-group G] [--delay D] [--tls] [--access-key K --secret-key S] [--inflight N] [--size B]
//	               [--interval D] [--recall-every K]
//
// prints {"op":"send","body":…,"id":…,"err":…} per message and a final
// {"op":"done","sent":n,"failed":m,"elapsedMs":t} (t: the sending, after the
// client's start).
//
//	v5peer transaction --endpoint … --topic T --count N --end commit|rollback|none [--check commit|rollback] [--wait D]
//
// sends N transactional messages and ends each as --end says ("none"
// leaves them to the broker's check, which --check answers); prints
// {"op":"send",…}, {"op":"end",…} and {"op":"check","body":…} lines, waits
// --wait for checks, then {"op":"done","sent":n,"failed":m}.
//
//	v5peer simple --endpoint … --topic T --group G --count N [--invisible D] [--await D]
//	              [--skip-ack-first K] [--sql EXPR] [--timeout D] [--tls]
//	v5peer push   --endpoint … --topic T --group G --count N [--handler-delay D] [--timeout D] [--tls]
//
// receive until N distinct bodies are acked (or the timeout), printing
// {"op":"recv","body":…,"id":…,"attempt":n} per delivery, {"op":"ack",…}
// per ack and a final {"op":"done","acked":n}; --skip-ack-first K leaves
// the first K deliveries unacked, so they come again. Failed calls are
// reported, not fatal; the exit code is 2 for bad flags and 1 when the
// client cannot start.
//
//	v5peer chaos --endpoint … --topic T --group G --prefix P [--interval D]
//
// is one application of the chaos campaign (`zonemq drill --chaos
// --v5-peer BINARY`): a producer sending a message (key and body P-n) every
// --interval and a PushConsumer of the same topic, printing the lines
// test/rmqpeer prints ({"op":"attempt"|"send"|"fail"|"recv","key":…}; a
// delivery's broker, queue and offset come from zonemq's receipt handle).
// A line "stop" on stdin ends the sending; SIGTERM ends the process.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	"github.com/apache/rocketmq-clients/golang/v5/pkg/zaplog"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: v5peer produce [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "produce":
		err = produce(os.Args[2:], os.Stdout)
	case "transaction":
		err = transact(os.Args[2:], os.Stdout)
	case "simple":
		err = consume(os.Args[2:], os.Stdout, false)
	case "push":
		err = consume(os.Args[2:], os.Stdout, true)
	case "chaos":
		err = chaos(os.Args[2:], os.Stdout, os.Stdin)
	default:
		fmt.Fprintf(os.Stderr, "v5peer: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "v5peer:", err)
		os.Exit(1)
	}
}

// setup quiets the client's own logging (it writes to $HOME/logs by
// default) and chooses TLS, before any client exists.
//
// The client has a second logger: every RPC is logged at info level to the
// fixed file /tmp/rocketmq-logger.log, shared by every client process on
// the machine and never rotated away in practice. Its connection options
// would take another logger, but the client dials through NewRpcClient
// without options, so the exported hook is wrapped to point that log into
// this run's log directory.
func setup(useTLS bool) {
	os.Setenv("mq.consoleAppender.enabled", "false")
	os.Setenv("rocketmq.client.logLevel", "error")
	if dir, err := os.MkdirTemp("", "v5peer-logs-"); err == nil {
		os.Setenv("rocketmq.client.logRoot", dir)
		rpcLog := zaplog.New(zaplog.WithFileName(filepath.Join(dir, "rpc.log")))
		newRPC := rmq.NewRpcClient
		rmq.NewRpcClient = func(target string, opts ...rmq.RpcClientOption) (rmq.RpcClient, error) {
			return newRPC(target, append(opts, rmq.WithRpcClientConnOption(rmq.WithZapLogger(rpcLog)))...)
		}
	}
	rmq.ResetLogger()
	rmq.EnableSsl = useTLS
}

type line struct {
	Op      string `json:"op"`
	Body    string `json:"body,omitempty"`
	ID      string `json:"id,omitempty"`
	Attempt int32  `json:"attempt,omitempty"`
	Err     string `json:"err,omitempty"`
	Sent    int    `json:"sent,omitempty"`
	Failed  int    `json:"failed,omitempty"`
	Acked   int    `json:"acked,omitempty"`
	Millis  int64  `json:"elapsedMs,omitempty"`
	At      int64  `json:"at,omitempty"` // when a send ended, Unix ms
}

type printer struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (p *printer) print(l line) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.enc.Encode(l)
}

func produce(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "access point(s), HOST:PORT[;HOST:PORT]")
	topic := fs.String("topic", "", "topic")
	count := fs.Int("count", 10, "messages to send")
	prefix := fs.String("prefix", "m", "body prefix: bodies are PREFIX-i")
	tag := fs.String("tag", "", "tag")
	keys := fs.String("keys", "", "a key for every message")
	fifo := fs.String("fifo-group", "", "message group (FIFO)")
	delay := fs.Duration("delay", 0, "deliver this long after sending")
	useTLS := fs.Bool("tls", false, "connect with TLS")
	ak := fs.String("access-key", "", "ACL access key")
	sk := fs.String("secret-key", "", "ACL secret key")
	inflight := fs.Int("inflight", 1, "sends in flight")
	size := fs.Int("size", 0, "pad each body to this many bytes")
	interval := fs.Duration("interval", 0, "pause between one worker's sends")
	recallEvery := fs.Int("recall-every", 0, "with --delay: recall every Kth message (0, K, 2K, …) after sending it")
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	if *endpoint == "" || *topic == "" || *count < 1 || *inflight < 1 {
		fmt.Fprintln(os.Stderr, "v5peer produce: --endpoint, --topic and a positive --count and --inflight are required")
		os.Exit(2)
	}
	setup(*useTLS)
	p, err := rmq.NewProducer(&rmq.Config{
		Endpoint:    *endpoint,
		Credentials: &credentials.SessionCredentials{AccessKey: *ak, AccessSecret: *sk},
	}, rmq.WithTopics(*topic))
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	defer p.GracefulStop()

	out := &printer{enc: json.NewEncoder(stdout)}
	var (
		wg           sync.WaitGroup
		mu           sync.Mutex
		sent, failed int
	)
	next := make(chan int)
	for w := 0; w < *inflight; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				body := *prefix + "-" + strconv.Itoa(i)
				raw := []byte(body)
				if len(raw) < *size {
					raw = append(raw, make([]byte, *size-len(raw))...)
					body = string(raw[:len(body)])
				}
				m := &rmq.Message{Topic: *topic, Body: raw}
				if *tag != "" {
					m.SetTag(*tag)
				}
				if *keys != "" {
					m.SetKeys(*keys)
				}
				if *fifo != "" {
					m.SetMessageGroup(*fifo)
				}
				if *delay > 0 {
					m.SetDelayTimestamp(time.Now().Add(*delay))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				receipts, err := p.Send(ctx, m)
				cancel()
				l := line{Op: "send", Body: body, At: time.Now().UnixMilli()}
				mu.Lock()
				if err != nil {
					l.Err = err.Error()
					failed++
				} else {
					if len(receipts) > 0 {
						l.ID = receipts[0].MessageID
					}
					sent++
				}
				mu.Unlock()
				out.print(l)
				if err == nil && *recallEvery > 0 && i%*recallEvery == 0 && len(receipts) > 0 {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					_, rerr := p.Recall(ctx, *topic, receipts[0].RecallHandle)
					cancel()
					r := line{Op: "recall", Body: body}
					if rerr != nil {
						r.Err = rerr.Error()
					}
					out.print(r)
				}
				time.Sleep(*interval)
			}
		}()
	}
	start := time.Now()
	for i := 0; i < *count; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	out.print(line{Op: "done", Sent: sent, Failed: failed, Millis: time.Since(start).Milliseconds()})
	return nil
}

// consume runs a SimpleConsumer (push false) or a PushConsumer until count
// distinct bodies are acked or the timeout.
func consume(args []string, stdout io.Writer, push bool) error {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "access point(s), HOST:PORT[;HOST:PORT]")
	topic := fs.String("topic", "", "topic")
	group := fs.String("group", "", "consumer group")
	count := fs.Int("count", 10, "distinct messages to ack")
	invisible := fs.Duration("invisible", 20*time.Second, "invisible time of a receive (simple)")
	await := fs.Duration("await", 5*time.Second, "how long a receive waits for messages (simple)")
	skip := fs.Int("skip-ack-first", 0, "leave the first K deliveries unacked (simple)")
	timeout := fs.Duration("timeout", time.Minute, "give up after")
	handlerDelay := fs.Duration("handler-delay", 0, "how long the push consumer's handler takes per message")
	sql := fs.String("sql", "", "subscribe with this SQL92 expression instead of every tag")
	useTLS := fs.Bool("tls", false, "connect with TLS")
	ak := fs.String("access-key", "", "ACL access key")
	sk := fs.String("secret-key", "", "ACL secret key")
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	if *endpoint == "" || *topic == "" || *group == "" || *count < 1 {
		fmt.Fprintln(os.Stderr, "v5peer consume: --endpoint, --topic, --group and a positive --count are required")
		os.Exit(2)
	}
	setup(*useTLS)
	cfg := &rmq.Config{Endpoint: *endpoint, ConsumerGroup: *group,
		Credentials: &credentials.SessionCredentials{AccessKey: *ak, AccessSecret: *sk}}
	subs := map[string]*rmq.FilterExpression{*topic: rmq.SUB_ALL}
	if *sql != "" {
		subs[*topic] = rmq.NewFilterExpressionWithType(*sql, rmq.SQL92)
	}
	out := &printer{enc: json.NewEncoder(stdout)}
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		done  = make(chan struct{})
		once  sync.Once
	)
	record := func(body string) {
		mu.Lock()
		defer mu.Unlock()
		acked[body] = true
		if len(acked) >= *count {
			once.Do(func() { close(done) })
		}
	}
	deadline := time.After(*timeout)
	if push {
		pc, err := rmq.NewPushConsumer(cfg, rmq.WithPushSubscriptionExpressions(subs),
			rmq.WithPushMessageListener(&rmq.FuncMessageListener{Consume: func(mv *rmq.MessageView) rmq.ConsumerResult {
				out.print(line{Op: "recv", Body: string(mv.GetBody()), ID: mv.GetMessageId(), Attempt: mv.GetDeliveryAttempt()})
				time.Sleep(*handlerDelay)
				record(string(mv.GetBody()))
				return rmq.SUCCESS
			}}))
		if err != nil {
			return err
		}
		if err := pc.Start(); err != nil {
			return err
		}
		defer stopPush(pc)
		select {
		case <-done:
		case <-deadline:
		}
	} else {
		sc, err := rmq.NewSimpleConsumer(cfg, rmq.WithSimpleAwaitDuration(*await), rmq.WithSimpleSubscriptionExpressions(subs))
		if err != nil {
			return err
		}
		if err := sc.Start(); err != nil {
			return err
		}
		defer sc.GracefulStop()
		deliveries := 0
	loop:
		for {
			select {
			case <-done:
				break loop
			case <-deadline:
				break loop
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), *await+5*time.Second)
			mvs, err := sc.Receive(ctx, 16, *invisible)
			cancel()
			if err != nil {
				out.print(line{Op: "recv-error", Err: err.Error()})
				continue
			}
			for _, mv := range mvs {
				out.print(line{Op: "recv", Body: string(mv.GetBody()), ID: mv.GetMessageId(), Attempt: mv.GetDeliveryAttempt()})
				deliveries++
				if deliveries <= *skip {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := sc.Ack(ctx, mv)
				cancel()
				l := line{Op: "ack", Body: string(mv.GetBody()), ID: mv.GetMessageId()}
				if err != nil {
					l.Err = err.Error()
				} else {
					record(string(mv.GetBody()))
				}
				out.print(l)
			}
		}
	}
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	out.print(line{Op: "done", Acked: n})
	return nil
}

// transact sends transactional messages and ends or leaves them.
func transact(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("transaction", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "access point(s), HOST:PORT[;HOST:PORT]")
	topic := fs.String("topic", "", "topic")
	count := fs.Int("count", 3, "messages to send")
	prefix := fs.String("prefix", "t", "body prefix: bodies are PREFIX-i")
	end := fs.String("end", "commit", "commit, rollback or none (left to the check)")
	check := fs.String("check", "commit", "the checker's answer: commit or rollback")
	wait := fs.Duration("wait", 0, "how long to stay up for checks after sending")
	useTLS := fs.Bool("tls", false, "connect with TLS")
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	if *endpoint == "" || *topic == "" || *count < 1 {
		fmt.Fprintln(os.Stderr, "v5peer transaction: --endpoint, --topic and a positive --count are required")
		os.Exit(2)
	}
	setup(*useTLS)
	out := &printer{enc: json.NewEncoder(stdout)}
	answer := rmq.COMMIT
	if *check == "rollback" {
		answer = rmq.ROLLBACK
	}
	p, err := rmq.NewProducer(&rmq.Config{Endpoint: *endpoint, Credentials: &credentials.SessionCredentials{}},
		rmq.WithTopics(*topic),
		rmq.WithTransactionChecker(&rmq.TransactionChecker{Check: func(mv *rmq.MessageView) rmq.TransactionResolution {
			out.print(line{Op: "check", Body: string(mv.GetBody()), ID: mv.GetMessageId()})
			return answer
		}}))
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	defer p.GracefulStop()
	sent, failed := 0, 0
	for i := 0; i < *count; i++ {
		body := *prefix + "-" + strconv.Itoa(i)
		tx := p.BeginTransaction()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		receipts, err := p.SendWithTransaction(ctx, &rmq.Message{Topic: *topic, Body: []byte(body)}, tx)
		cancel()
		l := line{Op: "send", Body: body}
		if err != nil {
			l.Err = err.Error()
			failed++
			out.print(l)
			continue
		}
		sent++
		if len(receipts) > 0 {
			l.ID = receipts[0].MessageID
		}
		out.print(l)
		var endErr error
		switch *end {
		case "commit":
			endErr = tx.Commit()
		case "rollback":
			endErr = tx.RollBack()
		default:
			continue
		}
		e := line{Op: "end", Body: body}
		if endErr != nil {
			e.Err = endErr.Error()
		}
		out.print(e)
	}
	time.Sleep(*wait)
	out.print(line{Op: "done", Sent: sent, Failed: failed})
	return nil
}

// stopPush stops a PushConsumer. GracefulStop waits for the receive in
// flight, a long poll of up to 20 s: give it 3 s, then let the process end.
func stopPush(pc rmq.PushConsumer) {
	stopped := make(chan struct{})
	go func() {
		pc.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(3 * time.Second):
	}
}
