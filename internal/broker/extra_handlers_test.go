package broker

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// Helpers shared by the retry, DLQ, delay, lock and transaction tests.

// testDelayLevels is a short delay table for tests: level L waits L×100 ms,
// so a first retry (level 3) waits 300 ms.
func testDelayLevels() []time.Duration {
	out := make([]time.Duration, maxDelayLevel)
	for i := range out {
		out[i] = time.Duration(i+1) * 100 * time.Millisecond
	}
	return out
}

// delayLevelString renders delays as a MessageDelayLevel string
// (milliseconds), for Options.MessageDelayLevel.
func delayLevelString(levels []time.Duration) string {
	parts := make([]string, len(levels))
	for i, d := range levels {
		parts[i] = strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	return strings.Join(parts, " ")
}

// queueMessages pulls every message of a queue from offset 0.
func queueMessages(t *testing.T, c *remoting.Client, addr, topic string, queueID int32) []*protocol.MessageExt {
	t.Helper()
	var out []*protocol.MessageExt
	for off := int64(0); ; {
		resp := pullRaw(t, c, addr, "test_reader", topic, queueID, off, "*", 32)
		if resp.Code != int32(protocol.Success) {
			return out
		}
		ms := decodeAll(t, resp.Body)
		out = append(out, ms...)
		off = ms[len(ms)-1].QueueOffset + 1
	}
}

// waitQueueLen waits until a queue holds n messages and returns them.
func waitQueueLen(t *testing.T, c *remoting.Client, addr, topic string, queueID int32, n int) []*protocol.MessageExt {
	t.Helper()
	var ms []*protocol.MessageExt
	testutil.Eventually(t, 15*time.Second, func() error {
		ms = queueMessages(t, c, addr, topic, queueID)
		if len(ms) != n {
			return fmt.Errorf("%s queue %d holds %d messages, want %d", topic, queueID, len(ms), n)
		}
		return nil
	})
	return ms
}

// prop returns one property of m ("" when absent).
func prop(m *protocol.MessageExt, name string) string {
	v, _ := protocol.Property(m.Properties, name)
	return v
}

func TestBrokerRetryPropertyEdits(t *testing.T) {
	p := protocol.EncodeProperties(map[string]string{"A": "1", "B": "2", "C": "3"})
	testutil.Equal(t, setProperty(p, "B", "x"), "A\x011\x02B\x01x\x02C\x013\x02", "replace keeps order")
	testutil.Equal(t, setProperty(p, "D", "4"), p+"D\x014\x02", "append")
	testutil.Equal(t, setProperty("", "D", "4"), "D\x014\x02", "append to empty")
	testutil.Equal(t, setProperty("A\x011", "B", "2"), "A\x011\x02B\x012\x02", "unterminated last item")
	testutil.Equal(t, setPropertyIfAbsent(p, "A", "9"), p, "present is kept")
	testutil.Equal(t, removeProperties(p, "A", "C"), "B\x012\x02", "remove")
	testutil.Equal(t, removeProperties(p, "Z"), p, "remove absent")
	testutil.Equal(t, removeProperties("A\x011\x02junk\x02", "B"), "A\x011\x02", "items without a separator are dropped")
}

func TestBrokerDelayLevelParse(t *testing.T) {
	d, err := ParseMessageDelayLevel(DefaultMessageDelayLevel)
	testutil.NoError(t, err, "default table")
	testutil.Equal(t, len(d), 18, "levels")
	testutil.Equal(t, d[0], time.Second, "level 1")
	testutil.Equal(t, d[4], time.Minute, "level 5")
	testutil.Equal(t, d[17], 2*time.Hour, "level 18")
	d, err = ParseMessageDelayLevel("2d 10s")
	testutil.NoError(t, err, "days")
	testutil.Equal(t, d[0], 48*time.Hour, "2d")
	for _, bad := range []string{"", "1x", "s", "0s", "-1s", "1s 2s 3s 4s 5s 6s 7s 8s 9s 10s 11s 12s 13s 14s 15s 16s 17s 18s 19s"} {
		if _, err := ParseMessageDelayLevel(bad); err == nil {
			t.Errorf("ParseMessageDelayLevel(%q) accepted", bad)
		}
	}
}
