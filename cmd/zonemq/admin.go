package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
)

func init() {
	register(command{
		name:    "admin",
		summary: "manage topics and inspect brokers, groups, clients and the KV config",
		run:     runAdmin,
	})
}

// adminCommand is one leaf of the admin tree, e.g. "topic create".
type adminCommand struct {
	path    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// adminCommands is the admin tree in the order --help lists it.
var adminCommands = []adminCommand{
	{"topic create", "create or update a topic on every broker of every IDC (or the ones named)", runAdminTopicCreate},
	{"topic delete", "delete a topic from its brokers and every name server", runAdminTopicDelete},
	{"topic route", "show a topic's brokers with their IDC and queues", runAdminTopicRoute},
	{"topic list", "list the topics the name servers know", runAdminTopicList},
	{"topic stats", "TPS in and out per topic and consumer group, per broker and IDC, over an interval (mqadmin statsAll)", runAdminTopicStats},
	{"cluster", "list the brokers by IDC: name, address, alive, last heartbeat", runAdminCluster},
	{"broker status", "every broker's role, epoch, log end and replicas (in sync, behind)", runAdminBrokerStatus},
	{"broker switch", "make a replica its group's master (planned switchover, or --force)", runAdminBrokerSwitch},
	{"controller status", "show the failover controller: voters, leader, term, each group's master/epoch/in-sync set", runAdminControllerStatus},
	{"controller elect", "ask the failover controller for a new master of a group (--to ID, or --force)", runAdminControllerElect},
	{"group", "show a consumer group's offsets, lag and owner per queue", runAdminGroup},
	{"group update", "create or change a consumer group's config on every master: --orderly (FIFO for RocketMQ 5 consumers), --retry-max-times", runAdminGroupUpdate},
	{"clients", "list the live producers and consumers of every IDC", runAdminClients},
	{"message", "show a message by id or the messages of a topic with a key: properties and body", runAdminMessage},
	{"offset reset", "reset a group's offsets of a topic to earliest, latest or a time; running consumers restart there", runAdminOffsetReset},
	{"broker config", "show a broker's settings, or change the ones safe to change live (--set k=v)", runAdminBrokerConfig},
	{"broker stats", "TPS in and out per broker, per client IDC, over an interval", runAdminBrokerStats},
	{"consumer connections", "a consumer group's members on every broker and their subscriptions", runAdminConsumerConnections},
	{"dlq browse", "list the messages in a consumer group's dead-letter queue", runAdminDLQBrowse},
	{"dlq resend", "send a dead-lettered message to its group once more (through the retry topic)", runAdminDLQResend},
	{"producer connections", "a producer group's connected producers on every broker", runAdminProducerConnections},
	{"kv get", "read one key of the name servers' KV config", runAdminKVGet},
	{"kv put", "write one key on every name server of every IDC", runAdminKVPut},
	{"kv delete", "delete one key on every name server of every IDC", runAdminKVDelete},
	{"kv list", "list every key of a namespace", runAdminKVList},
	{"trace", "show a traced message's life: produced, stored (broker, IDC), consumed (group, client)", runAdminTrace},
}

func runAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		adminUsage(stderr)
		if len(args) == 0 {
			return usagef("which admin command? (see the list above)")
		}
		return flag.ErrHelp
	}
	// Match the longest path: "topic create" before a bare "topic".
	for _, words := range []int{2, 1} {
		if len(args) < words {
			continue
		}
		path := strings.Join(args[:words], " ")
		for _, c := range adminCommands {
			if c.path == path {
				return c.run(ctx, args[words:], stdout, stderr)
			}
		}
	}
	var known []string
	for _, c := range adminCommands {
		if strings.HasPrefix(c.path, args[0]+" ") {
			known = append(known, strings.TrimPrefix(c.path, args[0]+" "))
		}
	}
	if len(known) > 0 {
		return usagef("admin %s: expected one of %s", args[0], strings.Join(known, ", "))
	}
	return usagef("unknown admin command %q (run 'zonemq admin help')", args[0])
}

func adminUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: zonemq admin <command> [flags]   (zonemq admin <command> --help for its flags)")
	fmt.Fprintln(w, "\nEvery command takes --addrsrv URL or --namesrv 'ADDR;ADDR' (or $ZONEMQ_ADDRSRV / $ZONEMQ_NAMESRV),")
	fmt.Fprintln(w, "--idc NAME and --output text|json.")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range adminCommands {
		fmt.Fprintf(w, "  %-21s %s\n", c.path, c.summary)
	}
}

// adminSession is what every admin command shares: its flags, the parsed
// output format and, once connected, the SDK's admin client.
type adminSession struct {
	fs     *flag.FlagSet
	cf     *clientFlags
	output string
	stderr io.Writer
	admin  *admin.Client
	cfg    client.ClientConfig // as connect parsed it
}

func newAdminSession(path, synopsis string, stderr io.Writer) *adminSession {
	s := &adminSession{stderr: stderr}
	s.fs = newFlagSet("admin "+path, synopsis, stderr)
	s.cf = addClientFlags(s.fs)
	s.fs.StringVar(&s.output, "output", "text", "text (an aligned table) or json (one document)")
	return s
}

// parse parses args; check, if not nil, validates the command's own flags
// afterwards (its errors should be usage errors).
func (s *adminSession) parse(args []string, check func() error) (client.ClientConfig, error) {
	if err := parseQuiet(s.fs, args, s.stderr); err != nil {
		return client.ClientConfig{}, err
	}
	cfg, err := s.cf.config(s.stderr)
	if err != nil {
		return cfg, err
	}
	if err := checkOutput(s.output); err != nil {
		return cfg, err
	}
	if check != nil {
		if err := check(); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// connect parses args and starts an admin client; the caller defers s.close.
func (s *adminSession) connect(ctx context.Context, args []string, check func() error) error {
	cfg, err := s.parse(args, check)
	if err != nil {
		return err
	}
	a, err := admin.New(admin.Config{ClientConfig: cfg})
	if err != nil {
		return clientError(err)
	}
	if err := a.Start(ctx); err != nil {
		_ = a.Shutdown(context.Background())
		if errors.Is(err, client.ErrUnknownIDC) {
			return startError("the admin client", err)
		}
		return withSwapHint(cfg, fmt.Errorf("cannot reach the cluster: %s", oneLine(err.Error())))
	}
	s.admin, s.cfg = a, cfg
	return nil
}

func (s *adminSession) close() {
	if s.admin == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.admin.Shutdown(ctx)
}

func (s *adminSession) json() bool { return s.output == "json" }

// printJSON writes v as one indented JSON document.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table is an aligned text table.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(anySlice(header)...)
	return t
}

func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		s := fmt.Sprint(c)
		if s == "" {
			s = "-"
		}
		fmt.Fprint(t.tw, s)
	}
	fmt.Fprintln(t.tw)
}

func (t *table) flush() error { return t.tw.Flush() }

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// ago renders a past moment for a table: "0.8s ago", or "-" when unknown.
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	if d < 0 {
		d = 0
	}
	if d < time.Minute {
		return fmt.Sprintf("%.1fs ago", d.Seconds())
	}
	return d.Round(time.Second).String() + " ago"
}

// jsonTime is t in RFC 3339 with milliseconds, "" when unknown.
func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// brokerJSON is one broker in `admin cluster --output json`.
type brokerJSON struct {
	IDC           string `json:"idc"`
	Name          string `json:"name"`
	ID            int64  `json:"id"`
	Addr          string `json:"addr"`
	Cluster       string `json:"cluster"`
	Alive         bool   `json:"alive"`
	LastHeartbeat string `json:"lastHeartbeat"`
}

func runAdminCluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("cluster", "[--output text|json]", stderr)
	if err := s.connect(ctx, args, nil); err != nil {
		return err
	}
	defer s.close()
	brokers, err := s.admin.Cluster(ctx)
	if err != nil {
		return fmt.Errorf("cluster info: %s", oneLine(err.Error()))
	}
	if s.json() {
		out := make([]brokerJSON, 0, len(brokers))
		for _, b := range brokers {
			out = append(out, brokerJSON{IDC: b.IDC, Name: b.Name, ID: b.ID, Addr: b.Addr, Cluster: b.Cluster,
				Alive: b.Alive, LastHeartbeat: jsonTime(b.LastHeartbeat)})
		}
		return printJSON(stdout, out)
	}
	if len(brokers) == 0 {
		fmt.Fprintln(stdout, "no broker is registered")
		return nil
	}
	t := newTable(stdout, "IDC", "BROKER", "ID", "ADDRESS", "CLUSTER", "ALIVE", "LAST HEARTBEAT")
	for _, b := range brokers {
		t.row(b.IDC, b.Name, b.ID, b.Addr, b.Cluster, yesNo(b.Alive), ago(b.LastHeartbeat))
	}
	return t.flush()
}

// clientJSON is one client in `admin clients --output json`.
type clientJSON struct {
	IDC      string   `json:"idc"`
	ClientID string   `json:"clientId"`
	Role     string   `json:"role"`
	Groups   []string `json:"groups"`
	Addr     string   `json:"addr"`
	LastSeen string   `json:"lastSeen"`
}

func runAdminClients(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("clients", "[--client-idc NAME] [--output text|json]", stderr)
	of := s.fs.String("client-idc", "", "list only the clients of this IDC (default: every IDC)")
	if err := s.connect(ctx, args, nil); err != nil {
		return err
	}
	defer s.close()
	clients, err := s.admin.Clients(ctx, *of)
	if err != nil {
		return fmt.Errorf("client list: %s", oneLine(err.Error()))
	}
	sort.Slice(clients, func(i, j int) bool {
		if clients[i].IDC != clients[j].IDC {
			return clients[i].IDC < clients[j].IDC
		}
		return clients[i].ClientID < clients[j].ClientID
	})
	if s.json() {
		out := make([]clientJSON, 0, len(clients))
		for _, c := range clients {
			groups := c.Groups
			if groups == nil {
				groups = []string{}
			}
			out = append(out, clientJSON{IDC: c.IDC, ClientID: c.ClientID, Role: c.Role, Groups: groups,
				Addr: c.Addr, LastSeen: jsonTime(c.LastSeen)})
		}
		return printJSON(stdout, out)
	}
	if len(clients) == 0 {
		fmt.Fprintln(stdout, "no live client")
		return nil
	}
	t := newTable(stdout, "IDC", "CLIENT ID", "ROLE", "GROUPS", "ADDRESS", "LAST SEEN")
	for _, c := range clients {
		t.row(c.IDC, c.ClientID, c.Role, strings.Join(c.Groups, ","), c.Addr, ago(c.LastSeen))
	}
	return t.flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// isCode reports whether err is a server answer with code.
func isCode(err error, code client.ResponseCode) bool {
	return errors.Is(err, &client.ResponseError{Code: code})
}
