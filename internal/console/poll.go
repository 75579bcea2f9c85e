package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zonemq/zonemq/client/admin"
)

// Limits that keep one poll bounded on a large cluster; what is left out is
// named in the snapshot's problems.
const (
	maxTopics = 40
	maxGroups = 20
	// topicEvery is how many polls pass between two reads of the topic list
	// and routes (they change rarely; the brokers and flows every poll).
	topicEvery = 5
	maxEvents  = 200
	// minFlowRate is the rate below which a change of where an IDC's
	// clients send is not put on the timeline (idle clients do not flap).
	minFlowRate = 0.5
)

// addrsrvIDCHeader is addrsrv.IDCHeader (the console may not import the
// server package).
const addrsrvIDCHeader = "Zonemq-Idc"

// brokerState is what the poller remembers of a broker between polls.
type brokerState struct {
	name, idc, addr string
	id              int64 // 0 = master; a replica's id otherwise
	up              bool
	detail          string
	// samples are the counters by client IDC of the polls within
	// rateWindow (plus the one just before it), oldest first.
	samples         []countSample
	inRate, outRate map[string]float64 // messages per second over the samples
	runtime         map[string]string
	// takeovers is the broker's running total of queue takeovers, and
	// takeoverAt when it last rose.
	takeovers     int64
	takeoversSeen bool
	takeoverAt    time.Time
}

// countSample is one poll's message counters by client IDC.
type countSample struct {
	at      time.Time
	in, out map[string]int64
}

// rateWindow is the span rates are measured over: a steady 2 msg/s
// producer polled every second would otherwise show 1, 3, 2, 1… as its
// messages fall on either side of a poll.
const rateWindow = 5 * time.Second

// takeoverRecent is how long after a takeover a broker's card marks it.
const takeoverRecent = 30 * time.Second

// addSample records a poll's counters and updates the rates over the
// window.
func (st *brokerState) addSample(now time.Time, in, out map[string]int64) {
	st.samples = append(st.samples, countSample{now, in, out})
	for len(st.samples) > 2 && now.Sub(st.samples[1].at) >= rateWindow {
		st.samples = st.samples[1:]
	}
	if len(st.samples) < 2 {
		return
	}
	base := st.samples[0]
	dt := now.Sub(base.at).Seconds()
	st.inRate, st.outRate = rates(base.in, in, dt), rates(base.out, out, dt)
}

// noteTakeovers records the broker's takeover total; it reports whether
// it rose within takeoverRecent. The first total seen is history of
// unknown age, not a takeover now.
func (st *brokerState) noteTakeovers(now time.Time, total int64) bool {
	if st.takeoversSeen && total > st.takeovers {
		st.takeoverAt = now
	}
	st.takeovers, st.takeoversSeen = total, true
	return !st.takeoverAt.IsZero() && now.Sub(st.takeoverAt) < takeoverRecent
}

// poller builds snapshots; it is used by one goroutine at a time (the poll
// loop), except for the fields under Server.mu.
type poller struct {
	opts   Options
	admin  *admin.Client
	http   *http.Client
	ticks  int
	topics []TopicView

	brokers    map[string]*brokerState // by broker name
	addrsrvIDC map[string]string       // URL → IDC, remembered while it is down
	upBefore   map[string]bool         // "namesrv ADDR", "addrsrv URL", "broker NAME" → was up
	dominant   map[string]string       // "produce idc1" → the IDC that got most of it
	events     []Event                 // newest last
	// lastQueues is every group queue as last answered, so a down
	// broker's queues stay in the table with the lag stranded there.
	lastQueues map[string]QueueView
}

func newPoller(opts Options, admin *admin.Client) *poller {
	return &poller{
		opts: opts, admin: admin,
		http:       &http.Client{Timeout: opts.RequestTimeout},
		brokers:    map[string]*brokerState{},
		addrsrvIDC: map[string]string{},
		upBefore:   map[string]bool{},
		lastQueues: map[string]QueueView{},
		dominant:   map[string]string{},
	}
}

// addrsrvNamesrv is one element of an address server's GET /v1/namesrvs.
type addrsrvNamesrv struct {
	Addr      string `json:"addr"`
	IDC       string `json:"idc"`
	Alive     bool   `json:"alive"`
	LastError string `json:"lastError"`
}

// poll reads the cluster once and returns the snapshot.
func (p *poller) poll(ctx context.Context) Snapshot {
	now := time.Now()
	snap := Snapshot{At: now, Addrsrvs: p.opts.AddrsrvURLs}
	idcs := map[string]*IDCView{}
	idcOf := func(name string) *IDCView {
		if name == "" {
			name = "(no IDC)"
		}
		v := idcs[name]
		if v == nil {
			v = &IDCView{Name: name, Healthy: true}
			idcs[name] = v
		}
		return v
	}

	// Address servers, and through them every name server with its health.
	namesrvs := map[string]addrsrvNamesrv{}
	for _, u := range p.opts.AddrsrvURLs {
		list, idc, err := p.readAddrsrv(ctx, u)
		if idc != "" {
			p.addrsrvIDC[u] = idc
		}
		ep := EndpointView{Addr: strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://"), Up: err == nil}
		if err != nil {
			ep.Detail = err.Error()
		}
		v := idcOf(p.addrsrvIDC[u])
		v.Addrsrvs = append(v.Addrsrvs, ep)
		p.transition(&snap, "addrsrv "+u, ep.Up, v.Name, "address server "+ep.Addr)
		for _, ns := range list {
			if prev, ok := namesrvs[ns.Addr]; !ok || (!prev.Alive && ns.Alive) {
				namesrvs[ns.Addr] = ns
			}
		}
	}
	for _, ns := range sortedValues(namesrvs, func(n addrsrvNamesrv) string { return n.IDC + " " + n.Addr }) {
		v := idcOf(ns.IDC)
		v.Namesrvs = append(v.Namesrvs, EndpointView{Addr: ns.Addr, Up: ns.Alive, Detail: ns.LastError})
		p.transition(&snap, "namesrv "+ns.Addr, ns.Alive, v.Name, "name server "+ns.Addr)
	}

	p.pollBrokers(ctx, &snap, now)
	for _, b := range sortedValues(p.brokers, func(b *brokerState) string { return b.idc + " " + brokerKey(b.name, b.id) }) {
		v := idcOf(b.idc)
		bv := BrokerView{Name: b.name, ID: b.id, Key: brokerKey(b.name, b.id), Addr: b.addr, Up: b.up, Detail: b.detail}
		if b.up {
			bv.InRate, bv.OutRate = sum(b.inRate), sum(b.outRate)
			bv.Topics, _ = strconv.Atoi(b.runtime["topicCount"])
			bv.Conns, _ = strconv.Atoi(b.runtime["clientConnectionCount"])
			bv.DiskRatio, _ = strconv.ParseFloat(b.runtime["commitLogDiskRatio"], 64)
			bv.Takeovers, _ = strconv.ParseInt(b.runtime["zonemqTakeovers"], 10, 64)
			bv.TakeoverRecent = b.noteTakeovers(now, bv.Takeovers)
		}
		v.Brokers = append(v.Brokers, bv)
	}

	groups := p.pollClients(ctx, &snap, idcOf)
	for _, v := range idcs {
		for _, list := range [][]EndpointView{v.Addrsrvs, v.Namesrvs} {
			for _, e := range list {
				v.Healthy = v.Healthy && e.Up
			}
		}
		for _, b := range v.Brokers {
			v.Healthy = v.Healthy && b.Up
		}
	}
	for _, v := range sortedValues(idcs, func(v *IDCView) string { return v.Name }) {
		snap.IDCs = append(snap.IDCs, *v)
	}
	snap.Flows = p.flows(&snap, snap.IDCs)

	if p.ticks%topicEvery == 0 {
		p.topics = p.pollTopics(ctx, &snap)
	}
	p.ticks++
	snap.Topics = p.topics
	snap.Groups = p.pollGroups(ctx, &snap, groups)

	for i := len(p.events) - 1; i >= 0; i-- {
		snap.Events = append(snap.Events, p.events[i])
	}
	return snap
}

// readAddrsrv fetches one address server's view of the name servers.
func (p *poller) readAddrsrv(ctx context.Context, base string) ([]addrsrvNamesrv, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/v1/namesrvs", nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("unreachable: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("answered %s", resp.Status)
	}
	var list []addrsrvNamesrv
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, "", fmt.Errorf("unreadable answer: %w", err)
	}
	return list, resp.Header.Get(addrsrvIDCHeader), nil
}

// pollBrokers refreshes the brokers: registered ones from the name servers,
// then each one's runtime info (in parallel). A broker that left the routes
// stays on the page, down.
func (p *poller) pollBrokers(ctx context.Context, snap *Snapshot, now time.Time) {
	registered := map[string]bool{}
	cluster, err := p.admin.Cluster(ctx)
	if err != nil {
		snap.Problems = append(snap.Problems, "cluster info: "+err.Error())
	}
	for _, b := range cluster {
		key := brokerKey(b.Name, b.ID)
		st := p.brokers[key]
		if st == nil {
			st = &brokerState{name: b.Name, id: b.ID}
			p.brokers[key] = st
		}
		st.idc, st.addr = b.IDC, b.Addr
		registered[key] = true
	}
	var wg sync.WaitGroup
	for _, st := range p.brokers {
		if err != nil {
			break // no cluster info: keep every broker as it was
		}
		if !registered[brokerKey(st.name, st.id)] {
			st.up, st.detail = false, "not registered with the name servers"
			st.inRate, st.outRate, st.samples = nil, nil, nil
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, p.opts.RequestTimeout)
			defer cancel()
			rt, rerr := p.admin.BrokerRuntime(rctx, st.addr)
			if rerr != nil {
				st.up, st.detail = false, "registered, but no answer: "+rerr.Error()
				st.inRate, st.outRate, st.samples = nil, nil, nil
				return
			}
			in, out := parseCounts(rt["zonemqMsgInByClientIDC"]), parseCounts(rt["zonemqMsgOutByClientIDC"])
			if !st.up {
				st.samples = nil // back from down: no rate across the gap
			}
			st.addSample(now, in, out)
			st.up, st.detail, st.runtime = true, "", rt
		}()
	}
	wg.Wait()
	for key, st := range p.brokers {
		p.transition(snap, "broker "+key, st.up, st.idc, "broker "+brokerLabel(st.name, st.id))
	}
}

// pollClients counts the live clients per IDC and returns the consumer
// groups they belong to.
func (p *poller) pollClients(ctx context.Context, snap *Snapshot, idcOf func(string) *IDCView) []string {
	clients, err := p.admin.Clients(ctx, "")
	if err != nil {
		snap.Problems = append(snap.Problems, "clients: "+err.Error())
		return nil
	}
	groups := map[string]bool{}
	for _, c := range clients {
		v := idcOf(c.IDC)
		if strings.Contains(c.Role, "producer") {
			v.Producers++
		}
		if strings.Contains(c.Role, "consumer") {
			v.Consumers++
			for _, g := range c.Groups {
				groups[g] = true
			}
		}
	}
	out := make([]string, 0, len(groups))
	for g := range groups {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// flows turns the brokers' per-client-IDC rates into "IDC x's producers
// send here" rows, and puts a change of where most of it goes on the
// timeline.
func (p *poller) flows(snap *Snapshot, idcs []IDCView) []FlowView {
	produce, consume := map[string]map[string]float64{}, map[string]map[string]float64{}
	add := func(m map[string]map[string]float64, client, broker string, r float64) {
		if m[client] == nil {
			m[client] = map[string]float64{}
		}
		m[client][broker] += r
	}
	for _, b := range p.brokers {
		for c, r := range b.inRate {
			add(produce, c, b.idc, r)
		}
		for c, r := range b.outRate {
			add(consume, c, b.idc, r)
		}
	}
	var out []FlowView
	for _, v := range idcs {
		if v.Name == "" || v.Name == "(no IDC)" {
			continue
		}
		fv := FlowView{IDC: v.Name}
		fv.Produce = p.targets(snap, "produce", v.Name, produce[v.Name], idcs)
		fv.Consume = p.targets(snap, "consume", v.Name, consume[v.Name], idcs)
		out = append(out, fv)
	}
	return out
}

// targets lists the rate from one IDC's clients to every IDC's brokers.
func (p *poller) targets(snap *Snapshot, what, from string, rates map[string]float64, idcs []IDCView) []FlowTarget {
	total := sum(rates)
	var out []FlowTarget
	best, bestRate := "", 0.0
	for _, v := range idcs {
		if len(v.Brokers) == 0 {
			continue
		}
		t := FlowTarget{IDC: v.Name, Rate: rates[v.Name], Home: v.Name == from}
		if total > 0 {
			t.Percent = 100 * t.Rate / total
		}
		if t.Rate > bestRate {
			best, bestRate = v.Name, t.Rate
		}
		out = append(out, t)
	}
	if total >= minFlowRate {
		key := what + " " + from
		if prev, ok := p.dominant[key]; ok && prev != best {
			verb := map[string]string{"produce": "producers", "consume": "consumers"}[what]
			if best == from {
				p.event("up", from, fmt.Sprintf("%s's %s are back on %s's own brokers (%.0f msg/s)", from, verb, from, bestRate))
			} else {
				verb = map[string]string{"produce": "producers now send to", "consume": "consumers now read from"}[what]
				p.event("move", from, fmt.Sprintf("%s's %s %s's brokers (%.0f msg/s)", from, verb, best, bestRate))
			}
		}
		p.dominant[key] = best
	}
	return out
}

// pollTopics reads the user topics and their routes.
func (p *poller) pollTopics(ctx context.Context, snap *Snapshot) []TopicView {
	names, err := p.admin.TopicList(ctx)
	if err != nil {
		snap.Problems = append(snap.Problems, "topic list: "+err.Error())
		return p.topics
	}
	var user []string
	for _, n := range names {
		if !p.systemTopic(n) {
			user = append(user, n)
		}
	}
	if len(user) > maxTopics {
		snap.Problems = append(snap.Problems, fmt.Sprintf("showing %d of %d topics", maxTopics, len(user)))
		user = user[:maxTopics]
	}
	var out []TopicView
	for _, n := range user {
		r, err := p.admin.TopicRoute(ctx, n)
		if err != nil {
			continue // deleted meanwhile, or no broker holds it now
		}
		tv := TopicView{Name: n}
		for _, b := range r.Brokers {
			tv.Brokers = append(tv.Brokers, TopicBrokerRow{Broker: b.Name, IDC: b.IDC, ReadQueues: b.ReadQueues,
				WriteQueues: b.WriteQueues, Perm: permString(b.Perm)})
		}
		sort.Slice(tv.Brokers, func(i, j int) bool {
			return tv.Brokers[i].IDC+tv.Brokers[i].Broker < tv.Brokers[j].IDC+tv.Brokers[j].Broker
		})
		out = append(out, tv)
	}
	return out
}

// brokerKey names a broker of a group: its name for the master (id 0),
// "name#id" for a replica.
func brokerKey(name string, id int64) string {
	if id == 0 {
		return name
	}
	return name + "#" + strconv.FormatInt(id, 10)
}

// brokerLabel names a broker for people, as its card does: "broker-idc2"
// for a master, "broker-idc2 replica 1" for a replica.
func brokerLabel(name string, id int64) string {
	if id == 0 {
		return name
	}
	return name + " replica " + strconv.FormatInt(id, 10)
}

// systemTopic reports RocketMQ's and zonemq's internal topics, and the
// cluster and broker names the name servers list as topics.
func (p *poller) systemTopic(n string) bool {
	if strings.HasPrefix(n, "%") || strings.HasPrefix(n, "rmq_sys_") || strings.HasPrefix(n, "RMQ_SYS_") {
		return true
	}
	switch n {
	case "TBW102", "SCHEDULE_TOPIC_XXXX", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "BenchmarkTest",
		"TRANS_CHECK_MAX_TIME_TOPIC", "DefaultCluster", "DefaultHeartBeatSyncerTopic":
		return true
	}
	for _, b := range p.brokers {
		if b.name == n {
			return true
		}
	}
	return false
}

// pollGroups reads each consumer group's queues: owner, its IDC and lag.
func (p *poller) pollGroups(ctx context.Context, snap *Snapshot, groups []string) []GroupView {
	if len(groups) > maxGroups {
		snap.Problems = append(snap.Problems, fmt.Sprintf("showing %d of %d consumer groups", maxGroups, len(groups)))
		groups = groups[:maxGroups]
	}
	var out []GroupView
	for _, g := range groups {
		conns := p.groupConnections(ctx, g)
		if conns == nil {
			continue
		}
		var members []string
		for _, m := range conns.Members {
			members = append(members, m.ClientID)
		}
		topics := make([]string, 0, len(conns.Topics))
		for t := range conns.Topics {
			if !strings.HasPrefix(t, "%") {
				topics = append(topics, t)
			}
		}
		sort.Strings(topics)
		for _, t := range topics {
			offs, err := p.admin.GroupOffsets(ctx, g, t)
			if err != nil {
				snap.Problems = append(snap.Problems, fmt.Sprintf("group %s on %s: %v", g, t, err))
				continue
			}
			gv := GroupView{Name: g, Topic: t, Members: members}
			shown := map[string]bool{}
			for _, o := range offs {
				qv := QueueView{Broker: o.Queue.BrokerName, IDC: o.IDC, Queue: o.Queue.QueueID, Owner: o.Owner,
					OwnerIDC: idcOfClientID(o.Owner), Committed: o.Committed, Max: o.Max, Lag: o.Lag}
				if o.Err != nil {
					qv.Err = o.Err.Error()
				} else {
					qv.SeenAt = snap.At
					p.lastQueues[queueKey(g, t, qv.Broker, qv.Queue)] = qv
				}
				shown[qv.Broker] = true
				gv.TotalLag += max(o.Lag, 0)
				gv.Queues = append(gv.Queues, qv)
			}
			// A broker that left the routes takes its queues out of the
			// answer, but their lag is stranded there, not gone: show
			// them as last seen, marked.
			for key, qv := range p.lastQueues {
				if !strings.HasPrefix(key, g+"|"+t+"|") || shown[qv.Broker] {
					continue
				}
				qv.Stale, qv.Owner, qv.OwnerIDC = true, "", ""
				gv.TotalLag += max(qv.Lag, 0)
				gv.Queues = append(gv.Queues, qv)
			}
			sort.SliceStable(gv.Queues, func(i, j int) bool {
				a, b := gv.Queues[i], gv.Queues[j]
				return a.Broker < b.Broker || a.Broker == b.Broker && a.Queue < b.Queue
			})
			out = append(out, gv)
		}
	}
	return out
}

// queueKey names a group's queue in poller.lastQueues.
func queueKey(group, topic, broker string, queue int) string {
	return group + "|" + topic + "|" + broker + "|" + strconv.Itoa(queue)
}

// groupConnections asks the live brokers, in name order, until one knows
// the group.
func (p *poller) groupConnections(ctx context.Context, group string) *admin.GroupConnections {
	for _, b := range sortedValues(p.brokers, func(b *brokerState) string { return brokerKey(b.name, b.id) }) {
		if !b.up || b.id != 0 {
			continue
		}
		if gc, err := p.admin.ConsumerConnections(ctx, b.addr, group); err == nil {
			return gc
		}
	}
	return nil
}

// transition records an up/down change of key on the timeline.
func (p *poller) transition(snap *Snapshot, key string, up bool, idc, what string) {
	prev, seen := p.upBefore[key]
	p.upBefore[key] = up
	switch {
	case !seen && !up:
		p.event("down", idc, what+" is down")
	case seen && prev && !up:
		p.event("down", idc, what+" went down")
	case seen && !prev && up:
		p.event("up", idc, what+" is back")
	}
}

// event appends to the timeline, dropping the oldest beyond maxEvents.
func (p *poller) event(kind, idc, text string) {
	p.events = append(p.events, Event{At: time.Now(), Kind: kind, IDC: idc, Text: text})
	if len(p.events) > maxEvents {
		p.events = p.events[len(p.events)-maxEvents:]
	}
}

// parseCounts reads "idc1=12;idc2=3".
func parseCounts(s string) map[string]int64 {
	out := map[string]int64{}
	for _, part := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}

// rates is (cur − prev) / dt per key; a counter that went down (the broker
// restarted) counts from zero.
func rates(prev, cur map[string]int64, dt float64) map[string]float64 {
	out := map[string]float64{}
	if dt <= 0 {
		return out
	}
	for k, c := range cur {
		d := c - prev[k]
		if d < 0 {
			d = c
		}
		out[k] = float64(d) / dt
	}
	return out
}

func sum(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// idcOfClientID reads the IDC a zonemq SDK client id carries
// ("ip@instance@idc=NAME"), "" for stock clients.
func idcOfClientID(id string) string {
	parts := strings.Split(id, "@")
	for i := len(parts) - 1; i >= 2; i-- {
		if v, ok := strings.CutPrefix(parts[i], "idc="); ok {
			return v
		}
	}
	return ""
}

// permString renders RocketMQ permission bits as "rw", "r-", "-w", "--".
func permString(perm int) string {
	b := []byte("--")
	if perm&4 != 0 {
		b[0] = 'r'
	}
	if perm&2 != 0 {
		b[1] = 'w'
	}
	return string(b)
}

// sortedValues returns m's values ordered by key(v).
func sortedValues[K comparable, V any](m map[K]V, key func(V) string) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	return out
}
