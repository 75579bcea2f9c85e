package testutil

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"syscall"
	"testing"
)

// tempHomeEnv marks the child test process RunWithTempHome starts.
const tempHomeEnv = "ZONEMQ_TEST_TEMP_HOME"

// RunWithTempHome runs the package's tests (m.Run) in a child process whose
// HOME is a fresh temporary folder, removed afterwards, and returns its
// exit status; call it from TestMain. rocketmq-client-go fixes the folder
// of its broadcasting offset store (~/.rocketmq_client_go) when its package
// initialises, before any test could set HOME, so only a process started
// with another HOME keeps it out of the user's home directory.
func RunWithTempHome(m *testing.M) int {
	if os.Getenv(tempHomeEnv) != "" {
		return m.Run()
	}
	home, err := os.MkdirTemp("", "zonemq-test-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testutil: temporary home:", err)
		return 1
	}
	defer os.RemoveAll(home)
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), tempHomeEnv+"=1", "HOME="+home,
		"rocketmq.client.localOffsetStoreDir="+filepath.Join(home, ".rocketmq_client_go"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The child must not outlive this process (go test's timeout kills it).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	default:
		fmt.Fprintln(os.Stderr, "testutil: running the tests with a temporary home:", err)
		return 1
	}
}

// RemoveResolverSnapshot arranges for the file rocketmq-client-go's HTTP
// name-server resolver writes for url to be removed when t ends, with the
// folders it created for it if they are left empty. The resolver finds the
// home directory in the user database (os/user), not in $HOME, so no
// setting keeps this file out of the real home directory; removing exactly
// what it wrote leaves the home as it was.
func RemoveResolverSnapshot(t testing.TB, url string) {
	t.Helper()
	u, err := user.Current()
	if err != nil || u.HomeDir == "" {
		return
	}
	logs := filepath.Join(u.HomeDir, "logs")
	dirs := []string{filepath.Join(logs, "rocketmq-go", "snapshot"), filepath.Join(logs, "rocketmq-go"), logs}
	existed := map[string]bool{}
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			existed[d] = true
		}
	}
	sum := md5.Sum([]byte(url))
	file := filepath.Join(dirs[0], "nameserver_addr-"+hex.EncodeToString(sum[:]))
	t.Cleanup(func() {
		os.Remove(file)
		for _, d := range dirs {
			if !existed[d] {
				os.Remove(d) // only if empty
			}
		}
	})
}
