#!/usr/bin/env bash
# Builds zonemq (from the main module) and nats-server (this module's tool
# dependency), then runs them side by side: see README.md. Extra arguments go
# to `compare run` (e.g. --rounds 5 --duration 10s).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
(cd "$here/.." && go build -o "$out/zonemq" ./cmd/zonemq)
(cd "$here" && go build -o "$out/nats-server" github.com/nats-io/nats-server/v2 && go build -o "$out/compare" ./compare)
"$out/compare" run --zonemq "$out/zonemq" --nats-server "$out/nats-server" "$@"
