package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// mountSmallDisk mounts a tmpfs of size bytes on a fresh directory and
// unmounts it when the test ends (after the broker the test started, whose
// cleanup runs first). It skips the test unless it runs as root.
func mountSmallDisk(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the disk-full test mounts a small tmpfs and needs root; run it as root to cover ENOSPC")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs (%v); the disk-full test needs a mountable tmpfs", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting the test tmpfs %s: %v", dir, err)
		}
	})
	return dir
}

// fillDisk writes a file in dir until the file system is full.
func fillDisk(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	testutil.NoError(t, err)
	defer f.Close()
	chunk := make([]byte, 4096)
	for range 1 << 20 { // bounded: 4 GiB
		if _, err := f.Write(chunk); err != nil {
			testutil.True(t, errors.Is(err, syscall.ENOSPC), fmt.Sprint("filling stops at ENOSPC: ", err))
			return
		}
	}
	t.Fatal("the test file system never filled up")
}

// The disk guard cannot overshoot its limit within its one-second check
// period: it looks again once the bytes written reach half the room left.
func TestBrokerDiskGuardDoesNotOvershoot(t *testing.T) {
	disk := mountSmallDisk(t, 16<<20)
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-guard")
	opts.DataDir = filepath.Join(disk, "data")
	opts.SegmentSize = 1 << 20
	opts.DiskMaxUsedRatio = 0.5
	s := startBroker(t, opts)
	c := newRawClient(t)
	body := make([]byte, 64<<10)
	refused := false
	for i := 0; i < 400 && !refused; i++ {
		resp := sendRaw(t, c, s.Addr(), "GuardTopic", 0, nil, body)
		switch protocol.ResponseCode(resp.Code) {
		case protocol.Success:
		case protocol.ServiceNotAvailable:
			refused = true
			testutil.True(t, strings.Contains(resp.Remark, "disk"), resp.Remark)
		default:
			t.Fatalf("send %d: code %d %q", i, resp.Code, resp.Remark)
		}
	}
	testutil.True(t, refused, "sends are refused before the disk fills")
	used := s.store.DiskUsedRatio()
	t.Logf("refused at %.1f%% used (limit 50%%)", 100*used)
	// One 64 KiB record and its entries past the limit at most: 0.5% of 16 MiB.
	testutil.True(t, used <= 0.51, fmt.Sprintf("the guard overshot: %.1f%% used", 100*used))
}

// ENOSPC anywhere becomes SERVICE_NOT_AVAILABLE naming the disk; topic
// creation on a full disk says so; after a stop the broker starts again on
// the full disk and serves reads.
func TestBrokerDiskFullAnswersAndRestarts(t *testing.T) {
	disk := mountSmallDisk(t, 8<<20)
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-full")
	opts.DataDir = filepath.Join(disk, "data")
	opts.SegmentSize = 1 << 20
	opts.DiskMaxUsedRatio = 1 // the guard never trips: ENOSPC itself is under test
	s := startBroker(t, opts)
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "FullTopic", 1)
	expectCode(t, sendRaw(t, c, s.Addr(), "FullTopic", 0, nil, []byte("before the disk filled")), protocol.Success, "send")
	fillDisk(t, disk)

	resp := sendRaw(t, c, s.Addr(), "FullTopic", 0, nil, make([]byte, 64<<10))
	expectCode(t, resp, protocol.ServiceNotAvailable, "send on a full disk")
	t.Log(resp.Remark)
	// The guard (if it looked since the disk filled) or ENOSPC itself.
	testutil.True(t, strings.Contains(resp.Remark, "full") && strings.Contains(resp.Remark, opts.DataDir), resp.Remark)

	h := protocol.CreateTopicRequestHeader{Topic: "NewTopicOnFullDisk", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	resp = invoke(t, c, s.Addr(), protocol.UpdateAndCreateTopic, h.Ext(), nil)
	expectCode(t, resp, protocol.ServiceNotAvailable, "create a topic on a full disk")
	testutil.True(t, strings.Contains(resp.Remark, "disk") && strings.Contains(resp.Remark, "full"), resp.Remark)
	resp = sendRaw(t, c, s.Addr(), "AutoTopicOnFullDisk", 0, nil, []byte("x"))
	expectCode(t, resp, protocol.ServiceNotAvailable, "auto-create a topic on a full disk")

	s.Shutdown()
	opts.Listen = "127.0.1.1:0"
	s2, err := New(opts)
	testutil.NoError(t, err, "the broker starts on a full disk")
	go s2.Run(t.Context())
	t.Cleanup(s2.Shutdown)
	resp = pullRaw(t, newRawClient(t), s2.Addr(), "full_cg", "FullTopic", 0, 0, "*", 8)
	expectCode(t, resp, protocol.Success, "pull on a full disk")
	testutil.Equal(t, string(decodeAll(t, resp.Body)[0].Body), "before the disk filled")
}
