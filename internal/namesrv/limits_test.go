package namesrv

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
)

// TestNamesrvRefusesOversizedRegistrations replays issue 22's flood: three
// compressed REGISTER_BROKERs of 600 k topics each (they took a name server
// to 2.28 GB and dropped every broker from the routes 8 times). Each is
// refused from its topic count, before its lines are inflated; a healthy
// broker registered meanwhile stays routed and the heap barely moves.
func TestNamesrvRefusesOversizedRegistrations(t *testing.T) {
	lines := make([]string, 600_000)
	for i := range lines {
		lines[i] = fmt.Sprintf("flood-%06d-%s 8 8 6 SINGLE_TAG", i, strings.Repeat("x", 40))
	}
	body := compressedBody(t, protocol.DataVersion{Counter: 1}, lines, `[]`, false)
	lines = nil
	ns := startNamesrv(t, "127.0.1.1", "idc1", nil)
	healthy := newFakeBroker(t, "broker-ok", "127.0.1.1:10911", "idc1")
	healthy.mustRegister(ns.Addr(), map[string]int{"RealTopic": 4}, 1)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	for i := range 3 {
		evil := newFakeBroker(t, fmt.Sprintf("broker-flood-%d", i), fmt.Sprintf("127.0.9.%d:10911", i+1), "idc1")
		h := evil.header()
		h.Compressed = true
		resp := invoke(t, evil.cli, ns.Addr(), protocol.RegisterBroker, h.Ext(), body)
		wantCode(t, resp, protocol.SystemError)
		if !strings.Contains(resp.Remark, "600000 topics") || !strings.Contains(resp.Remark, "--max-topics-per-broker") {
			t.Fatalf("remark: %q", resp.Remark)
		}
		healthy.heartbeat(ns.Addr())
		if r, _ := getRoute(t, healthy.cli, ns.Addr(), "RealTopic", nil); r == nil || len(r.QueueDatas) != 1 {
			t.Fatalf("the healthy broker's route after flood %d: %+v", i, r)
		}
	}
	runtime.ReadMemStats(&ms)
	if grew := int64(ms.HeapInuse) - int64(base); grew > 64<<20 {
		t.Fatalf("heap grew by %d MiB refusing the floods", grew>>20)
	}
	if r, _ := getRoute(t, healthy.cli, ns.Addr(), "flood-000001-"+strings.Repeat("x", 40), nil); r != nil && len(r.QueueDatas) > 0 {
		t.Fatal("a flood topic was routed")
	}
}

// TestNamesrvCapsTopicEntriesAcrossBrokers: registrations that each fit
// under the per-broker cap are refused once all brokers' topics together
// would pass MaxTopicEntries; a broker already registered may re-register.
func TestNamesrvCapsTopicEntriesAcrossBrokers(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", func(o *Options) { o.MaxTopicEntries = 10 })
	topics := func(prefix string, n int) map[string]int {
		m := map[string]int{}
		for i := range n {
			m[fmt.Sprintf("%s%d", prefix, i)] = 1
		}
		return m
	}
	a := newFakeBroker(t, "broker-a", "127.0.1.1:10911", "idc1")
	a.mustRegister(ns.Addr(), topics("A", 6), 1)
	b := newFakeBroker(t, "broker-b", "127.0.1.2:10911", "idc1")
	resp := b.register(ns.Addr(), topicTable(topics("B", 6)), 1)
	wantCode(t, resp, protocol.SystemError)
	if !strings.Contains(resp.Remark, "--max-topic-entries") {
		t.Fatalf("remark: %q", resp.Remark)
	}
	b.mustRegister(ns.Addr(), topics("B", 4), 1)
	a.mustRegister(ns.Addr(), topics("A", 6), 2) // the same size again: fits
}
