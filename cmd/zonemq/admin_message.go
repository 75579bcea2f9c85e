package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/protocol"
)

// messageJSON is one message of `admin message --output json`.
type messageJSON struct {
	Topic          string            `json:"topic"`
	MsgID          string            `json:"msgId"`
	OffsetMsgID    string            `json:"offsetMsgId"`
	Broker         string            `json:"broker"`
	BrokerAddr     string            `json:"brokerAddr"`
	IDC            string            `json:"idc"`
	QueueID        int               `json:"queueId"`
	QueueOffset    int64             `json:"queueOffset"`
	Tags           string            `json:"tags"`
	Keys           []string          `json:"keys"`
	BornHost       string            `json:"bornHost"`
	BornTimestamp  string            `json:"bornTimestamp"`
	StoreTimestamp string            `json:"storeTimestamp"`
	ReconsumeTimes int               `json:"reconsumeTimes"`
	Properties     map[string]string `json:"properties"`
	Body           string            `json:"body"` // as text when it is UTF-8, else base64 with bodyEncoding "base64"
	BodyEncoding   string            `json:"bodyEncoding"`
}

func runAdminMessage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("message", "(--id ID [--topic T] | --topic T --key K [--max 32] | --topic T [--broker NAME] --queue Q --offset N) [--output text|json]", stderr)
	id := s.fs.String("id", "", "message id: a broker (offset) id as sends print, or a client id (UNIQ_KEY) with --topic")
	topic := s.fs.String("topic", "", "topic (required with --key, --queue or a client message id)")
	key := s.fs.String("key", "", "find the messages of --topic carrying this key (KEYS)")
	maxN := s.fs.Int("max", 32, "at most this many messages for --key")
	broker := s.fs.String("broker", "", "broker `name` of --queue (needed when the topic is on several brokers)")
	queue := s.fs.Int("queue", -1, "read the message at --offset of this queue `id` (mqadmin queryMsgByOffset)")
	offset := s.fs.Int64("offset", -1, "queue `offset` of the message to read with --queue")
	check := func() error {
		modes := 0
		for _, set := range []bool{*id != "", *key != "", *queue >= 0 || *offset >= 0} {
			if set {
				modes++
			}
		}
		switch {
		case modes != 1:
			return usagef("give exactly one of --id, --key, or --queue with --offset")
		case *key != "" && *topic == "":
			return usagef("--key needs --topic")
		case (*queue >= 0 || *offset >= 0) && (*topic == "" || *queue < 0 || *offset < 0):
			return usagef("--queue and --offset go together, with --topic, and are >= 0")
		case *broker != "" && *queue < 0:
			return usagef("--broker goes with --queue")
		case *maxN < 1 || *maxN > 64:
			return usagef("--max must be within 1..64, got %d", *maxN)
		}
		return nil
	}
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()
	var msgs []*client.MessageExt
	switch {
	case *id != "":
		m, err := s.admin.ViewMessage(ctx, *topic, *id)
		if err != nil {
			return fmt.Errorf("message %s: %s", *id, oneLine(err.Error()))
		}
		msgs = []*client.MessageExt{m}
	case *queue >= 0:
		m, err := s.admin.MessageAt(ctx, *topic, *broker, *queue, *offset)
		if err != nil {
			return fmt.Errorf("message of %s queue %d offset %d: %s", *topic, *queue, *offset, oneLine(err.Error()))
		}
		msgs = []*client.MessageExt{m}
	default:
		ms, err := s.admin.QueryMessages(ctx, *topic, *key, *maxN)
		if err != nil {
			return fmt.Errorf("messages of %s with key %s: %s", *topic, *key, oneLine(err.Error()))
		}
		msgs = ms
	}
	if s.json() {
		out := make([]messageJSON, 0, len(msgs))
		for _, m := range msgs {
			j := messageJSON{Topic: m.Topic, MsgID: m.MsgID, OffsetMsgID: m.OffsetMsgID, Broker: m.BrokerName,
				BrokerAddr: m.BrokerAddr, IDC: m.IDC, QueueID: m.QueueID, QueueOffset: m.QueueOffset, Tags: m.Tags,
				Keys: m.Keys, BornHost: m.BornHost, BornTimestamp: jsonTime(m.BornTimestamp),
				StoreTimestamp: jsonTime(m.StoreTimestamp), ReconsumeTimes: m.ReconsumeTimes, Properties: m.Properties}
			j.Body, j.BodyEncoding = bodyText(m.Body)
			out = append(out, j)
		}
		return printJSON(stdout, out)
	}
	for i, m := range msgs {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		printMessageDetail(stdout, m)
	}
	return nil
}

// bodyText returns the body as text when it is valid UTF-8, else base64.
func bodyText(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), "text"
	}
	return fmt.Sprintf("%x", b), "hex"
}

// printMessageDetail prints one message as `mqadmin queryMsgById` does: one
// "Name: value" line per field, the properties, then the body.
func printMessageDetail(w io.Writer, m *client.MessageExt) {
	t := newTable(w, "FIELD", "VALUE")
	t.row("Topic:", m.Topic)
	t.row("Msg Id:", m.MsgID)
	t.row("Offset Msg Id:", m.OffsetMsgID)
	t.row("Broker:", strings.TrimSpace(m.BrokerName+" "+m.BrokerAddr))
	t.row("IDC:", m.IDC)
	t.row("Queue:", fmt.Sprintf("%d, offset %d", m.QueueID, m.QueueOffset))
	t.row("Tags:", m.Tags)
	t.row("Keys:", strings.Join(m.Keys, " "))
	t.row("Born:", m.BornTimestamp.Format(time.RFC3339Nano)+" from "+m.BornHost)
	t.row("Stored:", m.StoreTimestamp.Format(time.RFC3339Nano))
	t.row("Reconsume Times:", m.ReconsumeTimes)
	names := make([]string, 0, len(m.Properties))
	for k := range m.Properties {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		t.row("Property "+k+":", m.Properties[k])
	}
	body, enc := bodyText(m.Body)
	t.row("Body ("+enc+", "+strconv.Itoa(len(m.Body))+" bytes):", body)
	t.flush()
}

// offsetResetJSON is one queue of `admin offset reset --output json`.
type offsetResetJSON struct {
	Topic      string `json:"topic"`
	Broker     string `json:"broker"`
	BrokerAddr string `json:"brokerAddr"`
	IDC        string `json:"idc"`
	QueueID    int    `json:"queueId"`
	Old        int64  `json:"old"`
	New        int64  `json:"new"`
	Notified   int    `json:"consumersNotified"`
	Error      string `json:"error,omitempty"`
}

func runAdminOffsetReset(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("offset reset", "--group G --topic T --to earliest|latest|TIME [--output text|json]", stderr)
	group := s.fs.String("group", "", "consumer group (required); its running consumers are told to restart from the new offsets")
	topic := s.fs.String("topic", "", "topic (required)")
	to := s.fs.String("to", "", "earliest, latest, an RFC 3339 time, Unix milliseconds, or a duration ago such as 10m (required)")
	var target admin.ResetTarget
	check := func() error {
		if *group == "" || *topic == "" || *to == "" {
			return usagef("--group, --topic and --to are required")
		}
		if err := protocol.ValidateGroup(*group); err != nil {
			return usagef("--group: %v", err)
		}
		t, err := parseResetTarget(*to, time.Now())
		if err != nil {
			return usagef("--to: %v", err)
		}
		target = t
		return nil
	}
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()
	rows, err := s.admin.ResetOffsets(ctx, *group, *topic, target)
	if err != nil {
		return topicError(*topic, err)
	}
	if len(rows) == 0 {
		return fmt.Errorf("topic %s has no readable queue on a live broker", *topic)
	}
	var failed []error
	for _, r := range rows {
		if r.Err != nil {
			failed = append(failed, r.Err)
		}
	}
	if s.json() {
		out := make([]offsetResetJSON, 0, len(rows))
		for _, r := range rows {
			j := offsetResetJSON{Topic: r.Queue.Topic, Broker: r.Queue.BrokerName, BrokerAddr: r.BrokerAddr, IDC: r.IDC,
				QueueID: r.Queue.QueueID, Old: r.Old, New: r.New, Notified: r.Notified}
			if r.Err != nil {
				j.Error = oneLine(r.Err.Error())
			}
			out = append(out, j)
		}
		if err := printJSON(stdout, out); err != nil {
			return err
		}
	} else {
		t := newTable(stdout, "TOPIC", "IDC", "BROKER", "QUEUE", "OLD", "NEW", "CONSUMERS TOLD", "STATE")
		for _, r := range rows {
			old, state := "-", "reset"
			if r.Old >= 0 {
				old = strconv.FormatInt(r.Old, 10)
			}
			if r.Err != nil {
				state = "error: " + oneLine(r.Err.Error())
			}
			t.row(r.Queue.Topic, r.IDC, r.Queue.BrokerName, r.Queue.QueueID, old, r.New, r.Notified, state)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d queues were not reset", len(failed), len(rows))
	}
	return nil
}

// parseResetTarget reads --to.
func parseResetTarget(s string, now time.Time) (admin.ResetTarget, error) {
	return admin.ParseResetTarget(s, now)
}

// brokerStatsJSON is one broker of `admin broker stats --output json`.
type brokerStatsJSON struct {
	IDC          string             `json:"idc"`
	Broker       string             `json:"broker"`
	Addr         string             `json:"addr"`
	InTPS        float64            `json:"inTps"`
	OutTPS       float64            `json:"outTps"`
	InByIDC      map[string]float64 `json:"inTpsByClientIdc"`
	OutByIDC     map[string]float64 `json:"outTpsByClientIdc"`
	DiskRatio    string             `json:"diskRatio"`
	CommitLogMax string             `json:"commitLogMaxOffset"`
	Error        string             `json:"error,omitempty"`
}

func runAdminBrokerStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("broker stats", "[--interval 1s] [--output text|json]", stderr)
	interval, check := tpsInterval(s)
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()
	brokers, err := s.admin.Cluster(ctx)
	if err != nil {
		return clientError(err)
	}
	first, second, dt, err := sampleBrokersTwice(ctx, brokers, *interval, func(addr string) (map[string]string, error) {
		return s.admin.BrokerRuntime(ctx, addr)
	})
	if err != nil {
		return err
	}
	var rows []brokerStatsJSON
	for i, b := range brokers {
		row := brokerStatsJSON{IDC: b.IDC, Broker: b.Name, Addr: b.Addr, InByIDC: map[string]float64{}, OutByIDC: map[string]float64{}}
		if err := errors.Join(first[i].err, second[i].err); err != nil {
			row.Error = oneLine(err.Error())
			rows = append(rows, row)
			continue
		}
		perIDC := func(key string, dst map[string]float64) float64 {
			before, after := runtimeCounts(first[i].v[key]), runtimeCounts(second[i].v[key])
			total := 0.0
			for k, v := range after {
				r := float64(max(v-before[k], 0)) / dt
				if k == "" {
					k = "(stock)"
				}
				dst[k] = r
				total += r
			}
			return total
		}
		row.InTPS = perIDC("zonemqMsgInByClientIDC", row.InByIDC)
		row.OutTPS = perIDC("zonemqMsgOutByClientIDC", row.OutByIDC)
		row.DiskRatio = second[i].v["commitLogDiskRatio"]
		row.CommitLogMax = second[i].v["commitLogMaxOffset"]
		rows = append(rows, row)
	}
	if s.json() {
		return printJSON(stdout, rows)
	}
	t := newTable(stdout, "IDC", "BROKER", "ADDRESS", "IN TPS", "OUT TPS", "IN BY CLIENT IDC", "OUT BY CLIENT IDC", "DISK")
	for _, r := range rows {
		if r.Error != "" {
			t.row(r.IDC, r.Broker, r.Addr, "?", "?", "error: "+r.Error, "", "")
			continue
		}
		t.row(r.IDC, r.Broker, r.Addr, fmt.Sprintf("%.1f", r.InTPS), fmt.Sprintf("%.1f", r.OutTPS),
			rateList(r.InByIDC), rateList(r.OutByIDC), r.DiskRatio)
	}
	return t.flush()
}

// runtimeCounts reads a broker's "idc1=12;idc2=3" runtime value.
func runtimeCounts(s string) map[string]int64 {
	out := map[string]int64{}
	for _, part := range strings.Split(s, ";") {
		if k, v, ok := strings.Cut(part, "="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				out[k] = n
			}
		}
	}
	return out
}

// rateList renders {"idc1": 3.5} as "idc1 3.5".
func rateList(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, m[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// consumerConnJSON is one member of `admin consumer connections`.
type consumerConnJSON struct {
	Broker       string            `json:"broker"`
	BrokerAddr   string            `json:"brokerAddr"`
	ClientID     string            `json:"clientId"`
	IDC          string            `json:"idc"`
	Addr         string            `json:"addr"`
	Language     string            `json:"language"`
	Version      int32             `json:"version"`
	Subscription map[string]string `json:"subscription"`
	MessageModel string            `json:"messageModel"`
}

func runAdminConsumerConnections(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("consumer connections", "--group G [--output text|json]", stderr)
	group := s.fs.String("group", "", "consumer group (required)")
	check := func() error {
		if *group == "" {
			return usagef("--group is required")
		}
		return protocol.ValidateGroup(*group)
	}
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()
	brokers, err := s.admin.Cluster(ctx)
	if err != nil {
		return clientError(err)
	}
	var rows []consumerConnJSON
	for _, b := range brokers {
		gc, err := s.admin.ConsumerConnections(ctx, b.Addr, *group)
		if err != nil {
			continue // not online there, or the broker is down
		}
		for _, m := range gc.Members {
			rows = append(rows, consumerConnJSON{Broker: b.Name, BrokerAddr: b.Addr, ClientID: m.ClientID, IDC: m.IDC,
				Addr: m.Addr, Language: m.Language, Version: m.Version, Subscription: gc.Topics, MessageModel: gc.MessageModel})
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("consumer group %s is not online on any broker", *group)
	}
	if s.json() {
		return printJSON(stdout, rows)
	}
	t := newTable(stdout, "BROKER", "CLIENT ID", "IDC", "ADDRESS", "LANGUAGE", "VERSION", "SUBSCRIPTION")
	for _, r := range rows {
		var subs []string
		for topic, expr := range r.Subscription {
			subs = append(subs, topic+"="+expr)
		}
		sort.Strings(subs)
		t.row(r.Broker, r.ClientID, r.IDC, r.Addr, r.Language, r.Version, strings.Join(subs, " "))
	}
	return t.flush()
}

// producerConnJSON is one producer of `admin producer connections`.
type producerConnJSON struct {
	Broker     string `json:"broker"`
	BrokerAddr string `json:"brokerAddr"`
	ClientID   string `json:"clientId"`
	IDC        string `json:"idc"`
	Addr       string `json:"addr"`
	Language   string `json:"language"`
	Version    int32  `json:"version"`
}

func runAdminProducerConnections(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("producer connections", "[--group G] [--output text|json]", stderr)
	group := s.fs.String("group", client.DefaultProducerGroup, "producer group")
	check := func() error { return protocol.ValidateGroup(*group) }
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()
	brokers, err := s.admin.Cluster(ctx)
	if err != nil {
		return clientError(err)
	}
	var rows []producerConnJSON
	for _, b := range brokers {
		pcs, err := s.admin.ProducerConnections(ctx, b.Addr, *group)
		if err != nil {
			continue // none there, or the broker is down
		}
		for _, p := range pcs {
			rows = append(rows, producerConnJSON{Broker: b.Name, BrokerAddr: b.Addr, ClientID: p.ClientID, IDC: p.IDC,
				Addr: p.Addr, Language: p.Language, Version: p.Version})
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("producer group %s is not connected to any broker", *group)
	}
	if s.json() {
		return printJSON(stdout, rows)
	}
	t := newTable(stdout, "BROKER", "CLIENT ID", "IDC", "ADDRESS", "LANGUAGE", "VERSION")
	for _, r := range rows {
		t.row(r.Broker, r.ClientID, r.IDC, r.Addr, r.Language, r.Version)
	}
	return t.flush()
}

// tpsInterval adds --interval, the span TPS is measured over, to s's flags
// and returns it with the check to run once they are parsed.
// brokerSample is one broker's answer to a sampleBrokersTwice read.
type brokerSample[T any] struct {
	v   T
	err error
}

// sampleBrokersTwice reads every broker, waits interval, and reads them
// again, for rates over the interval: dt is the seconds between the two
// reads' starts. Only ctx ending makes it fail; a broker's error is in its
// samples.
func sampleBrokersTwice[T any](ctx context.Context, brokers []admin.BrokerStatus, interval time.Duration,
	read func(addr string) (T, error)) (first, second []brokerSample[T], dt float64, err error) {
	readAll := func() []brokerSample[T] {
		out := make([]brokerSample[T], len(brokers))
		for i, b := range brokers {
			out[i].v, out[i].err = read(b.Addr)
		}
		return out
	}
	first = readAll()
	start := time.Now()
	select {
	case <-ctx.Done():
		return nil, nil, 0, ctx.Err()
	case <-time.After(interval):
	}
	second = readAll()
	return first, second, time.Since(start).Seconds(), nil
}

func tpsInterval(s *adminSession) (*time.Duration, func() error) {
	interval := s.fs.Duration("interval", time.Second, "TPS is measured over this interval")
	return interval, func() error {
		if *interval < 100*time.Millisecond || *interval > time.Minute {
			return usagef("--interval must be within 100ms..1m, got %v", *interval)
		}
		return nil
	}
}
