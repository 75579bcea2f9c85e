package e2e

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"
)

// sendLog collects what a `zonemq send --output json` process printed:
// acknowledged keys and failed ones. Safe for concurrent use.
type sendLog struct {
	mu     sync.Mutex
	acked  []string
	failed int
	bad    []string // lines that were not JSON
}

func (l *sendLog) line(s string) {
	m, err := decodeLine(s)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		l.bad = append(l.bad, s)
	case m["error"] != nil:
		l.failed++
	default:
		if key, ok := m["key"].(string); ok {
			l.acked = append(l.acked, key)
		} else {
			l.bad = append(l.bad, s)
		}
	}
}

func (l *sendLog) counts() (acked, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked), l.failed
}

// waitFor polls cond every 10 ms until it holds or d passes; it reports
// whether it held. For bounded waits that are not assertions.
func waitFor(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// TestE2EBrokerCrashNoAckLoss SIGKILLs a broker with synchronous flush
// while `zonemq send` keeps sending, restarts it on the same data, and
// reads everything back: every key the sender saw acknowledged must be
// there (docs/architecture.md §3: no acknowledged message is lost).
func TestE2EBrokerCrashNoAckLoss(t *testing.T) {
	ns := startNamesrv(t, 1)
	br := startBroker(t, 1, "broker-crash", t.TempDir(), []string{"--namesrv", ns.addr}, "--flush", "sync")
	const topic = "E2ECrashTopic"
	createTopic(t, topic, 1, "--namesrv", ns.addr)

	sends := &sendLog{}
	sender := startProcWith(t, "send", procOptions{onLine: sends.line},
		"send", "--namesrv", ns.addr, "--idc", "idc1", "--topic", topic,
		"--output", "json", "--count", "0", "--interval", "1ms", "--log-level", "error")

	// Mid-load: after 300 acknowledgements, or 5 s, whichever first.
	waitFor(5*time.Second, func() bool { n, _ := sends.counts(); return n >= 300 })
	before, _ := sends.counts()
	if before == 0 {
		t.Fatalf("no send acknowledged within 5 s; sender stderr:\n%s", tail(sender.stderr.String(), 20))
	}
	br.kill()
	atKill, _ := sends.counts()
	br.restart(t)

	// The sender goes on against the restarted broker; a few more
	// acknowledgements show it did (bounded: the sender's recovery time is
	// not what this test is about).
	waitFor(20*time.Second, func() bool { n, _ := sends.counts(); return n >= atKill+100 })
	sender.signal(syscall.SIGTERM)
	if _, ok := sender.exitCode(stopTimeout); !ok {
		t.Fatalf("send did not stop within %v of SIGTERM", stopTimeout)
	}
	sends.mu.Lock()
	acked, failed, bad := append([]string(nil), sends.acked...), sends.failed, sends.bad
	sends.mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("send printed %d lines that are not JSON send results, e.g. %q", len(bad), bad[0])
	}
	t.Logf("acknowledged %d messages (%d before the kill, %d after the restart), %d sends failed",
		len(acked), atKill, len(acked)-atKill, failed)

	got := newKeySet()
	consumer := startProcWith(t, "consume", procOptions{onLine: func(s string) {
		if m, err := decodeLine(s); err == nil {
			if key, ok := m["key"].(string); ok {
				got.add(key)
			}
		}
	}},
		"consume", "--namesrv", ns.addr, "--idc", "idc1", "--topic", topic, "--group", "e2e_crash_"+runToken,
		"--from", "first", "--output", "json", "--duration", "90s", "--log-level", "error")
	eventually(t, 60*time.Second, func() error {
		if n, some := got.missing(acked); n > 0 {
			if consumer.exited() {
				t.Fatalf("consume exited; %d acknowledged messages never read, e.g. %v", n, some)
			}
			return fmt.Errorf("%d of %d acknowledged messages not read back yet, e.g. %v", n, len(acked), some)
		}
		return nil
	})
	consumer.stopWith(syscall.SIGTERM)
}
