package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// CommandError is a failed ip or tc command with what it printed.
type CommandError struct {
	Args   []string
	Output string
	Err    error
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("%s: %v: %s", strings.Join(e.Args, " "), e.Err, strings.TrimSpace(e.Output))
}

func (e *CommandError) Unwrap() error { return e.Err }

// run executes one iproute2 command and returns its output in the error.
func run(ctx context.Context, name string, args ...string) error {
	_, err := output(ctx, name, args...)
	return err
}

func output(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return out.String(), &CommandError{Args: append([]string{name}, args...), Output: out.String(), Err: err}
	}
	return out.String(), nil
}

// Command returns a command that runs name inside IDC n's namespace through
// `ip netns exec`. ip execs name in place, so the command's process is name
// itself: signalling or killing it reaches the program, not a wrapper.
func (t *Topology) Command(ctx context.Context, n int, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", t.Namespace(n), name}, args...)...)
}
