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

// binary is the zonemq executable built once for the package's tests;
// rmqpeer and v5peer are test/rmqpeer and test/v5peer, the chaos campaign's
// workloads of the stock remoting client and the RocketMQ 5 client.
var binary, rmqpeer, v5peer string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "zonemq-e2e-")
	if err != nil {
		panic(err)
	}
	binary, rmqpeer, v5peer = filepath.Join(dir, "zonemq"), filepath.Join(dir, "rmqpeer"), filepath.Join(dir, "v5peer")
	for out, pkg := range map[string]string{binary: "../../cmd/zonemq", rmqpeer: "../rmqpeer", v5peer: "../v5peer"} {
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			os.RemoveAll(dir)
			panic("building " + pkg + ": " + err.Error())
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
