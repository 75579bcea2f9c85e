package main

import (
	"os"
	"testing"
)

// asZonemqEnv makes the test binary behave as the zonemq binary, so tests
// can start real server processes from it (see startExampleProc).
const asZonemqEnv = "ZONEMQ_TEST_RUN_AS_ZONEMQ"

func TestMain(m *testing.M) {
	if os.Getenv(asZonemqEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
