package broker

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

func TestBrokerOptionsExtraSettings(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-opts")
	opts.MessageDelayLevel = ""
	opts.LockLease, opts.TransactionCheckInterval, opts.TransactionTimeout, opts.TransactionCheckMax = 0, 0, 0, 0
	testutil.NoError(t, opts.validate(), "zero values")
	def := NewOptions()
	testutil.Equal(t, opts.MessageDelayLevel, DefaultMessageDelayLevel, "MessageDelayLevel default")
	testutil.Equal(t, opts.LockLease, 60*time.Second, "LockLease default")
	testutil.Equal(t, opts.TransactionCheckInterval, def.TransactionCheckInterval, "TransactionCheckInterval default")
	testutil.Equal(t, opts.TransactionTimeout, def.TransactionTimeout, "TransactionTimeout default")
	testutil.Equal(t, opts.TransactionCheckMax, 15, "TransactionCheckMax default")

	for _, tc := range []struct {
		mutate func(*Options)
		flag   string
	}{
		{func(o *Options) { o.MessageDelayLevel = "1s 5x" }, "--message-delay-level"},
		{func(o *Options) { o.MessageDelayLevel = strings.Repeat("1s ", 19) }, "--message-delay-level"},
		{func(o *Options) { o.TransactionCheckMax = -1 }, "--transaction-check-max"},
	} {
		o := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-opts")
		tc.mutate(&o)
		_, err := New(o)
		testutil.True(t, errors.Is(err, ErrInvalidOptions), "invalid options", err)
		testutil.True(t, err != nil && strings.Contains(err.Error(), tc.flag), "the error names "+tc.flag, err)
	}
}

// TestBrokerUnreadableExtraState: a corrupt or unreadable delayOffset.json
// or transactionState.json fails New with the file's path, and New
// releases what it opened (listener, data directory). A missing file is a
// fresh start.
func TestBrokerUnreadableExtraState(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-state")
	s, err := New(opts) // creates config/ and the store's files
	testutil.NoError(t, err, "New with no state files")
	s.Shutdown()

	for _, name := range []string{delayOffsetMetadata, transactionStateMetadata} {
		path := filepath.Join(opts.DataDir, "config", name+".json")
		for _, bad := range []struct {
			what  string
			write func() error
		}{
			{"corrupt", func() error { return os.WriteFile(path, []byte(`{"offsetTable":`), 0o644) }},
			{"wrong shape", func() error { return os.WriteFile(path, []byte(`{"offsetTable":"x","halfOffset":"y"}`), 0o644) }},
			{"a directory", func() error { return os.Mkdir(path, 0o755) }},
		} {
			testutil.NoError(t, os.RemoveAll(path), "clearing "+path)
			testutil.NoError(t, bad.write(), bad.what)
			o := opts
			ln, err := net.Listen("tcp", "127.0.1.1:0")
			testutil.NoError(t, err, "reserving a port")
			o.Listen = ln.Addr().String()
			ln.Close()
			_, err = New(o)
			t.Logf("%s %s: %v", name, bad.what, err)
			testutil.True(t, err != nil && strings.Contains(err.Error(), path), name+" "+bad.what+": the error names the file", err)
			// The port and the data directory are free again.
			ln, err = net.Listen("tcp", o.Listen)
			testutil.NoError(t, err, "the listener was closed")
			ln.Close()
		}
		testutil.NoError(t, os.RemoveAll(path), "removing "+path)
		s, err := New(opts)
		testutil.NoError(t, err, "New after removing "+name)
		s.Shutdown()
	}
}
