// Package rmqpb is the Go code generated from RocketMQ 5's gRPC API,
// package apache.rocketmq.v2 (service MessagingService), which the access
// point (internal/proxy) serves to the RocketMQ 5 clients.
//
// The .proto files under proto/ are unchanged copies of
// apache/rocketmq/v2/definition.proto and service.proto from
// github.com/apache/rocketmq-apis at commit
// 3e60073c6dab3430feaec443824802e23ecda681 (2026-07-30); admin.proto (the
// proxy's operator service) is not served and not copied. Fields are only
// ever added to these files, so clients built against older copies work.
//
// Regenerate with ./gen.sh (protoc 3.21, protoc-gen-go v1.36.12,
// protoc-gen-go-grpc v1.5.1). The official Go client registers the same
// protobuf names, so a program may link this package or that client, not
// both: tests run the client as a separate process (test/v5peer).
package rmqpb
