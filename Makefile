# Shortcuts; .ci/run is what CI runs.

.PHONY: ci test vet fmt-check fuzz bench golden

ci:
	.ci/run

test:
	go test -race -count=1 -timeout 20m ./...

vet:
	go vet ./...

fmt-check:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; exit 1; }

# One minute per wire-codec fuzz target.
fuzz:
	go test -run '^$$' -fuzz='^FuzzDecodeFrame$$' -fuzztime=60s ./internal/remoting/
	go test -run '^$$' -fuzz='^FuzzDecodeJSONHeader$$' -fuzztime=60s ./internal/remoting/
	go test -run '^$$' -fuzz='^FuzzDecodeBinaryHeader$$' -fuzztime=60s ./internal/remoting/

bench:
	go test -run '^$$' -bench . -benchmem ./internal/remoting/ ./internal/protocol/

# Re-record internal/remoting/testdata/golden from rocketmq-client-go.
golden:
	ZONEMQ_CAPTURE_GOLDEN=1 go test -count=1 -run TestRemotingCaptureGolden ./internal/remoting/
