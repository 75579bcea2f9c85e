package broker

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// flipInCommitLog flips one byte of needle's only occurrence in the first
// commit-log segment of dataDir, while the broker runs (reads go through the
// page cache, so they see it at once).
func flipInCommitLog(t *testing.T, dataDir string, needle []byte) {
	t.Helper()
	path := filepath.Join(dataDir, "commitlog", "00000000000000000000")
	testutil.FlipAfter(t, path, needle, 0)
	b, err := os.ReadFile(path)
	testutil.NoError(t, err)
	testutil.True(t, !bytes.Contains(b, needle), "the needle occurred once")
}

// A byte flipped in a stored body is never served: the pull that reaches it
// gets SYSTEM_ERROR naming it (and stays at its offset), the records around
// it are served, VIEW_MESSAGE_BY_ID and QUERY_MESSAGE refuse it, and the
// runtime info counts it.
func TestBrokerBitFlipNotServed(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-crc")
	s := startBroker(t, opts)
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "CrcTopic", 1)
	for i := range 3 {
		expectCode(t, sendRaw(t, c, s.Addr(), "CrcTopic", 0, map[string]string{"KEYS": fmt.Sprintf("key-%d", i)},
			[]byte(fmt.Sprintf("crc-body-%d-payload", i))), protocol.Success, "send")
	}
	all := decodeAll(t, pullRaw(t, c, s.Addr(), "crc_cg", "CrcTopic", 0, 0, "*", 32).Body)
	testutil.Equal(t, len(all), 3)
	flipInCommitLog(t, opts.DataDir, []byte("crc-body-1-payload"))

	resp := pullRaw(t, c, s.Addr(), "crc_cg", "CrcTopic", 0, 0, "*", 32)
	expectCode(t, resp, protocol.Success, "pull before the damaged record")
	testutil.Equal(t, len(decodeAll(t, resp.Body)), 1, "only the record before the damaged one")
	testutil.Equal(t, resp.ExtFields["nextBeginOffset"], "1")

	resp = pullRaw(t, c, s.Addr(), "crc_cg", "CrcTopic", 0, 1, "*", 32)
	expectCode(t, resp, protocol.SystemError, "pull at the damaged record")
	testutil.True(t, strings.Contains(resp.Remark, "MESSAGE_CORRUPT") && strings.Contains(resp.Remark, fmt.Sprint(all[1].CommitLogOffset)), resp.Remark)
	testutil.Equal(t, resp.ExtFields["nextBeginOffset"], "1", "the consumer is not moved past it")

	resp = pullRaw(t, c, s.Addr(), "crc_cg", "CrcTopic", 0, 2, "*", 32)
	expectCode(t, resp, protocol.Success, "pull after the damaged record")

	vh := protocol.ViewMessageRequestHeader{Offset: all[1].CommitLogOffset}
	resp = invoke(t, c, s.Addr(), protocol.ViewMessageByID, vh.Ext(), nil)
	expectCode(t, resp, protocol.SystemError, "view the damaged record")
	testutil.True(t, strings.Contains(resp.Remark, "damaged"), resp.Remark)

	qh := protocol.QueryMessageRequestHeader{Topic: "CrcTopic", Key: "key-1", MaxNum: 8}
	resp = invoke(t, c, s.Addr(), protocol.QueryMessage, qh.Ext(), nil)
	expectCode(t, resp, protocol.SystemError, "query the damaged record")
	testutil.True(t, strings.Contains(resp.Remark, "damaged"), resp.Remark)

	testutil.True(t, s.store.CorruptRecords() >= 3, fmt.Sprint("corrupt reads counted: ", s.store.CorruptRecords()))
}

// A topics file that lost topics whose queues are on disk is refused at
// start; --recover-missing-topics re-creates them and their messages are
// readable again.
func TestBrokerRefusesTopicsFileThatLostTopics(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-tj")
	s := startBroker(t, opts)
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "KeptTopic", 2)
	expectCode(t, sendRaw(t, c, s.Addr(), "KeptTopic", 1, nil, []byte("kept")), protocol.Success, "send")
	s.Shutdown()

	// The snapshot replaced by an empty table and its journal lost, as when
	// an operator restores an empty or old copy.
	testutil.NoError(t, os.WriteFile(filepath.Join(opts.DataDir, "config", "topics.json"), []byte("{}"), 0o644))
	testutil.NoError(t, os.Remove(filepath.Join(opts.DataDir, "config", "topics.journal")))
	opts.Listen = "127.0.1.1:0"
	_, err := New(opts)
	testutil.ErrorIs(t, err, ErrTopicsLost)
	testutil.True(t, strings.Contains(err.Error(), "KeptTopic") && strings.Contains(err.Error(), "--recover-missing-topics"), err.Error())

	opts.Hardening.RecoverMissingTopics = true
	s2 := startBroker(t, opts)
	cfg, ok := s2.topics.get("KeptTopic")
	testutil.True(t, ok, "topic re-created")
	testutil.True(t, cfg.ReadQueueNums >= 2, fmt.Sprint("queues: ", cfg.ReadQueueNums))
	resp := pullRaw(t, newRawClient(t), s2.Addr(), "tj_cg", "KeptTopic", 1, 0, "*", 32)
	expectCode(t, resp, protocol.Success, "pull after recovery")
	testutil.Equal(t, string(decodeAll(t, resp.Body)[0].Body), "kept")
}
