package broker

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

func TestTimerDeliveredSet(t *testing.T) {
	var d deliveredSet
	d.base = 10
	testutil.True(t, d.contains(9), "below base counts as delivered")
	testutil.True(t, !d.contains(10), "nothing marked yet")
	for off := int64(10); off < 10+64*3; off++ {
		if off != 100 {
			d.mark(off)
		}
	}
	testutil.True(t, !d.contains(100), "the gap is not delivered")
	testutil.Equal(t, d.base, int64(74), "base moves past the first full word only")
	d.mark(100)
	testutil.Equal(t, d.base, int64(10+64*3), "base moves past every full word")
	testutil.Equal(t, len(d.words), 0, "no words left")

	d.mark(500)
	d.mark(202)
	cp := newTimerCheckpoint(&d)
	back := cp.set()
	for _, off := range []int64{0, 201, 202, 203, 499, 500, 501} {
		testutil.Equal(t, back.contains(off), d.contains(off), fmt.Sprintf("offset %d after a round trip", off))
	}
	testutil.Equal(t, back.delivered(), 2, "marked offsets above base")
}

// timerMessages pulls the whole of queue 0 of topic.
func pullAll(t *testing.T, c *remoting.Client, addr, topic string) []*protocol.MessageExt {
	t.Helper()
	var out []*protocol.MessageExt
	for off := int64(0); ; {
		resp := pullRaw(t, c, addr, "timer_check_cg", topic, 0, off, "*", 256)
		if protocol.ResponseCode(resp.Code) != protocol.Success {
			return out
		}
		ms := decodeAll(t, resp.Body)
		out = append(out, ms...)
		off = ms[len(ms)-1].QueueOffset + 1
	}
}

// checkTimers checks that every key of due arrived in msgs, none before
// its due time, and returns the lateness of each and the number of
// repeated deliveries.
func checkTimers(t *testing.T, msgs []*protocol.MessageExt, due map[string]int64) (lateness []time.Duration, repeats int) {
	t.Helper()
	seen := map[string]bool{}
	for _, m := range msgs {
		key, _ := protocol.Property(m.Properties, protocol.PropertyKeys)
		want, ok := due[key]
		if !ok {
			continue
		}
		out, _ := protocol.Property(m.Properties, protocol.PropertyTimerOutMS)
		testutil.Equal(t, out, strconv.FormatInt(want, 10), "TIMER_OUT_MS of "+key)
		if m.StoreTimestamp < want {
			t.Fatalf("%s delivered %d ms early", key, want-m.StoreTimestamp)
		}
		if seen[key] {
			repeats++
			continue
		}
		seen[key] = true
		lateness = append(lateness, time.Duration(m.StoreTimestamp-want)*time.Millisecond)
	}
	for key := range due {
		if !seen[key] {
			t.Fatalf("timer %s was not delivered (%d of %d were)", key, len(seen), len(due))
		}
	}
	return lateness, repeats
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func TestBrokerTimerMessages(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-timer")
	opts.TimerMaxDelay = time.Hour
	s := startBroker(t, opts)
	raw := newRawClient(t)
	const topic = "TimerTopic"
	createTopic(t, raw, s.Addr(), topic, 1)

	due := map[string]int64{}
	for i := range 60 {
		key := fmt.Sprintf("t-%d", i)
		props := map[string]string{protocol.PropertyKeys: key}
		now := time.Now().UnixMilli()
		switch i % 3 {
		case 0:
			props[protocol.PropertyTimerDeliverMS] = strconv.FormatInt(now+int64(200+10*i), 10)
		case 1:
			props[protocol.PropertyTimerDelayMS] = strconv.Itoa(300 + 10*i)
		case 2:
			props[protocol.PropertyTimerDelaySec] = "1"
		}
		resp := sendRaw(t, raw, s.Addr(), topic, 0, props, []byte(key))
		expectCode(t, resp, protocol.Success, "timer send")
		// The broker settles the due time on receipt; read it back from
		// the held record below rather than guessing it here.
		due[key] = 0
	}
	testutil.Equal(t, s.extra.timers.pendingCount() > 0, true, "timers are held")
	resp := sendRaw(t, raw, s.Addr(), topic, 0, map[string]string{protocol.PropertyKeys: "past",
		protocol.PropertyTimerDeliverMS: strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)}, []byte("past"))
	expectCode(t, resp, protocol.Success, "a timer already due")

	for _, bad := range []map[string]string{
		{protocol.PropertyTimerDelaySec: "7200"},
		{protocol.PropertyTimerDelayMS: strconv.Itoa(int(2 * time.Hour / time.Millisecond))},
		{protocol.PropertyTimerDeliverMS: strconv.FormatInt(time.Now().Add(2*time.Hour).UnixMilli(), 10)},
		{protocol.PropertyTimerDelaySec: "soon"},
		{protocol.PropertyTimerDelayMS: "-5"},
		{protocol.PropertyTimerDeliverMS: "9223372036854775807"},
	} {
		resp := sendRaw(t, raw, s.Addr(), topic, 0, bad, []byte("x"))
		expectCode(t, resp, protocol.MessageIllegal, fmt.Sprintf("timer %v", bad))
	}

	for _, m := range pullAll(t, raw, s.Addr(), protocol.TimerTopic) {
		key, _ := protocol.Property(m.Properties, protocol.PropertyKeys)
		out, _ := protocol.Property(m.Properties, protocol.PropertyTimerOutMS)
		due[key], _ = strconv.ParseInt(out, 10, 64)
	}
	var msgs []*protocol.MessageExt
	testutil.Eventually(t, 20*time.Second, func() error {
		msgs = pullAll(t, raw, s.Addr(), topic)
		if len(msgs) < len(due)+1 {
			return fmt.Errorf("%d of %d delivered", len(msgs), len(due)+1)
		}
		return nil
	})
	testutil.Equal(t, s.extra.timers.pendingCount(), 0, "no timer left")
	lateness, repeats := checkTimers(t, msgs, due)
	testutil.Equal(t, repeats, 0, "repeated deliveries")
	t.Logf("lateness of %d timers: p50 %v, p99 %v, max %v", len(lateness), percentile(lateness, 0.5), percentile(lateness, 0.99), percentile(lateness, 1))
}

// The kill -9 test runs the broker in a child process: this test binary
// re-run with timerChildEnv set to the data directory.
const timerChildEnv = "ZONEMQ_TIMER_CHILD_DATA"

// TestBrokerTimerChild is the child: it serves a broker on 127.0.1.1:0,
// prints its address and runs until killed. Without timerChildEnv it does
// nothing.
func TestBrokerTimerChild(t *testing.T) {
	dir := os.Getenv(timerChildEnv)
	if dir == "" {
		t.Skip("only run as the child of TestBrokerTimerSurvivesKill")
	}
	opts := NewOptions()
	opts.Listen, opts.IDC, opts.BrokerName, opts.DataDir = "127.0.1.1:0", "idc1", "broker-timer-kill", dir
	opts.SegmentSize = 16 << 20
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Run(t.Context())
	fmt.Printf("child broker listening on %s\n", s.Addr())
	select {} // until killed
}

// startTimerChild starts the child broker on dir and returns it with its
// address; the child is killed when the test ends.
func startTimerChild(t *testing.T, dir string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBrokerTimerChild$", "-test.v")
	cmd.Env = append(os.Environ(), timerChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	testutil.NoError(t, err, "child stdout")
	testutil.NoError(t, cmd.Start(), "starting the child broker")
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "child broker listening on "); ok {
				addr <- a
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("the child broker exited before serving")
		}
		return cmd, a
	case <-time.After(30 * time.Second):
		t.Fatal("the child broker did not start within 30 s")
	}
	return nil, ""
}

// TestBrokerTimerSurvivesKill holds timers in a broker process, kills it
// with SIGKILL while some are delivered and some are not, restarts it on
// the same data and checks that every timer is delivered, none early.
func TestBrokerTimerSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	dir := filepath.Join(t.TempDir(), "data")
	child, addr := startTimerChild(t, dir)
	raw := newRawClient(t)
	const topic = "TimerKillTopic"
	createTopic(t, raw, addr, topic, 1)

	const n = 400
	start := time.Now().UnixMilli()
	for i := range n {
		key := fmt.Sprintf("k-%d", i)
		props := map[string]string{protocol.PropertyKeys: key}
		// Due times spread over 2–6 s after the first send, in shuffled order.
		props[protocol.PropertyTimerDeliverMS] = strconv.FormatInt(start+2000+int64((i*7919)%n)*10, 10)
		expectCode(t, sendRaw(t, raw, addr, topic, 0, props, []byte(key)), protocol.Success, "timer send")
	}
	due := map[string]int64{}
	for _, m := range pullAll(t, raw, addr, protocol.TimerTopic) {
		key, _ := protocol.Property(m.Properties, protocol.PropertyKeys)
		out, _ := protocol.Property(m.Properties, protocol.PropertyTimerOutMS)
		due[key], _ = strconv.ParseInt(out, 10, 64)
	}
	testutil.Equal(t, len(due), n, "held timer records")

	// Kill once a part has been delivered.
	testutil.Eventually(t, 20*time.Second, func() error {
		if got := len(pullAll(t, raw, addr, topic)); got < n/4 {
			return fmt.Errorf("%d delivered", got)
		}
		return nil
	})
	before := len(pullAll(t, raw, addr, topic))
	testutil.NoError(t, child.Process.Kill(), "kill -9")
	child.Wait()
	t.Logf("killed the broker with %d of %d timers delivered", before, n)

	_, addr = startTimerChild(t, dir)
	var msgs []*protocol.MessageExt
	testutil.Eventually(t, 30*time.Second, func() error {
		msgs = pullAll(t, raw, addr, topic)
		seen := map[string]bool{}
		for _, m := range msgs {
			key, _ := protocol.Property(m.Properties, protocol.PropertyKeys)
			seen[key] = true
		}
		if len(seen) < n {
			return fmt.Errorf("%d of %d timers delivered", len(seen), n)
		}
		return nil
	})
	lateness, repeats := checkTimers(t, msgs, due)
	t.Logf("after kill -9: %d timers delivered, %d repeated; lateness p50 %v, p99 %v, max %v (includes the restart)",
		len(lateness), repeats, percentile(lateness, 0.5), percentile(lateness, 0.99), percentile(lateness, 1))
}
