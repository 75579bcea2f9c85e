package main

import (
	"os"
	"runtime/debug"
)

// defaultGCPercent is the garbage collector's target the binary sets when
// GOGC is not in the environment. A broker's live heap is small (tens of
// MB) while it allocates per message, so Go's default of 100 collects
// 30–60 times a second under load; 400 cut the CPU per message by about
// 15 % in BenchmarkBrokerSendInflight64 (docs/benchmarks.md, "GC target"),
// and 800 gained nothing more.
const defaultGCPercent = 400

// setGCTarget applies defaultGCPercent unless the operator chose with GOGC.
// GOMEMLIMIT, when set, is applied by the runtime itself and keeps a large
// heap in check whatever GOGC says.
func setGCTarget() {
	if _, ok := os.LookupEnv("GOGC"); ok {
		return
	}
	debug.SetGCPercent(defaultGCPercent)
}
