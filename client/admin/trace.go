package admin

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

// Trace event types, as the RocketMQ clients' message trace names them.
const (
	TracePublish        = "Pub"       // a producer's send
	TraceConsumeStart   = "SubBefore" // a consumer received the message
	TraceConsumeOutcome = "SubAfter"  // the consumer's handler returned
)

// maxTraceRecords bounds the trace messages read per broker and key.
const maxTraceRecords = 64

// TraceEvent is one step of a message's life, from the trace records the
// RocketMQ clients send to RMQ_SYS_TRACE_TOPIC when their message trace is
// on (rocketmq-client-go's WithTrace, Java's enableMsgTrace).
type TraceEvent struct {
	// Type is TracePublish, TraceConsumeStart or TraceConsumeOutcome.
	Type string
	// Time is when the client recorded the step.
	Time time.Time
	// Group is the producer or consumer group.
	Group string
	// Topic is the message's topic (publish records only).
	Topic string
	// MsgID is the message's id (UNIQ_KEY); OffsetMsgID the broker's id
	// (publish records only).
	MsgID       string
	OffsetMsgID string
	// Tags and Keys are the message's (Keys space-separated).
	Tags string
	Keys string
	// StoreHost is the broker address that stored the message (publish),
	// and Broker and IDC name that broker when the name servers know it.
	StoreHost string
	Broker    string
	IDC       string
	// ClientHost is the producer's (publish) or the consumer's IP.
	ClientHost string
	// ClientID and ClientIDC name the producer or consumer, when it is
	// still connected and its group has one member on that host (see
	// identifyTraceClients); ClientIDC is "" for clients whose id carries
	// no IDC.
	ClientID  string
	ClientIDC string
	// RequestID pairs a consumer's start and outcome records.
	RequestID string
	// Cost is the send's or the handler's duration.
	Cost time.Duration
	// Success is the send's or the handler's result.
	Success bool
	// RetryTimes counts earlier deliveries (consume start records).
	RetryTimes int
	// BodyLength is the body size in bytes (publish records only).
	BodyLength int
}

// MessageTrace returns the trace events of the message with id msgID
// (its UNIQ_KEY, as SendResult.MsgID), oldest first, read from the trace
// topic of every live broker of every IDC. No trace is an empty result.
func (a *Client) MessageTrace(ctx context.Context, msgID string) ([]TraceEvent, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	brokers, err := a.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	evs, err := a.traceRecords(ctx, brokers, msgID)
	var out []TraceEvent
	for _, e := range evs {
		if e.MsgID == msgID {
			out = append(out, e)
		}
	}
	out = finishTrace(out, brokers)
	a.identifyTraceClients(ctx, out, brokers)
	return out, err
}

// TraceByKey returns the trace events of every message whose keys include
// key, oldest first.
func (a *Client) TraceByKey(ctx context.Context, key string) ([]TraceEvent, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	brokers, err := a.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	evs, err := a.traceRecords(ctx, brokers, key)
	ids := map[string]bool{}
	for _, e := range evs {
		for _, k := range strings.Fields(e.Keys) {
			if k == key {
				ids[e.MsgID] = true
			}
		}
	}
	var out []TraceEvent
	for id := range ids {
		more, merr := a.traceRecords(ctx, brokers, id)
		err = errors.Join(err, merr)
		for _, e := range more {
			if e.MsgID == id {
				out = append(out, e)
			}
		}
	}
	out = finishTrace(out, brokers)
	a.identifyTraceClients(ctx, out, brokers)
	return out, err
}

// traceRecords reads the trace messages indexed under key (a message id
// or key) from every live master and decodes their records.
func (a *Client) traceRecords(ctx context.Context, brokers []BrokerStatus, key string) ([]TraceEvent, error) {
	var (
		mu   sync.Mutex
		out  []TraceEvent
		errs []error
		wg   sync.WaitGroup
	)
	h := protocol.QueryMessageRequestHeader{Topic: protocol.TraceTopic, Key: key, MaxNum: maxTraceRecords,
		EndTimestamp: time.Now().Add(time.Hour).UnixMilli()}
	for _, b := range brokers {
		if !b.Alive || b.ID != protocol.MasterID {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, err := a.queryByKey(ctx, b.Addr, h)
			var evs []TraceEvent
			if err == nil {
				evs, err = decodeTraceMessages(body)
			}
			mu.Lock()
			defer mu.Unlock()
			out = append(out, evs...)
			if err != nil {
				errs = append(errs, fmt.Errorf("broker %s (%s): %w", b.Name, b.Addr, err))
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// decodeTraceMessages decodes stored trace messages into events.
func decodeTraceMessages(body []byte) ([]TraceEvent, error) {
	var out []TraceEvent
	for len(body) > 0 {
		m, n, err := protocol.DecodeStoredMessage(body, false, false)
		if err != nil {
			return out, err
		}
		body = body[n:]
		out = append(out, parseTraceRecords(string(m.Body))...)
	}
	return out, nil
}

// parseTraceRecords parses a trace message body: records separated by
// 0x02, fields by 0x01, the first field naming the record's layout
// (RocketMQ's TraceDataEncoder). Unknown or short records are skipped.
func parseTraceRecords(body string) []TraceEvent {
	var out []TraceEvent
	for _, rec := range strings.Split(body, "\x02") {
		f := strings.Split(strings.TrimSpace(rec), "\x01")
		field := func(i int) string {
			if i < len(f) && f[i] != "null" {
				return f[i]
			}
			return ""
		}
		num := func(i int) int64 {
			n, _ := strconv.ParseInt(field(i), 10, 64)
			return n
		}
		var e TraceEvent
		switch {
		case f[0] == TracePublish && len(f) >= 14:
			e = TraceEvent{Type: TracePublish, Time: time.UnixMilli(num(1)), Group: field(3), Topic: field(4), MsgID: field(5),
				Tags: field(6), Keys: field(7), StoreHost: field(8), BodyLength: int(num(9)),
				Cost: time.Duration(num(10)) * time.Millisecond, OffsetMsgID: field(12), Success: field(13) == "true",
				ClientHost: field(14)}
		case f[0] == TraceConsumeStart && len(f) >= 8:
			e = TraceEvent{Type: TraceConsumeStart, Time: time.UnixMilli(num(1)), Group: field(3), RequestID: field(4),
				MsgID: field(5), RetryTimes: int(num(6)), Keys: field(7), ClientHost: field(8), Success: true}
		case f[0] == TraceConsumeOutcome && len(f) >= 7:
			e = TraceEvent{Type: TraceConsumeOutcome, RequestID: field(1), MsgID: field(2),
				Cost: time.Duration(num(3)) * time.Millisecond, Success: field(4) == "true", Keys: field(5),
				Time: time.UnixMilli(num(7)), Group: field(8)}
		default:
			continue
		}
		out = append(out, e)
	}
	return out
}

// finishTrace names the storing broker and IDC of publish events (and of
// first deliveries, read from there), gives
// outcome events the consumer of their start event, drops duplicates and
// sorts by time.
func finishTrace(evs []TraceEvent, brokers []BrokerStatus) []TraceEvent {
	byAddr := map[string]BrokerStatus{}
	for _, b := range brokers {
		byAddr[b.Addr] = b
	}
	starts := map[string]TraceEvent{}
	for _, e := range evs {
		if e.Type == TraceConsumeStart {
			starts[e.MsgID+"/"+e.RequestID] = e
		}
	}
	// A first delivery is read from the broker that stored the message
	// (a redelivery comes from the retry topic, possibly elsewhere).
	storedOn := map[string]BrokerStatus{}
	for _, e := range evs {
		if b, ok := byAddr[e.StoreHost]; ok && e.Type == TracePublish && e.Success {
			storedOn[e.MsgID] = b
		}
	}
	seen := map[TraceEvent]bool{}
	out := []TraceEvent{}
	for _, e := range evs {
		if b, ok := byAddr[e.StoreHost]; ok && e.Type == TracePublish {
			e.Broker, e.IDC = b.Name, b.IDC
		}
		if b, ok := storedOn[e.MsgID]; ok && e.Type == TraceConsumeStart && e.RetryTimes == 0 {
			e.Broker, e.IDC = b.Name, b.IDC
		}
		if s, ok := starts[e.MsgID+"/"+e.RequestID]; ok && e.Type == TraceConsumeOutcome {
			e.ClientHost = s.ClientHost
			if b, ok := storedOn[e.MsgID]; ok && s.RetryTimes == 0 {
				e.Broker, e.IDC = b.Name, b.IDC
			}
			if e.Group == "" {
				e.Group = s.Group
			}
			if e.Time.UnixMilli() == 0 {
				e.Time = s.Time
			}
		}
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	// Messages in the order of their first event; within one, the publish
	// first (the producer and the consumer stamp their records with their
	// own clocks, and a send records its time when it returns, so a
	// delivery can carry an earlier time), then by time.
	first := map[string]time.Time{}
	for _, e := range out {
		if t, ok := first[e.MsgID]; !ok || e.Time.Before(t) {
			first[e.MsgID] = e.Time
		}
	}
	rank := map[string]int{TracePublish: 0, TraceConsumeStart: 1, TraceConsumeOutcome: 2}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.MsgID != b.MsgID {
			if !first[a.MsgID].Equal(first[b.MsgID]) {
				return first[a.MsgID].Before(first[b.MsgID])
			}
			return a.MsgID < b.MsgID
		}
		if (a.Type == TracePublish) != (b.Type == TracePublish) {
			return a.Type == TracePublish
		}
		if !a.Time.Equal(b.Time) {
			return a.Time.Before(b.Time)
		}
		return rank[a.Type] < rank[b.Type]
	})
	return out
}
