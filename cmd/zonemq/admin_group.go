package main

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/protocol"
)

// groupJSON is `admin group --output json`.
type groupJSON struct {
	Group    string           `json:"group"`
	Queues   []queueStateJSON `json:"queues"`
	TotalLag int64            `json:"totalLag"`
}

type queueStateJSON struct {
	Topic      string `json:"topic"`
	Broker     string `json:"broker"`
	BrokerAddr string `json:"brokerAddr"`
	IDC        string `json:"idc"`
	QueueID    int    `json:"queueId"`
	Committed  int64  `json:"committed"`
	Max        int64  `json:"max"`
	Lag        int64  `json:"lag"`
	Owner      string `json:"owner"`
	Error      string `json:"error,omitempty"`
}

func runAdminGroup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("group", "--group G [--topic T] [--output text|json]", stderr)
	group := s.fs.String("group", "", "consumer group (required)")
	topic := s.fs.String("topic", "", "topic to report (default: every topic the group has committed offsets in, and its retry topic)")
	check := func() error {
		if *group == "" {
			return usagef("--group is required")
		}
		if err := protocol.ValidateGroup(*group); err != nil {
			return usagef("--group: %v", err)
		}
		return nil
	}
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()

	var rows []admin.QueueOffset
	if *topic != "" {
		qs, err := s.admin.GroupOffsets(ctx, *group, *topic)
		if err != nil {
			return topicError(*topic, err)
		}
		if len(qs) == 0 {
			return fmt.Errorf("topic %s does not exist or has no live broker", *topic)
		}
		rows = qs
	} else {
		qs, err := groupOffsetsEverywhere(ctx, s.admin, *group)
		if err != nil {
			return err
		}
		rows = qs
	}
	if unknownGroup(rows) {
		if *topic == "" {
			return fmt.Errorf("group %s is unknown: no committed offset in any topic "+
				"(check the name; a group that has not committed yet shows with --topic)", *group)
		}
		return fmt.Errorf("group %s is unknown on topic %s: no committed offset and no live consumer "+
			"(check the name; `zonemq admin consumer connections --group %s` lists a group's live consumers)", *group, *topic, *group)
	}
	var total int64
	for _, q := range rows {
		if q.Err == nil {
			total += q.Lag
		}
	}
	if s.json() {
		out := groupJSON{Group: *group, Queues: []queueStateJSON{}, TotalLag: total}
		for _, q := range rows {
			j := queueStateJSON{Topic: q.Queue.Topic, Broker: q.Queue.BrokerName, BrokerAddr: q.BrokerAddr, IDC: q.IDC,
				QueueID: q.Queue.QueueID, Committed: q.Committed, Max: q.Max, Lag: q.Lag, Owner: q.Owner}
			if q.Err != nil {
				j.Error = oneLine(q.Err.Error())
			}
			out.Queues = append(out.Queues, j)
		}
		return printJSON(stdout, out)
	}
	t := newTable(stdout, "TOPIC", "IDC", "BROKER", "QUEUE", "COMMITTED", "MAX", "LAG", "OWNER")
	for _, q := range rows {
		if q.Err != nil {
			t.row(q.Queue.Topic, q.IDC, q.Queue.BrokerName, q.Queue.QueueID, "?", "?", "?", "error: "+oneLine(q.Err.Error()))
			continue
		}
		committed := "-"
		if q.Committed >= 0 {
			committed = fmt.Sprint(q.Committed)
		}
		t.row(q.Queue.Topic, q.IDC, q.Queue.BrokerName, q.Queue.QueueID, committed, q.Max, q.Lag, q.Owner)
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(stdout, "total lag %d\n", total)
	return err
}

// groupOffsetsEverywhere reports the group's queues in every topic where it
// has a committed offset, plus its retry topic. The SDK has no call that
// lists a group's subscriptions, so every application topic is asked.
func groupOffsetsEverywhere(ctx context.Context, a *admin.Client, group string) ([]admin.QueueOffset, error) {
	topics, err := a.TopicList(ctx)
	if err != nil {
		return nil, fmt.Errorf("topic list: %s", oneLine(err.Error()))
	}
	retry := protocol.RetryTopic(group)
	var out []admin.QueueOffset
	for _, t := range topics {
		if internalTopic(t) && t != retry {
			continue
		}
		qs, err := a.GroupOffsets(ctx, group, t)
		if err != nil {
			continue // deleted meanwhile, or no live broker: nothing to report
		}
		used := false
		for _, q := range qs {
			used = used || q.Committed >= 0
		}
		if used {
			out = append(out, qs...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Queue.Topic < out[j].Queue.Topic })
	return out, nil
}

// unknownGroup reports whether rows show nothing of the group: no queue
// answered with a committed offset or an owner, and at least none failed
// (a down broker may hold what is not shown).
func unknownGroup(rows []admin.QueueOffset) bool {
	for _, q := range rows {
		if q.Err != nil || q.Committed >= 0 || q.Owner != "" {
			return false
		}
	}
	return true
}
