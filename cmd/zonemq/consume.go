package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/zonemq/zonemq/client"
)

func init() {
	register(command{
		name:    "consume",
		summary: "consume a topic as a group member and print every message with where it came from",
		run:     runConsume,
	})
}

const consumeSynopsis = "--topic T --group G [--tag 'A || B'] [--from first|last] [--broadcast] [--count N] [--duration D] [--output text|json]\n" +
	"                   (--addrsrv URL | --namesrv 'ADDR;ADDR') [--idc NAME]"

// consumeStartedHook, if set (by tests), is called once the consumer has
// started: it holds its queues, and their start offsets are fixed.
var consumeStartedHook func(c *client.PushConsumer)

// consumeOptions is the parsed consume command line.
type consumeOptions struct {
	consumer client.ConsumerConfig
	topic    string
	tag      string
	count    int
	duration time.Duration
	output   string
}

// consumeLine is one message in --output json; the field order is
// docs/architecture.md §6's.
type consumeLine struct {
	TS          int64  `json:"ts"`
	Key         string `json:"key"`
	MsgID       string `json:"msgId"`
	Topic       string `json:"topic"`
	Broker      string `json:"broker"`
	BrokerAddr  string `json:"brokerAddr"`
	IDC         string `json:"idc"`
	QueueID     int    `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	Body        string `json:"body"`
}

func parseConsumeArgs(args []string, stderr io.Writer) (consumeOptions, error) {
	var o consumeOptions
	fs := newFlagSet("consume", consumeSynopsis, stderr)
	cf := addClientFlags(fs)
	fs.StringVar(&o.topic, "topic", "", "topic to consume (required)")
	fs.StringVar(&o.consumer.Group, "group", "", "consumer group (required); offsets are committed for it")
	fs.StringVar(&o.tag, "tag", "*", "tag filter: * for every message, or 'A || B'")
	from := fs.String("from", "last", "where a group with no committed offset starts: first (oldest stored) or last (new messages only)")
	broadcast := fs.Bool("broadcast", false, "broadcasting: every consumer of the group gets every message (offsets kept in memory)")
	fs.IntVar(&o.count, "count", 0, "stop after this many messages (0: no limit)")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long, e.g. 30s (0: no limit)")
	fs.StringVar(&o.output, "output", "text", "text (one readable line per message) or json (one JSON object per line)")
	if err := parseQuiet(fs, args, stderr); err != nil {
		return o, err
	}
	cfg, err := cf.config(stderr)
	if err != nil {
		return o, err
	}
	o.consumer.ClientConfig = cfg
	switch *from {
	case "first":
		o.consumer.ConsumeFromWhere = client.ConsumeFromFirstOffset
	case "last":
		o.consumer.ConsumeFromWhere = client.ConsumeFromLastOffset
	default:
		return o, usagef("--from must be first or last, got %q", *from)
	}
	if *broadcast {
		o.consumer.MessageModel = client.Broadcasting
	}
	switch {
	case o.topic == "":
		return o, usagef("--topic is required")
	case o.consumer.Group == "":
		return o, usagef("--group is required")
	case o.count < 0:
		return o, usagef("--count must not be negative")
	case o.duration < 0:
		return o, usagef("--duration must not be negative")
	}
	// One handler at a time, one message per call: lines come out in queue
	// order, and --count can stop at exactly N (see countdown).
	o.consumer.ConsumeGoroutines = 1
	o.consumer.ConsumeBatchSize = 1
	// A message that arrives after --count was reached goes back to the
	// group's retry queue; bring it back after 1 s, not the default 10 s+.
	o.consumer.RetryDelayLevel = 1
	return o, checkOutput(o.output)
}

func runConsume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseConsumeArgs(args, stderr)
	if err != nil {
		return err
	}
	c, err := client.NewPushConsumer(o.consumer)
	if err != nil {
		return clientError(err)
	}
	out := &lineWriter{w: stdout}
	cd := newCountdown(o.count)
	handler := func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			if !cd.take() {
				// Past --count: hand it back (retry queue) rather than
				// commit an offset past a message nobody printed.
				return client.ConsumeRetryLater
			}
			if err := printMessage(out, o.output, m); err != nil {
				cd.fail(err)
				return client.ConsumeRetryLater
			}
		}
		return client.ConsumeSuccess
	}
	if err := c.Subscribe(o.topic, o.tag, handler); err != nil {
		return clientError(err)
	}
	defer func() {
		// Shutdown commits every queue's offset before it closes.
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Shutdown(sctx); err != nil {
			fmt.Fprintf(stderr, "zonemq consume: warning: stopping the consumer: %s\n", oneLine(err.Error()))
		}
	}()
	if err := c.Start(ctx); err != nil {
		return startError("the consumer", err)
	}
	if consumeStartedHook != nil {
		consumeStartedHook(c)
	}
	if o.output == "text" {
		from := "last (new messages only)"
		if o.consumer.ConsumeFromWhere == client.ConsumeFromFirstOffset {
			from = "first (every stored message)"
		}
		fmt.Fprintf(stderr, "zonemq consume: consuming %s as group %s in IDC %s via name server %s; a new group starts from %s; Ctrl-C stops\n",
			o.topic, o.consumer.Group, orDash(o.consumer.IDC), orDash(c.NameServer()), from)
	}
	stopWatch := watchRoute(ctx, c, o.topic, stderr)
	defer stopWatch()
	var timeout <-chan time.Time
	if o.duration > 0 {
		t := time.NewTimer(o.duration)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
		// A signal is a normal stop; say how far the run got.
		if o.output == "text" {
			fmt.Fprintf(stderr, "zonemq consume: stopped after %d messages\n", cd.taken())
		}
		return nil
	case <-cd.reached:
		return nil
	case err := <-cd.failed:
		return err
	case <-timeout:
		if n := cd.taken(); o.count > 0 && n < o.count {
			return fmt.Errorf("received %d of %d messages in %s", n, o.count, o.duration)
		}
		return nil
	}
}

// countdown counts printed messages against --count. Safe for concurrent
// use.
type countdown struct {
	limit   int // 0: none
	reached chan struct{}
	failed  chan error

	mu       sync.Mutex
	n        int
	failOnce sync.Once
}

func newCountdown(limit int) *countdown {
	return &countdown{limit: limit, reached: make(chan struct{}), failed: make(chan error, 1)}
}

// take claims the right to print one more message; false once the limit is
// reached.
func (c *countdown) take() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.limit > 0 && c.n >= c.limit {
		return false
	}
	c.n++
	if c.n == c.limit {
		close(c.reached)
	}
	return true
}

func (c *countdown) taken() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// fail reports the first output error.
func (c *countdown) fail(err error) {
	c.failOnce.Do(func() { c.failed <- err })
}

// printMessage prints one received message's line.
func printMessage(out *lineWriter, output string, m *client.MessageExt) error {
	key := ""
	if len(m.Keys) > 0 {
		key = m.Keys[0]
	}
	if output == "json" {
		return out.printJSON(consumeLine{
			TS: time.Now().UnixMilli(), Key: key, MsgID: m.MsgID, Topic: m.Topic,
			Broker: m.BrokerName, BrokerAddr: m.BrokerAddr, IDC: m.IDC,
			QueueID: m.QueueID, QueueOffset: m.QueueOffset, Body: string(m.Body),
		})
	}
	tag := ""
	if m.Tags != "" {
		tag = " tag " + m.Tags
	}
	redelivered := ""
	if m.ReconsumeTimes > 0 {
		redelivered = " (redelivery " + strconv.Itoa(m.ReconsumeTimes) + ")"
	}
	return out.printf("received %s ← %s (%s, %s) queue %d offset %d msgId %s%s body %s%s",
		orDash(key), m.BrokerName, orDash(m.IDC), m.BrokerAddr, m.QueueID, m.QueueOffset, m.MsgID, tag,
		strconv.Quote(shorten(m.Body, 60)), redelivered)
}

// shorten cuts a body for a text line, at a rune boundary.
func shorten(b []byte, max int) string {
	if len(b) <= max {
		return string(b)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + "…"
}

// routeWait is how long a consumer may lack a route before the user is
// told: a route normally arrives within one request.
const routeWait = 2 * time.Second

// watchRoute tells the user, on stderr, while topic has no route (it does
// not exist yet), and once more when it appears, so `consume` of a
// mistyped topic does not sit silent. The returned func stops it.
func watchRoute(ctx context.Context, c *client.PushConsumer, topic string, stderr io.Writer) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		start, told := time.Now(), false
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			switch routed := c.TopicRouted(topic); {
			case routed && told:
				fmt.Fprintf(stderr, "zonemq consume: topic %s exists now; consuming\n", topic)
				return
			case routed:
				return
			case !told && time.Since(start) >= routeWait:
				fmt.Fprintf(stderr, "zonemq consume: topic %s has no route: it does not exist yet (a first send creates it, or 'zonemq admin topic create --topic %s'); waiting\n", topic, topic)
				told = true
			}
		}
	}()
	return func() { cancel(); <-done }
}
