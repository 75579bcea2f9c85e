package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
)

// zonemq's liveness bodies: client heartbeats to name servers
// (ClientHeartbeatToNamesrv = 9001, GetClientsByIDC = 9002) and the broker
// liveness a name server adds to its cluster info. See docs/namesrv.md.

// Client roles a ClientHeartbeat may carry.
const (
	ClientRoleProducer = "producer"
	ClientRoleConsumer = "consumer"
	// ClientRoleBoth is a process that both sends and consumes.
	ClientRoleBoth = ClientRoleProducer + "," + ClientRoleConsumer
)

// Limits on a ClientHeartbeat (also documented in docs/namesrv.md).
const (
	// MaxClientIDLength bounds a heartbeat's clientId and idc.
	MaxClientIDLength = 255
	// MaxClientGroups bounds the groups one heartbeat may list.
	MaxClientGroups = 256
)

// ExtClientIDC is GetClientsByIDC's optional ext field: list only the
// clients of this IDC (compared case-insensitively).
const ExtClientIDC = "idc"

// ClientHeartbeat is the body of ClientHeartbeatToNamesrv (9001): a producer
// or consumer process telling a name server it is alive. The name server
// answers SUCCESS, or INVALID_PARAMETER when Validate fails.
type ClientHeartbeat struct {
	// ClientID identifies the client process (RocketMQ's ip@instance); it
	// is the registry key, so a later heartbeat replaces an earlier one.
	ClientID string `json:"clientId"`
	// IDC is the client's own IDC.
	IDC string `json:"idc"`
	// Role is "producer", "consumer" or "producer,consumer".
	Role string `json:"role"`
	// Groups are the client's producer and consumer groups.
	Groups []string `json:"groups"`
}

// Validate reports the first problem that makes a name server reject h.
func (h *ClientHeartbeat) Validate() error {
	switch {
	case h.ClientID == "":
		return fmt.Errorf("clientId is empty")
	case len(h.ClientID) > MaxClientIDLength:
		return fmt.Errorf("clientId is %d bytes long; the limit is %d", len(h.ClientID), MaxClientIDLength)
	case len(h.IDC) > MaxClientIDLength:
		return fmt.Errorf("idc is %d bytes long; the limit is %d", len(h.IDC), MaxClientIDLength)
	case len(h.Groups) > MaxClientGroups:
		return fmt.Errorf("%d groups listed; the limit is %d", len(h.Groups), MaxClientGroups)
	}
	switch h.Role {
	case ClientRoleProducer, ClientRoleConsumer, ClientRoleBoth, ClientRoleConsumer + "," + ClientRoleProducer:
	default:
		return fmt.Errorf("role %q is not one of %q, %q, %q", h.Role, ClientRoleProducer, ClientRoleConsumer, ClientRoleBoth)
	}
	for _, g := range h.Groups {
		if g == "" || len(g) > MaxGroupLength {
			return fmt.Errorf("group %q is empty or longer than %d bytes", g, MaxGroupLength)
		}
	}
	return nil
}

// HasRole reports whether the heartbeat's Role includes role.
func (h *ClientHeartbeat) HasRole(role string) bool {
	for _, r := range strings.Split(h.Role, ",") {
		if r == role {
			return true
		}
	}
	return false
}

// Encode returns h as JSON, the 9001 request body.
func (h *ClientHeartbeat) Encode() []byte {
	c := *h
	if c.Groups == nil {
		c.Groups = []string{}
	}
	out, _ := json.Marshal(&c)
	return out
}

// DecodeClientHeartbeat parses a 9001 body (it does not Validate it).
func DecodeClientHeartbeat(b []byte) (*ClientHeartbeat, error) {
	var h ClientHeartbeat
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("protocol: client heartbeat body: %w", err)
	}
	return &h, nil
}

// ClientInfo is one live client as a name server knows it.
type ClientInfo struct {
	ClientHeartbeat
	// Addr is the remote address the last heartbeat came from.
	Addr string `json:"addr"`
	// LastSeen is the time of the last heartbeat, Unix milliseconds.
	LastSeen int64 `json:"lastSeen"`
}

// ClientList is the body of GetClientsByIDC's reply (9002): the live
// clients, sorted by IDC and then client id.
type ClientList struct {
	Clients []ClientInfo `json:"clients"`
}

// Encode returns l as JSON with Clients always an array.
func (l *ClientList) Encode() []byte {
	c := ClientList{Clients: l.Clients}
	if c.Clients == nil {
		c.Clients = []ClientInfo{}
	}
	for i := range c.Clients {
		if c.Clients[i].Groups == nil {
			c.Clients[i].Groups = []string{}
		}
	}
	out, _ := json.Marshal(&c)
	return out
}

// DecodeClientList parses a 9002 reply body.
func DecodeClientList(b []byte) (*ClientList, error) {
	var l ClientList
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("protocol: client list body: %w", err)
	}
	return &l, nil
}

// BrokerLive is one registered broker address's liveness as a name server
// sees it.
type BrokerLive struct {
	// LastUpdateTimestamp is the last registration or heartbeat, Unix ms.
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
	// HeartbeatTimeoutMillis is the silence after which the broker expires.
	HeartbeatTimeoutMillis int64 `json:"heartbeatTimeoutMillis"`
	// DataVersion is the version of the broker's last topic table.
	DataVersion DataVersion `json:"dataVersion"`
}

// ClusterLiveInfo is the body a zonemq name server sends for
// GET_BROKER_CLUSTER_INFO: RocketMQ's ClusterInfo plus brokerLiveTable
// (broker address → liveness), a key RocketMQ tools ignore.
type ClusterLiveInfo struct {
	ClusterInfo
	BrokerLiveTable map[string]BrokerLive `json:"brokerLiveTable"`
}

// DecodeClusterLiveInfo parses a GET_BROKER_CLUSTER_INFO body, from zonemq
// (with liveness) or from a RocketMQ name server (without; then
// BrokerLiveTable is empty). fastjson's unquoted integer keys are accepted.
func DecodeClusterLiveInfo(b []byte) (*ClusterLiveInfo, error) {
	var c ClusterLiveInfo
	if err := json.Unmarshal(QuoteIntegerKeys(b), &c); err != nil {
		return nil, fmt.Errorf("protocol: cluster info body: %w", err)
	}
	return &c, nil
}
