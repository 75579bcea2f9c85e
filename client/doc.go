// Package client is zonemq's Go SDK: a Producer, a PushConsumer and a
// PullConsumer that speak RocketMQ's remoting protocol and know about IDCs
// (data centres), and Conn, the connection core that tools such as the
// admin API (package client/admin) are built on.
//
// Every client is configured with its own IDC and with the address servers
// (or name servers) to ask. It keeps its traffic inside its own IDC while
// that IDC is healthy, and moves it to another IDC at once, inside the call
// that noticed the failure, when it is not:
//
//   - Name servers: the client asks the address server for every IDC's name
//     servers and uses one of its own IDC; when that one fails, the next
//     one, without waiting for a timer. It sends a small heartbeat to every
//     name server every second, so the connection it fails over to is
//     already open.
//   - Producers send to the writable queues of their own IDC's brokers and,
//     when an attempt fails or times out, retry at once on another broker
//     (own IDC first, then other IDCs) inside the same SendSync call.
//   - Push consumers read their own IDC's brokers. Queues are allocated per
//     broker over that broker's view of the group (docs/architecture.md §2 flow
//     5), so when an IDC's consumers vanish another IDC's consumers take over
//     its brokers' queues, and give them back when it returns.
//
// A client is created with a constructor that validates its config
// (NewProducer, NewPushConsumer, NewPullConsumer, NewConn), started with
// Start and stopped with Shutdown. All exported methods are safe for
// concurrent use unless their documentation says otherwise. Every call that
// does I/O takes a context.Context first; its deadline and cancellation are
// honoured.
//
// The package imports no zonemq server code; it works against stock RocketMQ
// name servers and brokers too (without the IDC-specific parts: stock name
// servers do not report a broker's IDC and ignore the client heartbeat).
//
// See docs/client.md for the design, the default timings and why they were
// chosen.
package client
