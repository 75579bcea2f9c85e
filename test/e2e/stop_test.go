package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2EServersStopCleanly stops every server role with SIGINT and with
// SIGTERM: each must exit 0 within 10 s (docs/architecture.md §6). A broker is
// stopped while registered with a live name server, so its unregistering
// is part of the stop, and the name server while connections are open.
// A second broker on a running broker's data directory must refuse to
// start.
func TestE2EServersStopCleanly(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			ns := startNamesrv(t, 1)
			as := startAddrsrv(t, 1, map[int]string{1: ns.addr})
			br := startBroker(t, 1, "broker-stop", t.TempDir(), []string{"--addrsrv", as.url()})
			waitBrokersAlive(t, 1, "--namesrv", ns.addr)
			for _, s := range []*server{br, as, ns} {
				took := s.stopWith(sig)
				t.Logf("%s exited %v after %v", s.name, took.Round(time.Millisecond), sig)
			}
		})
	}
	t.Run("data-dir-lock", testBrokerDataDirLocked)
}

// testBrokerDataDirLocked starts a second broker on a running broker's
// data directory: it must exit non-zero saying the directory is locked,
// and leave the first one serving.
func testBrokerDataDirLocked(t *testing.T) {
	ns := startNamesrv(t, 1)
	data := t.TempDir()
	first := startBroker(t, 1, "broker-lock", data, []string{"--namesrv", ns.addr})

	second := startProc(t, "second broker", "broker", "--listen", freeAddr(t, idcHost(1)), "--idc", "idc1",
		"--name", "broker-lock", "--data", data, "--namesrv", ns.addr)
	code, ok := second.exitCode(stopTimeout)
	if !ok {
		t.Fatalf("a second broker on the same --data still runs after %v", stopTimeout)
	}
	stderr := second.stderr.String()
	if code == 0 {
		t.Errorf("a second broker on the same --data exited 0")
	}
	last := strings.TrimSpace(stderr[strings.LastIndex(strings.TrimRight(stderr, "\n"), "\n")+1:])
	if !strings.Contains(last, "lock") || !strings.Contains(last, data) {
		t.Errorf("the second broker's last stderr line does not say the data directory %s is locked: %q", data, last)
	}
	if first.exited() {
		t.Fatalf("the first broker exited when the second one tried its data directory")
	}
	first.waitTCP(first.addr)
	first.stopWith(syscall.SIGTERM)
}
