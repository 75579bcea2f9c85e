package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/protocol"
)

func init() {
	register(command{
		name:    "send",
		summary: "send keyed test messages and print where each one was stored",
		run:     runSend,
	})
}

const sendSynopsis = "--topic T [--no-create] [--tag TAG] [--body TEXT | --size BYTES] [--count N] [--interval D] [--key-prefix P] [--output text|json]\n" +
	"                   (--addrsrv URL | --namesrv 'ADDR;ADDR') [--idc NAME]"

// sendOptions is the parsed send command line.
type sendOptions struct {
	producer    client.ProducerConfig
	topic       string
	tag         string
	body        string
	bodyBytes   []byte // --body @file or -: read once at start
	size        int
	count       int
	interval    time.Duration
	keyPrefix   string
	output      string
	sendTimeout time.Duration
	noCreate    bool
}

// sendLine is one successful send in --output json; the field order is
// docs/architecture.md §6's.
type sendLine struct {
	TS          int64  `json:"ts"`
	Key         string `json:"key"`
	MsgID       string `json:"msgId"`
	Topic       string `json:"topic"`
	Broker      string `json:"broker"`
	BrokerAddr  string `json:"brokerAddr"`
	IDC         string `json:"idc"`
	QueueID     int    `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
}

// sendErrorLine is one failed send in --output json.
type sendErrorLine struct {
	TS    int64  `json:"ts"`
	Key   string `json:"key"`
	Error string `json:"error"`
}

func parseSendArgs(args []string, stderr io.Writer) (sendOptions, error) {
	var o sendOptions
	fs := newFlagSet("send", sendSynopsis, stderr)
	cf := addClientFlags(fs)
	fs.StringVar(&o.topic, "topic", "", "topic to send to (required); created on first send unless the brokers forbid it")
	fs.BoolVar(&o.noCreate, "no-create", false, "refuse to send to a topic that does not exist yet (default: the broker creates it, and send says so)")
	fs.StringVar(&o.tag, "tag", "", "message tag consumers can filter on (default: none)")
	fs.StringVar(&o.body, "body", "", "message body `text`; @FILE sends the file's contents, - sends standard input\n"+
		"(default: \"hello from zonemq <key>\")")
	fs.IntVar(&o.size, "size", 0, "body of this many `bytes` (the key, padded), instead of --body")
	fs.IntVar(&o.producer.MaxMessageSize, "max-message-size", protocol.DefaultMaxMessageSize,
		"largest body in `bytes` the client sends; the brokers' --max-message-size must allow it too")
	fs.IntVar(&o.count, "count", 1, "how many messages to send; 0 sends until stopped (Ctrl-C)")
	fs.DurationVar(&o.interval, "interval", 0, "pause between two sends, e.g. 200ms (default: none)")
	fs.StringVar(&o.keyPrefix, "key-prefix", "P", "message keys are PREFIX-<seq>, seq counting from 1")
	fs.StringVar(&o.output, "output", "text", "text (one readable line per send) or json (one JSON object per line)")
	fs.StringVar(&o.producer.Group, "group", client.DefaultProducerGroup, "producer group")
	fs.DurationVar(&o.sendTimeout, "send-timeout", client.DefaultSendTimeout,
		"how long one send may take, failover to other brokers and IDCs included")
	if err := parseQuiet(fs, args, stderr); err != nil {
		return o, err
	}
	cfg, err := cf.config(stderr)
	if err != nil {
		return o, err
	}
	o.producer.ClientConfig = cfg
	o.producer.SendTimeout = o.sendTimeout
	switch {
	case o.topic == "":
		return o, usagef("--topic is required")
	case protocol.ValidateTopic(o.topic) != nil:
		// As consume and admin do: a bad name is a usage error (status 2).
		return o, usagef("--topic: %v", protocol.ValidateTopic(o.topic))
	case o.count < 0:
		return o, usagef("--count must be 0 (until stopped) or more, got %d", o.count)
	case o.interval < 0:
		return o, usagef("--interval must not be negative")
	case o.size < 0 || (o.size == 0 && flagGiven(fs, "size")):
		return o, usagef("--size must be at least 1 byte (brokers refuse an empty body), got %d", o.size)
	case o.size > 0 && o.body != "":
		return o, usagef("give --body or --size, not both")
	case o.producer.MaxMessageSize < 1:
		return o, usagef("--max-message-size must be at least 1 byte")
	case o.keyPrefix == "" || strings.ContainsAny(o.keyPrefix, " \t\x01\x02"):
		return o, usagef("--key-prefix must be non-empty and without spaces, got %q", o.keyPrefix)
	case o.sendTimeout <= 0:
		return o, usagef("--send-timeout must be positive")
	}
	if err := checkOutput(o.output); err != nil {
		return o, err
	}
	if err := o.readBody(os.Stdin); err != nil {
		return o, err
	}
	return o, nil
}

// readBody reads --body @FILE or --body - once, so every message of the
// run carries the same bytes.
func (o *sendOptions) readBody(stdin io.Reader) error {
	var b []byte
	var err error
	switch {
	case o.body == "-":
		b, err = io.ReadAll(io.LimitReader(stdin, int64(o.producer.MaxMessageSize)+1))
	case strings.HasPrefix(o.body, "@"):
		b, err = os.ReadFile(o.body[1:])
	default:
		return nil
	}
	if err != nil {
		return usagef("--body %s: %s", o.body, oneLine(err.Error()))
	}
	if len(b) == 0 {
		return usagef("--body %s is empty (brokers refuse an empty body)", o.body)
	}
	o.bodyBytes = b
	return nil
}

// flagGiven reports whether the flag name was set on the command line (or
// from a config file).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			given = true
		}
	})
	return given
}

func runSend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseSendArgs(args, stderr)
	if err != nil {
		return err
	}
	if err := checkSendTopic(ctx, o.producer.ClientConfig, o.topic, o.noCreate, stderr); err != nil {
		return err
	}
	p, err := client.NewProducer(o.producer)
	if err != nil {
		return clientError(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Shutdown(sctx)
	}()
	if err := p.Start(ctx); err != nil {
		return startError("the producer", err)
	}
	if o.output == "text" {
		fmt.Fprintf(stderr, "zonemq send: sending to %s from IDC %s via name server %s\n",
			o.topic, orDash(o.producer.IDC), orDash(p.NameServer()))
	}
	out := &lineWriter{w: stdout}
	sent, failed := 0, 0
	var lastErr error
	for seq := 1; o.count == 0 || seq <= o.count; seq++ {
		if ctx.Err() != nil || (seq > 1 && !pause(ctx, o.interval)) {
			break
		}
		key := o.keyPrefix + "-" + strconv.Itoa(seq)
		msg := &client.Message{Topic: o.topic, Tags: o.tag, Keys: []string{key}, Body: o.messageBody(key)}
		// A signal stops the loop, not the send in flight: its outcome is
		// printed, so every key a script saw go out has a line.
		res, err := p.SendSync(context.WithoutCancel(ctx), msg)
		sent++
		if err != nil {
			failed++
			lastErr = err
		}
		if werr := printSendResult(out, o, key, res, err); werr != nil {
			return werr
		}
		if errors.Is(err, client.ErrInvalidMessage) {
			break // every later message would be refused the same way
		}
	}
	if ctx.Err() != nil && o.output == "text" {
		fmt.Fprintf(stderr, "zonemq send: stopped after %d sends, %d failed\n", sent, failed)
	}
	switch {
	case failed > 0 && errors.Is(lastErr, client.ErrInvalidMessage) && len(o.messageBody(o.keyPrefix)) > o.producer.MaxMessageSize:
		return fmt.Errorf("%s; send checks the body as given against its --max-message-size (default %d bytes = 4 MiB), "+
			"each broker checks the body as sent (zlib-compressed above 4 KiB) against its own --max-message-size",
			oneLine(lastErr.Error()), protocol.DefaultMaxMessageSize)
	case failed > 0:
		return withSwapHint(o.producer.ClientConfig, fmt.Errorf("%d of %d sends failed; last error: %s", failed, sent, oneLine(lastErr.Error())))
	case o.count > 0 && sent < o.count:
		return fmt.Errorf("interrupted after %d of %d sends", sent, o.count)
	}
	return nil
}

// messageBody is the body of the message with key: --body, or --size bytes
// starting with the key, or a greeting naming the key.
func (o sendOptions) messageBody(key string) []byte {
	switch {
	case o.bodyBytes != nil:
		return o.bodyBytes
	case o.body != "":
		return []byte(o.body)
	case o.size > 0:
		b := make([]byte, o.size)
		n := copy(b, key+" ")
		for i := n; i < len(b); i++ {
			b[i] = 'a' + byte(i%26)
		}
		return b
	}
	return []byte("hello from zonemq " + key)
}

// printSendResult prints one send's line.
func printSendResult(out *lineWriter, o sendOptions, key string, res *client.SendResult, err error) error {
	ts := time.Now().UnixMilli()
	if o.output == "json" {
		if err != nil {
			return out.printJSON(sendErrorLine{TS: ts, Key: key, Error: oneLine(err.Error())})
		}
		return out.printJSON(sendLine{
			TS: ts, Key: key, MsgID: res.MsgID, Topic: res.Queue.Topic,
			Broker: res.BrokerName, BrokerAddr: res.BrokerAddr, IDC: res.IDC,
			QueueID: res.Queue.QueueID, QueueOffset: res.QueueOffset,
		})
	}
	if err != nil {
		return out.printf("FAILED %s: %s", key, oneLine(err.Error()))
	}
	status := ""
	if res.Status != client.SendOK {
		status = " (" + res.Status.String() + ")"
	}
	return out.printf("sent %s → %s (%s, %s) queue %d offset %d msgId %s%s",
		key, res.BrokerName, orDash(res.IDC), res.BrokerAddr, res.Queue.QueueID, res.QueueOffset, res.MsgID, status)
}

// orDash shows an empty field as "-" in text output.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
