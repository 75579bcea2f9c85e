package store

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

const crashDirEnv = "ZONEMQ_STORE_CRASH_DIR"

func crashOptions(dir string) Options {
	o := NewOptions()
	o.Dir = dir
	o.Flush = FlushSync
	o.SegmentSize = 64 << 10
	o.ConsumeQueueEntries = 64
	o.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	return o
}

// TestStoreCrashChild is the process TestStoreCrashRecovery kills: it does
// sync puts of keyed messages from several goroutines and prints "ACK key"
// for each acknowledged one.
func TestStoreCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process of TestStoreCrashRecovery")
	}
	s, err := Open(crashOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	for w := 0; w < 4; w++ {
		go func(w int) {
			for i := w; ; i += 4 {
				key := keyOf(i)
				m := newMsg("Crash", int32(i%4), "crash-"+key+strings.Repeat(".", i%100), map[string]string{"KEYS": key})
				res, err := s.PutMessage(context.Background(), m)
				if err != nil || res.Status != PutOK {
					continue
				}
				mu.Lock()
				os.Stdout.WriteString("ACK " + key + "\n")
				mu.Unlock()
			}
		}(w)
	}
	time.Sleep(30 * time.Second) // the parent kills us long before
	os.Exit(3)
}

// A real crash: SIGKILL a process in the middle of sync puts, reopen its data
// directory, and find every acknowledged message.
func TestStoreCrashRecovery(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStoreCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	testutil.NoError(t, err)
	testutil.NoError(t, cmd.Start())
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})

	acked := map[string]bool{}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	const maxAcks = 3000
	deadline := time.After(2 * time.Second)
	start := time.Now()
load:
	for len(acked) < maxAcks {
		select {
		case line, ok := <-lines:
			if !ok {
				break load
			}
			if key, ok := strings.CutPrefix(line, "ACK "); ok {
				acked[key] = true
			}
		case <-deadline:
			break load
		}
	}
	testutil.NoError(t, cmd.Process.Kill(), "SIGKILL")
	killed = true
	cmd.Wait()
	// Acks printed before the kill count too.
	for line := range lines {
		if key, ok := strings.CutPrefix(line, "ACK "); ok {
			acked[key] = true
		}
	}
	t.Logf("killed the child after %v and %d acknowledged puts", time.Since(start).Round(time.Millisecond), len(acked))
	if len(acked) < 50 {
		t.Fatalf("the child acknowledged only %d puts; stderr:\n%s", len(acked), stderr.String())
	}

	o := crashOptions(dir)
	lb, logger := newLogBuffer(t)
	o.Logger = logger
	s := openStore(t, o)
	testutil.True(t, containsLog(lb, "did not shut down cleanly"), "unclean shutdown detected")
	stored := map[string]bool{}
	for _, q := range s.Queues("Crash") {
		for i, m := range readAll(t, s, "Crash", q) {
			testutil.Equal(t, m.QueueOffset, int64(i), "dense queue offsets")
			key, _ := protocol.Property(m.Properties, protocol.PropertyKeys)
			testutil.Equal(t, string(m.Body[:len("crash-"+key)]), "crash-"+key)
			stored[key] = true
		}
	}
	var lost []string
	for key := range acked {
		if !stored[key] {
			lost = append(lost, key)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d acknowledged messages lost, e.g. %v", len(lost), lost[:min(5, len(lost))])
	}
	// The key index survived the crash as well.
	n := 0
	for key := range acked {
		if n++; n > 20 {
			break
		}
		found, err := s.QueryByKey("Crash", key, 4, 0, 0)
		testutil.NoError(t, err)
		testutil.Equal(t, len(found), 1, fmt.Sprintf("QueryByKey(%s)", key))
	}
	// And the store takes new messages where the log ended.
	end := s.CommitLogMaxOffset()
	max0 := s.MaxOffset("Crash", 0)
	res := mustPut(t, s, newMsg("Crash", 0, "after the crash", nil))
	testutil.Equal(t, res.QueueOffset, max0)
	testutil.True(t, res.CommitLogOffset >= end, "appended after the recovered log")
}
