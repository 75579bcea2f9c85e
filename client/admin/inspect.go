package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/zonemq/zonemq/internal/idc"
	"github.com/zonemq/zonemq/internal/protocol"
)

// ConsumerConnection is one member of a consumer group as a broker sees it.
type ConsumerConnection struct {
	ClientID string
	// IDC is the IDC the client id carries ("" for stock clients).
	IDC      string
	Addr     string
	Language string
	Version  int32
}

// GroupConnections is a consumer group's members and subscriptions on one
// broker (GET_CONSUMER_CONNECTION_LIST, `mqadmin consumerConnection`).
type GroupConnections struct {
	BrokerAddr   string
	Members      []ConsumerConnection
	Topics       map[string]string // topic → subscription expression
	ConsumeType  string
	MessageModel string
	ConsumeFrom  string
}

// ConsumerConnections asks the broker at addr who is in group. A group with
// no member there gets a ResponseError (CONSUMER_NOT_ONLINE, 206).
func (a *Client) ConsumerConnections(ctx context.Context, addr, group string) (*GroupConnections, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	h := protocol.ConsumerGroupRequestHeader{ConsumerGroup: group}
	resp, err := a.conn.Call(ctx, addr, req(protocol.GetConsumerConnectionList, h.Ext(), nil))
	if err != nil {
		return nil, err
	}
	var cc protocol.ConsumerConnection
	if err := json.Unmarshal(resp.Body, &cc); err != nil {
		return nil, fmt.Errorf("zonemq client: consumer connections from %s: %w", addr, err)
	}
	out := &GroupConnections{BrokerAddr: addr, Topics: map[string]string{}, ConsumeType: cc.ConsumeType,
		MessageModel: cc.MessageModel, ConsumeFrom: cc.ConsumeFromWhere}
	for topic, sd := range cc.SubscriptionTable {
		out.Topics[topic] = sd.SubString
	}
	for _, c := range cc.ConnectionSet {
		out.Members = append(out.Members, ConsumerConnection{ClientID: c.ClientID, IDC: idc.IDCOfClientID(c.ClientID),
			Addr: c.ClientAddr, Language: c.Language, Version: c.Version})
	}
	sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].ClientID < out.Members[j].ClientID })
	return out, nil
}

// ProducerConnection is one producer of a group as a broker sees it.
type ProducerConnection struct {
	ClientID string
	// IDC is the IDC the client id carries ("" for stock clients).
	IDC      string
	Addr     string
	Language string
	Version  int32
}

// ProducerConnections asks the broker at addr which producers of group are
// connected (GET_PRODUCER_CONNECTION_LIST, `mqadmin producerConnection`). A
// producer is listed once its first heartbeat reached the broker (about a
// second after it first used it). A group with none there gets a
// ResponseError (SYSTEM_ERROR, as Java brokers answer).
func (a *Client) ProducerConnections(ctx context.Context, addr, group string) ([]ProducerConnection, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	h := protocol.ProducerGroupRequestHeader{ProducerGroup: group}
	resp, err := a.conn.Call(ctx, addr, req(protocol.GetProducerConnectionList, h.Ext(), nil))
	if err != nil {
		return nil, err
	}
	var pc protocol.ProducerConnection
	if err := json.Unmarshal(resp.Body, &pc); err != nil {
		return nil, fmt.Errorf("zonemq client: producer connections from %s: %w", addr, err)
	}
	out := make([]ProducerConnection, 0, len(pc.ConnectionSet))
	for _, c := range pc.ConnectionSet {
		out = append(out, ProducerConnection{ClientID: c.ClientID, IDC: idc.IDCOfClientID(c.ClientID),
			Addr: c.ClientAddr, Language: c.Language, Version: c.Version})
	}
	return out, nil
}

// BrokerConfig returns the settings of the broker at addr
// (GET_BROKER_CONFIG, `mqadmin getBrokerConfig`), RocketMQ broker.conf
// names where one exists.
func (a *Client) BrokerConfig(ctx context.Context, addr string) (map[string]string, error) {
	if err := a.conn.Running(); err != nil {
		return nil, err
	}
	resp, err := a.conn.Call(ctx, addr, req(protocol.GetBrokerConfig, nil, nil))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(resp.Body), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			out[k] = v
		}
	}
	return out, nil
}

// UpdateBrokerConfig changes settings of the broker at addr while it runs
// (UPDATE_BROKER_CONFIG, `mqadmin updateBrokerConfig`). zonemq brokers
// accept only the keys that are safe to change live (diskMaxUsedSpaceRatio)
// and refuse the whole request otherwise; the change lasts until restart.
func (a *Client) UpdateBrokerConfig(ctx context.Context, addr string, kv map[string]string) error {
	if err := a.conn.Running(); err != nil {
		return err
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, kv[k])
	}
	return a.do(ctx, addr, req(protocol.UpdateBrokerConfig, nil, []byte(b.String())))
}
