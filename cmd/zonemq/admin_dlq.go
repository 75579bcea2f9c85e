package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/protocol"
)

func runAdminDLQBrowse(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("dlq browse", "--group G [--max 32] [--output text|json]", stderr)
	group := s.fs.String("group", "", "consumer group whose dead-letter queue (%DLQ%G) to list (required)")
	maxN := s.fs.Int("max", 32, "at most this many messages (1..1000)")
	check := func() error {
		if *group == "" {
			return usagef("--group is required")
		}
		if *maxN < 1 || *maxN > 1000 {
			return usagef("--max must be within 1..1000, got %d", *maxN)
		}
		return protocol.ValidateGroup(*group)
	}
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()
	msgs, err := s.admin.BrowseDLQ(ctx, *group, *maxN)
	if err != nil {
		return fmt.Errorf("dead-letter queue of %s: %s", *group, oneLine(err.Error()))
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
	if len(msgs) == 0 {
		fmt.Fprintf(stdout, "the dead-letter queue of %s is empty\n", *group)
		return nil
	}
	t := newTable(stdout, "STORED", "IDC", "BROKER", "OFFSET MSG ID", "TOPIC", "KEYS", "RECONSUMED", "BODY")
	for _, m := range msgs {
		body, _ := bodyText(m.Body)
		if len(body) > 40 {
			body = body[:40] + "…"
		}
		t.row(m.StoreTimestamp.Format("2006-01-02 15:04:05"), m.IDC, m.BrokerName, m.OffsetMsgID,
			m.Properties[protocol.PropertyRetryTopic], strings.Join(m.Keys, " "), m.ReconsumeTimes, body)
	}
	return t.flush()
}

func runAdminDLQResend(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("dlq resend", "--group G --id OFFSET_MSG_ID [--output text|json]", stderr)
	group := s.fs.String("group", "", "consumer group the message died in (required)")
	id := s.fs.String("id", "", "the message's broker (offset) id, as `dlq browse` lists it (required)")
	check := func() error {
		if *group == "" || *id == "" {
			return usagef("--group and --id are required")
		}
		return protocol.ValidateGroup(*group)
	}
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()
	p, err := client.NewProducer(client.ProducerConfig{ClientConfig: s.cfg})
	if err != nil {
		return clientError(err)
	}
	if err := p.Start(ctx); err != nil {
		return fmt.Errorf("cannot start a producer: %s", oneLine(err.Error()))
	}
	defer p.Shutdown(context.Background())
	res, err := s.admin.ResendFromDLQ(ctx, p, *group, *id)
	if err != nil {
		return fmt.Errorf("resending %s: %s", *id, oneLine(err.Error()))
	}
	if s.json() {
		return printJSON(stdout, map[string]any{"group": *group, "from": *id, "msgId": res.MsgID,
			"topic": protocol.RetryTopic(*group), "broker": res.BrokerName, "idc": res.IDC})
	}
	_, err = fmt.Fprintf(stdout, "resent %s to %s as %s (broker %s, %s)\n", *id, protocol.RetryTopic(*group), res.MsgID, res.BrokerName, res.IDC)
	return err
}

func runAdminBrokerConfig(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("broker config", "--broker ADDR [--set key=value[,key=value]] [--output text|json]", stderr)
	addr := s.fs.String("broker", "", "the broker's `host:port`, or its name for its group's master (see admin cluster) (required)")
	set := s.fs.String("set", "", "change these settings (only diskMaxUsedSpaceRatio may change while the broker runs)")
	updates := map[string]string{}
	check := func() error {
		if *addr == "" {
			return usagef("--broker is required")
		}
		for _, kv := range strings.Split(*set, ",") {
			if kv = strings.TrimSpace(kv); kv == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usagef("--set: %q is not key=value", kv)
			}
			updates[k] = v
		}
		return nil
	}
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()
	resolved, err := brokerAddr(ctx, s.admin, *addr)
	if err != nil {
		return err
	}
	*addr = resolved
	if len(updates) > 0 {
		if err := s.admin.UpdateBrokerConfig(ctx, *addr, updates); err != nil {
			return fmt.Errorf("updating %s: %s", *addr, oneLine(err.Error()))
		}
	}
	cfg, err := s.admin.BrokerConfig(ctx, *addr)
	if err != nil {
		return fmt.Errorf("config of %s: %s", *addr, oneLine(err.Error()))
	}
	if s.json() {
		return printJSON(stdout, cfg)
	}
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t := newTable(stdout, "KEY", "VALUE")
	for _, k := range keys {
		t.row(k, cfg[k])
	}
	return t.flush()
}
