package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// vmRSS is a process's resident set in bytes (/proc/PID/status).
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// peakRSS samples pid's RSS every 20 ms for d (a bounded number of looks)
// and returns the highest.
func peakRSS(t *testing.T, pid int, d time.Duration) int64 {
	var peak int64
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		peak = max(peak, vmRSS(t, pid))
	}
	return peak
}

// TestMeasureIssue22Bounds measures issue 22's memory figures on real
// processes: a broker's RSS under 150 pipelined pulls of 4 MiB messages
// from a client that never reads, and a name server's under three
// registrations of 600 000 topics, with a healthy broker registered all
// along. It prints the figures; set ZONEMQ_MEASURE=1 to run it (it moves
// ~1 GB through the disk and takes a minute).
func TestMeasureIssue22Bounds(t *testing.T) {
	if os.Getenv("ZONEMQ_MEASURE") == "" {
		t.Skip("a measurement, not a test: ZONEMQ_MEASURE=1 go test -run TestMeasureIssue22Bounds -v ./test/e2e/")
	}
	if old := os.Getenv("ZONEMQ_MEASURE_BINARY"); old != "" {
		// Another build (say, from before issue 22) for the "before" figures.
		defer func(b string) { binary = b }(binary)
		binary = old
	}
	ns := startNamesrv(t, 1)
	b := startBroker(t, 1, "broker-m", t.TempDir(), []string{"--namesrv", ns.addr}, "--max-message-size", strconv.Itoa(5<<20))
	rc := remoting.NewClient(remoting.ClientOptions{})
	defer rc.Close()
	invoke := func(addr string, code protocol.RequestCode, ext map[string]string, body []byte) *remoting.Command {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := rc.Invoke(ctx, addr, remoting.NewRequest(int32(code), ext, body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	ct := protocol.CreateTopicRequestHeader{Topic: "BigT", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	invoke(b.addr, protocol.UpdateAndCreateTopic, ct.Ext(), nil)
	body := bytes.Repeat([]byte("m"), 4<<20)
	for range 40 {
		h := protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "BigT", DefaultTopic: protocol.AutoCreateTopicKey,
			DefaultTopicQueueNums: 1, BornTimestamp: time.Now().UnixMilli()}
		if r := invoke(b.addr, protocol.SendMessage, h.Ext(), body); r.Code != 0 {
			t.Fatalf("send: %d %s", r.Code, r.Remark)
		}
	}
	probe := protocol.PullMessageRequestHeader{ConsumerGroup: "probe", Topic: "BigT", MaxMsgNums: 32,
		SysFlag: protocol.PullFlagSubscription, Subscription: "*", ExpressionType: protocol.ExpressionTypeTag}
	if r := invoke(b.addr, protocol.PullMessage, probe.Ext(), nil); r.Code != 0 || len(r.Body) < 4<<20 {
		t.Fatalf("a pull of BigT: %d %q, %d bytes", r.Code, r.Remark, len(r.Body))
	} else {
		t.Logf("one pull answer: %d MiB", len(r.Body)>>20)
	}
	idle := peakRSS(t, b.cmd.Process.Pid, 500*time.Millisecond)
	var frames []byte
	for i := range 150 {
		h := protocol.PullMessageRequestHeader{ConsumerGroup: "hog", Topic: "BigT", QueueOffset: int64(i % 8), MaxMsgNums: 32,
			SysFlag: protocol.PullFlagSubscription, Subscription: "*", ExpressionType: protocol.ExpressionTypeTag}
		req := remoting.NewRequest(int32(protocol.PullMessage), h.Ext(), nil)
		req.Opaque = int32(i + 1)
		frames = append(frames, remoting.EncodeFrame(req)...)
	}
	hog, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer hog.Close()
	hog.(*net.TCPConn).SetReadBuffer(4 << 10)
	if _, err := hog.Write(frames); err != nil {
		t.Fatal(err)
	}
	peak := peakRSS(t, b.cmd.Process.Pid, 5*time.Second)
	t.Logf("broker: RSS idle %d MiB, peak under 150 pipelined 4 MiB pulls %d MiB (+%d MiB; issue 22 target ≤ +256 MiB)",
		idle>>20, peak>>20, (peak-idle)>>20)

	// The name server.
	w := protocol.TopicConfigSerializeWrapper{TopicConfigTable: map[string]protocol.TopicConfig{}, DataVersion: protocol.DataVersion{Counter: 1}}
	for i := range 600_000 {
		name := fmt.Sprintf("flood-%06d-%s", i, strings.Repeat("x", 40))
		w.TopicConfigTable[name] = protocol.TopicConfig{TopicName: name, ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6, TopicFilterType: "SINGLE_TAG"}
	}
	flood := protocol.EncodeCompressedRegisterBody(w, nil)
	w = protocol.TopicConfigSerializeWrapper{}
	nsIdle := peakRSS(t, ns.cmd.Process.Pid, 500*time.Millisecond)
	dropped := 0
	for i := range 3 {
		h := protocol.RegisterBrokerRequestHeader{BrokerName: fmt.Sprintf("flood-%d", i), BrokerAddr: fmt.Sprintf("127.0.9.%d:10911", i+1),
			ClusterName: protocol.DefaultCluster, Compressed: true, ZoneName: "idc1"}
		r := invoke(ns.addr, protocol.RegisterBroker, h.Ext(), flood)
		t.Logf("flood registration %d: %s %q", i, protocol.ResponseCode(r.Code), r.Remark)
		ci := invoke(ns.addr, protocol.GetBrokerClusterInfo, nil, nil)
		if info, err := protocol.DecodeClusterLiveInfo(ci.Body); err != nil || len(info.BrokerAddrTable["broker-m"].BrokerAddrs) == 0 {
			dropped++
		}
	}
	nsPeak := peakRSS(t, ns.cmd.Process.Pid, time.Second)
	t.Logf("name server: RSS idle %d MiB, peak after 3 × 600 000-topic registrations %d MiB (issue 22 target ≤ 256 MiB); "+
		"healthy broker missing from the routes %d of 3 times (compressed body %d KiB)", nsIdle>>20, nsPeak>>20, dropped, len(flood)>>10)
}
