package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
)

// waitInSync waits until the master at addr counts n in-sync replicas.
func waitInSync(t *testing.T, adm *admin.Client, addr string, n int) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		info, err := adm.BrokerRuntime(ctx, addr)
		if err != nil {
			return err
		}
		if info["inSyncReplicas"] != strconv.Itoa(n) || info["brokerRole"] != "SYNC_MASTER" {
			return fmt.Errorf("broker %s: role %s, %s in-sync replicas (%s)", addr, info["brokerRole"], info["inSyncReplicas"], info["replicas"])
		}
		return nil
	})
}

// TestE2ESyncReplicaHoldsEveryAckAfterMasterKill: a broker group with its
// master in idc1 and a synchronous replica in idc2, real processes. The
// master is SIGKILLed at a random point under load, twice (restarted on
// its data in between); every key `zonemq send` saw acknowledged is read
// back from the replica while the master is down.
func TestE2ESyncReplicaHoldsEveryAckAfterMasterKill(t *testing.T) {
	ns := startNamesrv(t, 1)
	cluster := []string{"--namesrv", ns.addr}
	master := startBroker(t, 1, "broker-rep", t.TempDir(), cluster, "--flush", "sync", "--replication", "sync",
		"--heartbeat-interval", "200ms")
	replica := startBroker(t, 2, "broker-rep", t.TempDir(), cluster, "--id", "1", "--flush", "sync", "--replication", "sync",
		"--heartbeat-interval", "200ms")
	const topic = "E2EReplTopic"
	createTopic(t, topic, 1, "--namesrv", ns.addr)
	adm, err := admin.New(admin.Config{ClientConfig: client.ClientConfig{NamesrvAddrs: []string{ns.addr}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer adm.Shutdown(context.Background())

	var acked []string
	for round := 1; round <= 2; round++ {
		waitInSync(t, adm, master.addr, 1)
		sends := &sendLog{}
		sender := startProcWith(t, "send", procOptions{onLine: sends.line},
			"send", "--namesrv", ns.addr, "--idc", "idc1", "--topic", topic, "--key-prefix", fmt.Sprintf("R%d", round),
			"--output", "json", "--count", "0", "--interval", "1ms", "--log-level", "error")
		killAt := 150 + rand.IntN(500)
		if !waitFor(20*time.Second, func() bool { n, _ := sends.counts(); return n >= killAt }) {
			t.Fatalf("round %d: fewer than %d sends acknowledged in 20 s; sender stderr:\n%s", round, killAt, tail(sender.stderr.String(), 20))
		}
		master.kill()
		sender.signal(syscall.SIGTERM)
		if _, ok := sender.exitCode(stopTimeout); !ok {
			t.Fatalf("send did not stop within %v of SIGTERM", stopTimeout)
		}
		sends.mu.Lock()
		acked = append(acked, sends.acked...)
		sends.mu.Unlock()
		t.Logf("round %d: master killed after %d acknowledgements (%d in all)", round, killAt, len(acked))

		// Every acknowledged key is on the replica: read it there, with
		// the master still down.
		got := newKeySet()
		consumer := startProcWith(t, "consume", procOptions{onLine: func(s string) {
			if m, err := decodeLine(s); err == nil {
				if key, ok := m["key"].(string); ok {
					got.add(key)
				}
			}
		}},
			"consume", "--namesrv", ns.addr, "--idc", "idc2", "--topic", topic, "--group", fmt.Sprintf("e2e_repl_%s_%d", runToken, round),
			"--from", "first", "--output", "json", "--duration", "60s", "--log-level", "error")
		eventually(t, 45*time.Second, func() error {
			if n, some := got.missing(acked); n > 0 {
				if consumer.exited() {
					t.Fatalf("consume exited; %d acknowledged messages never read from the replica, e.g. %v", n, some)
				}
				return fmt.Errorf("%d of %d acknowledged messages not read from the replica yet, e.g. %v", n, len(acked), some)
			}
			return nil
		})
		consumer.stopWith(syscall.SIGTERM)
		master.restart(t)
	}
	_ = replica
}
