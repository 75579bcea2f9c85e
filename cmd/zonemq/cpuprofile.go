package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
)

// startCPUProfile profiles the whole process into the file named by
// ZONEMQ_CPUPROFILE, when set, until the returned stop runs (at the end of
// the command: a server's clean stop). It is how a server's own CPU is
// profiled under a real load from another process (docs/benchmarks.md);
// `zonemq bench` has its own --cpuprofile for the client side.
func startCPUProfile(stderr io.Writer) (stop func()) {
	path := os.Getenv("ZONEMQ_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(stderr, "zonemq: ZONEMQ_CPUPROFILE: %v\n", err)
		if f != nil {
			f.Close()
		}
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
