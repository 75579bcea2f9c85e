package namesrv

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

func putKV(t *testing.T, c *remoting.Client, ns, namespace, key, value string) *remoting.Command {
	t.Helper()
	return invoke(t, c, ns, protocol.PutKVConfig, (&protocol.PutKVConfigRequestHeader{Namespace: namespace, Key: key, Value: value}).Ext(), nil)
}

func getKV(t *testing.T, c *remoting.Client, ns, namespace, key string) *remoting.Command {
	t.Helper()
	return invoke(t, c, ns, protocol.GetKVConfig, (&protocol.GetKVConfigRequestHeader{Namespace: namespace, Key: key}).Ext(), nil)
}

func listKV(t *testing.T, c *remoting.Client, ns, namespace string) (map[string]string, *remoting.Command) {
	t.Helper()
	resp := invoke(t, c, ns, protocol.GetKVListByNamespace, (&protocol.GetKVListByNamespaceRequestHeader{Namespace: namespace}).Ext(), nil)
	if protocol.ResponseCode(resp.Code) != protocol.Success {
		return nil, resp
	}
	var table protocol.KVTable
	testutil.NoError(t, json.Unmarshal(resp.Body, &table))
	return table.Table, resp
}

// runNamesrv runs a name server until stop is called (for restarts inside
// one test).
func runNamesrv(t *testing.T, opts Options) (*Server, func()) {
	t.Helper()
	s, err := New(opts)
	testutil.NoError(t, err, "New")
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		s.Shutdown()
		select {
		case err := <-done:
			testutil.NoError(t, err, "Run")
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return")
		}
	}
	t.Cleanup(stop)
	return s, stop
}

// TestNamesrvKVConfig: put, get, delete and list, persisted across a
// restart, bad input rejected.
func TestNamesrvKVConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "kvConfig.json")
	opts := NewOptions()
	opts.Listen, opts.IDC, opts.KVConfigPath, opts.Logger = "127.0.1.1:0", "idc1", path, testLogger()
	s, stop := runNamesrv(t, opts)
	c := newClient(t)

	wantCode(t, putKV(t, c, s.Addr(), "ns1", "k1", "v1"), protocol.Success)
	wantCode(t, putKV(t, c, s.Addr(), "ns1", "k2", "v 2"), protocol.Success)
	wantCode(t, putKV(t, c, s.Addr(), "ns1", "k2", "v2"), protocol.Success) // overwrite
	wantCode(t, putKV(t, c, s.Addr(), "ns2", "k", "gone soon"), protocol.Success)
	wantCode(t, putKV(t, c, s.Addr(), "ns3", "big", strings.Repeat("x", MaxKVValueBytes)), protocol.Success)

	resp := getKV(t, c, s.Addr(), "ns1", "k2")
	wantCode(t, resp, protocol.Success)
	var gh protocol.GetKVConfigResponseHeader
	testutil.NoError(t, gh.SetExt(resp.ExtFields))
	testutil.Equal(t, gh.Value, "v2", "value")

	resp = getKV(t, c, s.Addr(), "ns1", "missing")
	wantCode(t, resp, protocol.QueryNotFound)
	testutil.Equal(t, resp.Remark, "No config item, Namespace: ns1 Key: missing", "remark")

	table, _ := listKV(t, c, s.Addr(), "ns1")
	testutil.Equal(t, len(table), 2, "ns1 entries")
	testutil.Equal(t, table["k1"]+table["k2"], "v1v2", "ns1 values")
	_, resp = listKV(t, c, s.Addr(), "nope")
	wantCode(t, resp, protocol.QueryNotFound)

	del := protocol.DeleteKVConfigRequestHeader{Namespace: "ns2", Key: "k"}
	wantCode(t, invoke(t, c, s.Addr(), protocol.DeleteKVConfig, del.Ext(), nil), protocol.Success)
	wantCode(t, invoke(t, c, s.Addr(), protocol.DeleteKVConfig, del.Ext(), nil), protocol.Success) // again: harmless
	wantCode(t, getKV(t, c, s.Addr(), "ns2", "k"), protocol.QueryNotFound)

	// Bad input is INVALID_PARAMETER with a remark that says what is wrong.
	bad := []struct {
		resp    *remoting.Command
		mention string
	}{
		{putKV(t, c, s.Addr(), "", "k", "v"), "namespace is empty"},
		{putKV(t, c, s.Addr(), "ns", "", "v"), "key is empty"},
		{putKV(t, c, s.Addr(), "ns", "k", strings.Repeat("x", MaxKVValueBytes+1)), "limit is 65536"},
		{putKV(t, c, s.Addr(), strings.Repeat("n", MaxKVNameBytes+1), "k", "v"), "namespace is 256 bytes"},
		{invoke(t, c, s.Addr(), protocol.PutKVConfig, map[string]string{"namespace": "ns", "key": "k"}, nil), "value"},
		{getKV(t, c, s.Addr(), "ns", ""), "key is empty"},
		{invoke(t, c, s.Addr(), protocol.DeleteKVConfig, (&protocol.DeleteKVConfigRequestHeader{Key: "k"}).Ext(), nil), "namespace is empty"},
		{invoke(t, c, s.Addr(), protocol.GetKVListByNamespace, map[string]string{"namespace": ""}, nil), "namespace is empty"},
	}
	for i, b := range bad {
		if protocol.ResponseCode(b.resp.Code) != protocol.InvalidParameter || !strings.Contains(b.resp.Remark, b.mention) {
			t.Errorf("bad input %d: got %d %q, want INVALID_PARAMETER mentioning %q", i, b.resp.Code, b.resp.Remark, b.mention)
		}
	}

	// The file is RocketMQ's kvConfig.json layout and survives a restart.
	stop()
	raw, err := os.ReadFile(path)
	testutil.NoError(t, err)
	var f struct {
		ConfigTable map[string]map[string]string `json:"configTable"`
	}
	testutil.NoError(t, json.Unmarshal(raw, &f))
	testutil.Equal(t, f.ConfigTable["ns1"]["k2"], "v2", "file content")
	_, ns2Left := f.ConfigTable["ns2"]
	testutil.True(t, !ns2Left, "an emptied namespace is not kept")
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.tmp*"))
	testutil.Equal(t, len(leftovers), 0, "no temp files left")

	s2, _ := runNamesrv(t, opts)
	c2 := newClient(t)
	table, _ = listKV(t, c2, s2.Addr(), "ns1")
	testutil.Equal(t, table["k1"]+table["k2"], "v1v2", "ns1 after restart")
	resp = getKV(t, c2, s2.Addr(), "ns3", "big")
	testutil.Equal(t, len(resp.ExtFields["value"]), MaxKVValueBytes, "64 KiB value after restart")
	wantCode(t, getKV(t, c2, s2.Addr(), "ns2", "k"), protocol.QueryNotFound)
}

// TestNamesrvKVConfigCorruptFile: a KV file that cannot be parsed stops the
// start instead of being silently replaced.
func TestNamesrvKVConfigCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kvConfig.json")
	testutil.NoError(t, os.WriteFile(path, []byte(`{"configTable":`), 0o644))
	opts := NewOptions()
	opts.Listen, opts.IDC, opts.KVConfigPath = "127.0.1.1:0", "idc1", path
	_, err := New(opts)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("New with a corrupt KV file: %v", err)
	}
}

// TestNamesrvOrderTopicConf: ORDER_TOPIC_CONFIG entries become a route's
// orderTopicConf and the body of REGISTER_BROKER replies.
func TestNamesrvOrderTopicConf(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", nil)
	c := newClient(t)
	a := newFakeBroker(t, "broker-a", "127.0.1.1:10911", "idc1")
	resp := a.mustRegister(ns.Addr(), map[string]int{"TopicO": 4, "TopicP": 4}, 1)
	testutil.Equal(t, len(resp.Body), 0, "no ORDER_TOPIC_CONFIG body while the namespace is empty")

	wantCode(t, putKV(t, c, ns.Addr(), protocol.OrderTopicConfigNamespace, "TopicO", "broker-a:4"), protocol.Success)
	r, raw := getRoute(t, c, ns.Addr(), "TopicO", nil)
	testutil.Equal(t, r.OrderTopicConf, "broker-a:4", "orderTopicConf")
	testutil.True(t, strings.Contains(string(raw.Body), `"orderTopicConf":"broker-a:4"`), "wire key")
	r, raw = getRoute(t, c, ns.Addr(), "TopicP", nil)
	testutil.Equal(t, r.OrderTopicConf, "", "no entry, no orderTopicConf")
	testutil.True(t, !strings.Contains(string(raw.Body), "orderTopicConf"), "key omitted")
	// A KV entry alone does not make a route.
	wantCode(t, putKV(t, c, ns.Addr(), protocol.OrderTopicConfigNamespace, "TopicNone", "broker-a:1"), protocol.Success)
	_, raw = getRoute(t, c, ns.Addr(), "TopicNone", nil)
	wantCode(t, raw, protocol.TopicNotExist)

	resp = a.mustRegister(ns.Addr(), map[string]int{"TopicO": 4}, 1)
	var table protocol.KVTable
	testutil.NoError(t, json.Unmarshal(resp.Body, &table))
	testutil.Equal(t, table.Table["TopicO"], "broker-a:4", "REGISTER_BROKER reply body")
	testutil.Equal(t, len(table.Table), 2, "the whole namespace")
}
