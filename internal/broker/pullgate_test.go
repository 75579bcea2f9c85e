package broker

import (
	"bytes"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestBrokerPipelinedPullsFromANonReaderAreBounded replays issue 22's
// memory attack at a smaller scale: one connection writes 150 pulls of
// 1 MiB messages (each answer up to 8 MiB) in one write and never reads.
// The broker must stop building answers once the unread ones pass its cap,
// so its heap grows by tens of MB, not by the 1.2 GB the pulls would
// fetch; other clients are served meanwhile. (Before: the cap was checked
// only when no whole frame was buffered, and every pull was built.)
func TestBrokerPipelinedPullsFromANonReaderAreBounded(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1:0", "idc1", nil)
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-mem", ns.Addr())
	opts.SegmentSize = 64 << 20
	s := startBroker(t, opts)
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "BigT", 1)
	body := bytes.Repeat([]byte("m"), 1<<20)
	for i := range 40 {
		expectCode(t, sendRaw(t, c, s.Addr(), "BigT", 0, nil, body), protocol.Success, "send "+string(rune('0'+i%10)))
	}

	var frames []byte
	for i := range 150 {
		h := protocol.PullMessageRequestHeader{ConsumerGroup: "hog", Topic: "BigT", QueueID: 0, QueueOffset: int64(i % 8),
			MaxMsgNums: 32, SysFlag: protocol.PullFlagSubscription, Subscription: "*", ExpressionType: protocol.ExpressionTypeTag}
		req := remoting.NewRequest(int32(protocol.PullMessage), h.Ext(), nil)
		req.Opaque = int32(i + 1)
		frames = append(frames, remoting.EncodeFrame(req)...)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse

	hog, err := net.Dial("tcp", s.Addr())
	testutil.NoError(t, err)
	defer hog.Close()
	if tc, ok := hog.(*net.TCPConn); ok {
		tc.SetReadBuffer(4 << 10) // a reader that takes next to nothing
	}
	_, err = hog.Write(frames)
	testutil.NoError(t, err)

	// Watch the heap for a while (a bounded number of looks): the pulls
	// the broker would build arrive in well under a second.
	var peak uint64
	deadline := time.Now().Add(3 * time.Second)
	for look := 0; look < 300 && time.Now().Before(deadline); look++ {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		if look%20 == 0 {
			// Another client is served all along.
			expectCode(t, pullRaw(t, c, s.Addr(), "other", "BigT", 0, 0, "*", 1), protocol.Success, "another client's pull")
		}
		time.Sleep(10 * time.Millisecond)
	}
	grew := int64(peak) - int64(base)
	t.Logf("heap in use grew by %d MiB at most; %d pulls entered", grew>>20, s.pullCount.Load())
	testutil.True(t, grew < 128<<20, "heap growth under 150 pipelined pulls from a non-reader (MiB):", grew>>20)
}
