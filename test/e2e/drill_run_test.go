package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"syscall"
	"testing"
)

// runDrill runs `zonemq drill args… --output json` (killed with the test
// process), logs its progress and report, decodes the report into report
// and returns the drill's exit error.
func runDrill(t *testing.T, ctx context.Context, report any, args ...string) error {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary, append(append([]string{"drill"}, args...), "--output", "json")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	t.Logf("drill progress:\n%s", stderr.String())
	if err := json.Unmarshal(stdout.Bytes(), report); err != nil {
		t.Fatalf("drill printed no JSON report (exit: %v): %v\n%s", runErr, err, stdout.String())
	}
	t.Logf("drill report:\n%s", stdout.String())
	return runErr
}
