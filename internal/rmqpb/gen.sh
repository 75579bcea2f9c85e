#!/usr/bin/env bash
# Regenerates package rmqpb from the .proto files under proto/, copied
# unchanged from github.com/apache/rocketmq-apis (the commit is in doc.go).
# Needs protoc (Debian: protobuf-compiler) and, on PATH, protoc-gen-go
# v1.36.12 and protoc-gen-go-grpc v1.5.1:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
set -euo pipefail
cd "$(dirname "$0")"
pkg=github.com/zonemq/zonemq/internal/rmqpb
m=()
for f in definition service; do
	m+=("--go_opt=Mapache/rocketmq/v2/$f.proto=$pkg" "--go-grpc_opt=Mapache/rocketmq/v2/$f.proto=$pkg")
done
protoc -I proto \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	"${m[@]}" \
	proto/apache/rocketmq/v2/definition.proto proto/apache/rocketmq/v2/service.proto
mv apache/rocketmq/v2/*.go .
rm -r apache
