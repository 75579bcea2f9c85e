package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/protocol"
)

// topicCreateWait bounds how long `admin topic create` waits for the name
// servers to list the new topic: the brokers register it themselves,
// asynchronously, and a script's next command should find it.
const topicCreateWait = 5 * time.Second

// topicCreatedJSON is `admin topic create --output json`.
type topicCreatedJSON struct {
	Topic   string       `json:"topic"`
	Queues  int          `json:"queues"`
	Brokers []brokerJSON `json:"brokers"`
}

func runAdminTopicCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("topic create", "--topic T [--queues 4] [--cluster C | --broker ADDR[,ADDR]] [--output text|json]", stderr)
	topic := s.fs.String("topic", "", "topic to create (required); an existing one is updated")
	queues := s.fs.Int("queues", 4, "read and write queues on each broker")
	cluster := s.fs.String("cluster", "", "create on every broker of this cluster only (default: every broker of every IDC)")
	brokerList := s.fs.String("broker", "", "create on these brokers only, `ADDR[,ADDR]` (default: every broker of every IDC)")
	check := func() error {
		switch {
		case *topic == "":
			return usagef("--topic is required")
		case protocol.ValidateTopic(*topic) != nil:
			return usagef("--topic: %v", protocol.ValidateTopic(*topic))
		case *queues < 1 || *queues > 1024:
			return usagef("--queues must be within 1..1024, got %d", *queues)
		case *cluster != "" && *brokerList != "":
			return usagef("give --cluster or --broker, not both")
		}
		return nil
	}
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()

	// Pick the brokers here rather than leave it to the SDK, so the output
	// can say where the topic went.
	all, err := s.admin.Cluster(ctx)
	if err != nil {
		return fmt.Errorf("cluster info: %s", oneLine(err.Error()))
	}
	var targets []admin.BrokerStatus
	if *brokerList != "" {
		byAddr := map[string]admin.BrokerStatus{}
		for _, b := range all {
			byAddr[b.Addr] = b
		}
		for _, addr := range strings.Split(*brokerList, ",") {
			addr = strings.TrimSpace(addr)
			b, ok := byAddr[addr]
			if !ok {
				b = admin.BrokerStatus{Addr: addr} // not registered: try it anyway
			}
			targets = append(targets, b)
		}
	} else {
		for _, b := range all {
			if b.ID == 0 && b.Alive && (*cluster == "" || b.Cluster == *cluster) {
				targets = append(targets, b)
			}
		}
		if len(targets) == 0 {
			if *cluster != "" {
				return fmt.Errorf("no live broker in cluster %q", *cluster)
			}
			return fmt.Errorf("no live broker is registered")
		}
	}
	addrs := make([]string, len(targets))
	for i, b := range targets {
		addrs[i] = b.Addr
	}
	if err := s.admin.CreateTopic(ctx, admin.TopicSpec{Topic: *topic, Queues: *queues, Brokers: addrs}); err != nil {
		return fmt.Errorf("create %s: %s", *topic, oneLine(err.Error()))
	}
	if !waitTopicListed(ctx, s.admin, *topic, addrs) {
		fmt.Fprintf(stderr, "zonemq admin topic create: warning: the name servers do not list %s on every broker yet\n", *topic)
	}

	if s.json() {
		out := topicCreatedJSON{Topic: *topic, Queues: *queues, Brokers: []brokerJSON{}}
		for _, b := range targets {
			out.Brokers = append(out.Brokers, brokerJSON{IDC: b.IDC, Name: b.Name, ID: b.ID, Addr: b.Addr, Cluster: b.Cluster, Alive: b.Alive,
				LastHeartbeat: jsonTime(b.LastHeartbeat)})
		}
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "created topic %s with %d queues on %d broker(s):\n", *topic, *queues, len(targets))
	t := newTable(stdout, "IDC", "BROKER", "ADDRESS")
	for _, b := range targets {
		t.row(b.IDC, b.Name, b.Addr)
	}
	return t.flush()
}

// waitTopicListed polls the topic's route until it lists every address in
// addrs, for at most topicCreateWait; it reports whether it did.
func waitTopicListed(ctx context.Context, a *admin.Client, topic string, addrs []string) bool {
	ctx, cancel := context.WithTimeout(ctx, topicCreateWait)
	defer cancel()
	for {
		if r, err := a.TopicRoute(ctx, topic); err == nil {
			listed := map[string]bool{}
			for _, b := range r.Brokers {
				listed[b.Addrs[0]] = true
			}
			missing := false
			for _, addr := range addrs {
				missing = missing || !listed[addr]
			}
			if !missing {
				return true
			}
		}
		if !pause(ctx, 50*time.Millisecond) {
			return false
		}
	}
}

func runAdminTopicDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("topic delete", "--topic T [--output text|json]", stderr)
	topic := s.fs.String("topic", "", "topic to delete (required)")
	check := func() error {
		if *topic == "" {
			return usagef("--topic is required")
		}
		return nil
	}
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()
	r, err := s.admin.TopicRoute(ctx, *topic)
	if err != nil {
		return topicError(*topic, err)
	}
	if err := s.admin.DeleteTopic(ctx, *topic); err != nil {
		return fmt.Errorf("delete %s: %s", *topic, oneLine(err.Error()))
	}
	names := make([]string, 0, len(r.Brokers))
	for _, b := range r.Brokers {
		names = append(names, b.Name)
	}
	if s.json() {
		return printJSON(stdout, map[string]any{"topic": *topic, "deleted": true, "brokers": names})
	}
	fmt.Fprintf(stdout, "deleted topic %s from %s and every name server\n", *topic, strings.Join(names, ", "))
	return nil
}

// routeJSON is `admin topic route --output json`.
type routeJSON struct {
	Topic          string            `json:"topic"`
	OrderTopicConf string            `json:"orderTopicConf,omitempty"`
	Brokers        []brokerRouteJSON `json:"brokers"`
}

type brokerRouteJSON struct {
	Name        string           `json:"name"`
	IDC         string           `json:"idc"`
	Cluster     string           `json:"cluster"`
	Addrs       map[int64]string `json:"addrs"`
	ReadQueues  int              `json:"readQueues"`
	WriteQueues int              `json:"writeQueues"`
	Perm        int              `json:"perm"`
}

func runAdminTopicRoute(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("topic route", "--topic T [--output text|json]", stderr)
	topic := s.fs.String("topic", "", "topic whose route to show (required)")
	check := func() error {
		if *topic == "" {
			return usagef("--topic is required")
		}
		return nil
	}
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()
	r, err := s.admin.TopicRoute(ctx, *topic)
	if err != nil {
		return topicError(*topic, err)
	}
	if s.json() {
		out := routeJSON{Topic: r.Topic, OrderTopicConf: r.OrderTopicConf, Brokers: []brokerRouteJSON{}}
		for _, b := range r.Brokers {
			out.Brokers = append(out.Brokers, brokerRouteJSON{Name: b.Name, IDC: b.IDC, Cluster: b.Cluster, Addrs: b.Addrs,
				ReadQueues: b.ReadQueues, WriteQueues: b.WriteQueues, Perm: b.Perm})
		}
		return printJSON(stdout, out)
	}
	brokers := append([]client.BrokerRoute(nil), r.Brokers...)
	sort.SliceStable(brokers, func(i, j int) bool { return brokers[i].IDC < brokers[j].IDC })
	t := newTable(stdout, "IDC", "BROKER", "ADDRESS", "CLUSTER", "READ QUEUES", "WRITE QUEUES", "PERM")
	for _, b := range brokers {
		t.row(b.IDC, b.Name, b.Addrs[0], b.Cluster, b.ReadQueues, b.WriteQueues, permString(b.Perm))
	}
	return t.flush()
}

func runAdminTopicList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("topic list", "[--all] [--output text|json]", stderr)
	all := s.fs.Bool("all", false, "include system, retry (%RETRY%) and dead-letter (%DLQ%) topics")
	if err := s.connect(ctx, args, nil); err != nil {
		return err
	}
	defer s.close()
	topics, err := s.admin.TopicList(ctx)
	if err != nil {
		return fmt.Errorf("topic list: %s", oneLine(err.Error()))
	}
	// Every broker keeps a topic named after itself (and RocketMQ clusters
	// one named after the cluster); they are the brokers', not an
	// application's.
	own := map[string]bool{}
	if !*all {
		brokers, err := s.admin.Cluster(ctx)
		if err != nil {
			return fmt.Errorf("topic list: %s", oneLine(err.Error()))
		}
		for _, b := range brokers {
			own[b.Name], own[b.Cluster] = true, true
		}
	}
	shown := []string{}
	for _, t := range topics {
		if *all || !(internalTopic(t) || own[t]) {
			shown = append(shown, t)
		}
	}
	if s.json() {
		return printJSON(stdout, shown)
	}
	t := newTable(stdout, "TOPIC")
	for _, topic := range shown {
		t.row(topic)
	}
	return t.flush()
}

// internalTopic reports whether a topic belongs to the brokers or to a
// group rather than to an application.
func internalTopic(t string) bool {
	return protocol.IsSystemTopic(t) || strings.HasPrefix(t, protocol.RetryGroupPrefix) ||
		strings.HasPrefix(t, protocol.DLQGroupPrefix)
}

// topicError words a route failure; a missing topic gets a plain sentence.
func topicError(topic string, err error) error {
	if isCode(err, client.CodeTopicNotExist) {
		return fmt.Errorf("topic %s does not exist", topic)
	}
	return fmt.Errorf("route of %s: %s", topic, oneLine(err.Error()))
}

// permString renders RocketMQ permission bits as "RW", "R-", "-W" or "--".
func permString(perm int) string {
	r, w := "-", "-"
	if perm&protocol.PermRead != 0 {
		r = "R"
	}
	if perm&protocol.PermWrite != 0 {
		w = "W"
	}
	return r + w
}
