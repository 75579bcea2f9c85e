//go:build linux && (amd64 || arm64)

package netns

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
)

// Do runs fn on a thread switched into IDC n's namespace, then switches
// back. Sockets fn creates (net.Listen, net.Dial) stay in n's namespace for
// their whole life, wherever they are used later. fn must not start the
// work it wants inside n on another goroutine: only the calling goroutine's
// thread is switched. If switching back fails, the thread is left locked so
// the Go runtime discards it instead of reusing it in the wrong namespace.
func (t *Topology) Do(n int, fn func() error) error {
	if err := checkIDC(t.cfg, n); err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	target, err := os.Open("/var/run/netns/" + t.Namespace(n))
	if err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	defer target.Close()
	runtime.LockOSThread()
	// The thread's own namespace, opened after locking so it is this
	// thread's and not another's.
	home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", syscall.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: %w", err)
	}
	defer home.Close()
	if err := setns(int(target.Fd())); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: entering %s: %w", t.Namespace(n), err)
	}
	fnErr := fn()
	if err := setns(int(home.Fd())); err != nil {
		return fmt.Errorf("netns: leaving %s: %w (thread discarded)", t.Namespace(n), err)
	}
	runtime.UnlockOSThread()
	return fnErr
}

func setns(fd int) error {
	_, _, errno := syscall.RawSyscall(sysSetns, uintptr(fd), syscall.CLONE_NEWNET, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
