package admin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/protocol"
)

// ErrNotFound is returned when a message looked up by id or key does not
// exist (or is no longer kept).
var ErrNotFound = errors.New("zonemq client: no such message")

// ViewMessage returns the message with broker (offset) message id id — the
// OffsetMsgID a send result or a delivery carries — read from the broker
// the id names (VIEW_MESSAGE_BY_ID, `mqadmin queryMsgById`). An id that is
// not an offset id is a client-assigned one (UNIQ_KEY): then topic is
// required, and the topic's brokers are asked by key.
func (a *Client) ViewMessage(ctx context.Context, topic, id string) (*client.MessageExt, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	// A client id (UNIQ_KEY) of an IPv4 producer is 32 hex digits, as an
	// offset id is, so an id that decodes as one may still be the other:
	// with a topic, a failed look-up by offset falls back to the key index
	// (RocketMQ's queryMsgById does the same).
	host, offset, perr := protocol.ParseOffsetMessageID(id)
	if perr == nil {
		m, err := a.viewByOffset(ctx, host.String(), offset)
		if err == nil || topic == "" {
			return m, err
		}
	} else if topic == "" {
		return nil, fmt.Errorf("zonemq client: %q is not a broker message id; give the topic to look it up as a client id", id)
	}
	ms, err := a.QueryMessages(ctx, topic, id, 1)
	if err != nil {
		return nil, err
	}
	return ms[0], nil
}

// viewByOffset reads the record at a commit-log offset of the broker at addr.
func (a *Client) viewByOffset(ctx context.Context, addr string, offset int64) (*client.MessageExt, error) {
	h := protocol.ViewMessageRequestHeader{Offset: offset}
	resp, err := a.conn.Call(ctx, addr, req(protocol.ViewMessageByID, h.Ext(), nil))
	if err != nil {
		return nil, err
	}
	ms, err := client.DecodeMessages(resp.Body, nil)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, ErrNotFound
	}
	ms[0].BrokerAddr = addr
	a.stampBroker(ctx, ms[0])
	return ms[0], nil
}

// QueryMessages returns up to max messages of topic whose KEYS (or client
// message id) include key, from every broker of the topic's route
// (QUERY_MESSAGE, `mqadmin queryMsgByKey`), oldest first. It returns
// ErrNotFound when no broker has one.
func (a *Client) QueryMessages(ctx context.Context, topic, key string, max int) ([]*client.MessageExt, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	if max <= 0 {
		max = 32
	}
	_, rbs, err := a.readBrokers(ctx, topic)
	if err != nil {
		return nil, err
	}
	var (
		mu   sync.Mutex
		out  []*client.MessageExt
		errs []error
		wg   sync.WaitGroup
	)
	for _, rb := range rbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := rb.Master()
			h := protocol.QueryMessageRequestHeader{Topic: topic, Key: key, MaxNum: int32(max), BeginTimestamp: 0, EndTimestamp: math.MaxInt64}
			body, err := a.queryByKey(ctx, addr, h)
			var ms []*client.MessageExt
			if err == nil {
				ms, err = client.DecodeMessages(body, &rb)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("broker %s: %w", rb.Name, err))
			}
			out = append(out, ms...)
		}()
	}
	wg.Wait()
	if len(out) == 0 {
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		return nil, fmt.Errorf("%w: topic %s has no message with key %s", ErrNotFound, topic, key)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StoreTimestamp.Before(out[j].StoreTimestamp) })
	if len(out) > max {
		out = out[:max]
	}
	return out, nil
}

// queryByKey asks the broker at addr for the stored messages h names
// (QUERY_MESSAGE); none found is an empty body.
func (a *Client) queryByKey(ctx context.Context, addr string, h protocol.QueryMessageRequestHeader) ([]byte, error) {
	resp, err := a.conn.Call(ctx, addr, req(protocol.QueryMessage, h.Ext(), nil))
	if errors.Is(err, &client.ResponseError{Code: client.CodeQueryNotFound}) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// stampBroker fills a viewed message's broker name and IDC from its topic's
// route, when the route names the broker it was read from.
func (a *Client) stampBroker(ctx context.Context, m *client.MessageExt) {
	r, err := a.conn.Route(ctx, m.Topic)
	if err != nil {
		return
	}
	for _, b := range r.Brokers {
		if b.Master() == m.BrokerAddr {
			m.BrokerName, m.IDC = b.Name, b.IDC
		}
	}
}

// ResetTarget is where ResetOffsets moves a group: the first message stored
// at or after Time, or, with Earliest or Latest, the start or the end of
// each queue.
type ResetTarget struct {
	Earliest, Latest bool
	Time             time.Time
}

// ParseResetTarget reads a reset target as the CLI and the console take it:
// "earliest" (or "first"), "latest" (or "last"), an RFC 3339 time, Unix
// milliseconds, or a duration before now such as "10m".
func ParseResetTarget(s string, now time.Time) (ResetTarget, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "earliest", "first":
		return ResetTarget{Earliest: true}, nil
	case "latest", "last":
		return ResetTarget{Latest: true}, nil
	}
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return ResetTarget{Time: t}, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms > 0 {
		return ResetTarget{Time: time.UnixMilli(ms)}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return ResetTarget{Time: now.Add(-d)}, nil
	}
	return ResetTarget{}, fmt.Errorf("%q is not earliest, latest, an RFC 3339 time, Unix milliseconds or a duration", s)
}

// OffsetReset is one queue's reset.
type OffsetReset struct {
	Queue      client.MessageQueue
	BrokerAddr string
	IDC        string
	// Old is the committed offset before (-1: none); New the one set.
	Old, New int64
	// Notified is how many of the group's consumers the queue's broker told
	// to restart from New (RESET_CONSUMER_CLIENT_OFFSET).
	Notified int
	Err      error
}

// ResetOffsets sets group's committed offset of every readable queue of
// topic to target, as `mqadmin resetOffsetByTime -f true`: each of the
// topic's brokers commits the new offsets and tells the group's consumers
// connected to it (INVOKE_BROKER_TO_RESET_OFFSET, then the broker's
// RESET_CONSUMER_CLIENT_OFFSET), so running consumers restart their queues
// from there (this SDK's and rocketmq-client-go's push consumers do; a
// client that ignores the notice commits the offset it held and undoes the
// reset, so stop those first). Offsets move forward too. Per-broker
// failures are in the result's Err fields.
func (a *Client) ResetOffsets(ctx context.Context, group, topic string, target ResetTarget) ([]OffsetReset, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	_, rbs, err := a.readBrokers(ctx, topic)
	if err != nil {
		return nil, err
	}
	h := protocol.ResetOffsetRequestHeader{Topic: topic, Group: group, IsForce: true}
	switch {
	case target.Earliest:
		h.Timestamp = 0
	case target.Latest:
		h.Timestamp = protocol.ResetOffsetLatest
	default:
		h.Timestamp = max(target.Time.UnixMilli(), 0)
	}
	var out []OffsetReset
	for _, rb := range rbs {
		addr := rb.Master()
		rows := make([]OffsetReset, rb.ReadQueues)
		for q := range rows {
			mq := client.MessageQueue{Topic: topic, BrokerName: rb.Name, QueueID: q}
			rows[q] = OffsetReset{Queue: mq, BrokerAddr: addr, IDC: rb.IDC, Old: -1, New: -1}
			if off, err := a.conn.CommittedOffset(ctx, addr, group, mq); err == nil {
				rows[q].Old = off
			}
		}
		table, notified, err := a.invokeReset(ctx, addr, h)
		for q := range rows {
			rows[q].Err, rows[q].Notified = err, notified
			if off, ok := table[protocol.MessageQueue{Topic: topic, BrokerName: rb.Name, QueueID: q}]; ok {
				rows[q].New = off
			} else if err == nil {
				rows[q].Err = fmt.Errorf("zonemq client: broker %s did not reset queue %d", rb.Name, q)
			}
		}
		out = append(out, rows...)
	}
	return out, nil
}

// invokeReset asks the broker at addr to reset (INVOKE_BROKER_TO_RESET_OFFSET)
// and returns the offsets it set and how many consumers it told.
func (a *Client) invokeReset(ctx context.Context, addr string, h protocol.ResetOffsetRequestHeader) (map[protocol.MessageQueue]int64, int, error) {
	resp, err := a.conn.Call(ctx, addr, req(protocol.InvokeBrokerToResetOffset, h.Ext(), nil))
	if err != nil {
		return nil, 0, err
	}
	body, err := protocol.DecodeResetOffsetBody(resp.Body)
	if err != nil {
		return nil, 0, fmt.Errorf("zonemq client: INVOKE_BROKER_TO_RESET_OFFSET answer from %s: %w", addr, err)
	}
	notified, _ := strconv.Atoi(resp.Ext["zonemqConsumersNotified"])
	return body.OffsetTable, notified, nil
}
