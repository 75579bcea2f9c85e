// Package namesrv is zonemq's name server: the route registry brokers
// register with and clients query, wire-compatible with RocketMQ's
// (REGISTER_BROKER, GET_ROUTEINFO_BY_TOPIC, the KV config, …), plus zonemq's
// IDC awareness: every broker's IDC is its BrokerData.zoneName, zone-mode
// route queries fall back to the full route when their IDC has no writable
// broker, and a client registry records which producers and consumers are
// alive in which IDC.
//
// Liveness: a broker leaves the routes when the connection it registered on
// closes, when it unregisters, or when it has sent no registration or
// heartbeat for its expiry (Options.BrokerExpiry, or the broker's
// heartbeatTimeoutMillis), checked every Options.ScanInterval.
//
// Locks. Three independent mutexes, never held together, so there is no
// lock order to keep:
//   - routeTable.mu (RWMutex) guards every route table (topicQueueTable,
//     brokerAddrTable, clusterAddrTable, brokerLiveTable, filterServerTable)
//     and the connection → broker-address index. Readers (route queries)
//     share it; registration, expiry and connection close take it
//     exclusively. Nothing blocking happens under it.
//   - kvStore.mu guards the KV table and is held across the file write, so
//     writes reach disk in the order they were applied.
//   - clientRegistry.mu guards the client registry and its connection index.
//
// See docs/namesrv.md for the wire contract and the differences from
// RocketMQ's name server.
package namesrv
