// Package e2e runs the real zonemq binary as separate processes: the disaster
// drill's scenarios S1–S5 (kill and hang), checked for correctness only —
// never for times, which depend on the machine.
package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binary is the zonemq executable built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "zonemq-e2e-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "zonemq")
	build := exec.Command("go", "build", "-o", binary, "../../cmd/zonemq")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		panic("building zonemq: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
