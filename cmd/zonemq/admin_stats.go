package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/zonemq/zonemq/client/admin"
)

// topicStatsJSON is one row of `admin topic stats --output json`: a topic
// (and one of its consumer groups) on one broker.
type topicStatsJSON struct {
	IDC        string  `json:"idc"`
	Broker     string  `json:"broker"`
	BrokerAddr string  `json:"brokerAddr"`
	Topic      string  `json:"topic"`
	Group      string  `json:"group"` // "" when no group read the topic there
	InTPS      float64 `json:"inTps"`
	OutTPS     float64 `json:"outTps"`
	InTotal    int64   `json:"inTotal"`  // since the broker started
	OutTotal   int64   `json:"outTotal"` // since the broker started
	Error      string  `json:"error,omitempty"`
}

func runAdminTopicStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("topic stats", "[--topic T] [--interval 1s] [--all] [--output text|json]", stderr)
	topic := s.fs.String("topic", "", "only this topic")
	interval, check := tpsInterval(s)
	all := s.fs.Bool("all", false, "include system topics (RMQ_SYS_*, %RETRY%…, SCHEDULE_TOPIC_XXXX …)")
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()
	brokers, err := s.admin.Cluster(ctx)
	if err != nil {
		return clientError(err)
	}
	first, second, _, err := sampleBrokersTwice(ctx, brokers, *interval, func(addr string) (*admin.TopicFlows, error) {
		return s.admin.TopicFlows(ctx, addr, *topic)
	})
	if err != nil {
		return err
	}
	var rows []topicStatsJSON
	for i, b := range brokers {
		if err := errors.Join(first[i].err, second[i].err); err != nil {
			rows = append(rows, topicStatsJSON{IDC: b.IDC, Broker: b.Name, BrokerAddr: b.Addr, Error: oneLine(err.Error())})
			continue
		}
		rows = append(rows, topicFlowRows(b, first[i].v, second[i].v, *all)...)
	}
	if s.json() {
		if rows == nil {
			rows = []topicStatsJSON{}
		}
		return printJSON(stdout, rows)
	}
	t := newTable(stdout, "TOPIC", "GROUP", "IDC", "BROKER", "IN TPS", "OUT TPS", "IN TOTAL", "OUT TOTAL")
	for _, r := range rows {
		if r.Error != "" {
			t.row("?", "", r.IDC, r.Broker, "?", "?", "error: "+r.Error, "")
			continue
		}
		group := r.Group
		if group == "" {
			group = "-"
		}
		t.row(r.Topic, group, r.IDC, r.Broker, fmt.Sprintf("%.1f", r.InTPS), fmt.Sprintf("%.1f", r.OutTPS), r.InTotal, r.OutTotal)
	}
	return t.flush()
}

// topicFlowRows turns two readings of one broker into rows: one per topic
// and group that read it (the topic's in-rate repeated, as mqadmin statsAll
// does), or one with no group for a topic nobody read there.
func topicFlowRows(b admin.BrokerStatus, before, after *admin.TopicFlows, all bool) []topicStatsJSON {
	dt := after.At.Sub(before.At).Seconds()
	if dt <= 0 {
		dt = 1 // the broker's clock did not move: report counts, not infinities
	}
	type key struct{ topic, group string }
	prev := map[key]int64{}
	for _, f := range before.In {
		prev[key{f.Topic, ""}] = f.Messages
	}
	for _, f := range before.Out {
		prev[key{f.Topic, "\x00" + f.Group}] = f.Messages
	}
	rate := func(k key, now int64) float64 { return float64(max(now-prev[k], 0)) / dt }
	type inFlow struct {
		tps   float64
		total int64
	}
	in := map[string]inFlow{}
	for _, f := range after.In {
		in[f.Topic] = inFlow{rate(key{f.Topic, ""}, f.Messages), f.Messages}
	}
	read := map[string]bool{}
	var rows []topicStatsJSON
	for _, f := range after.Out {
		if !all && internalTopic(f.Topic) {
			continue
		}
		read[f.Topic] = true
		rows = append(rows, topicStatsJSON{IDC: b.IDC, Broker: b.Name, BrokerAddr: b.Addr, Topic: f.Topic, Group: f.Group,
			InTPS: in[f.Topic].tps, InTotal: in[f.Topic].total, OutTPS: rate(key{f.Topic, "\x00" + f.Group}, f.Messages), OutTotal: f.Messages})
	}
	for t, f := range in {
		if !read[t] && (all || !internalTopic(t)) {
			rows = append(rows, topicStatsJSON{IDC: b.IDC, Broker: b.Name, BrokerAddr: b.Addr, Topic: t, InTPS: f.tps, InTotal: f.total})
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Topic != rows[j].Topic {
			return rows[i].Topic < rows[j].Topic
		}
		return rows[i].Group < rows[j].Group
	})
	return rows
}
