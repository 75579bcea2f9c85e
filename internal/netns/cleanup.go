package netns

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Cleanup removes the namespaces of earlier runs with this prefix whose
// creating process is gone (a test binary killed by a timeout, say). Names
// of a process still alive, this one included, are left alone, so two runs
// with the same prefix at once do not tear each other down. A process id
// reused by an unrelated process keeps its leftovers until a later run.
func Cleanup(ctx context.Context, prefix string) error {
	names, err := List(ctx, prefix)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		if pidAlive(runPID(prefix, name)) {
			continue
		}
		if err := run(ctx, "ip", "netns", "del", name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// List returns the namespaces whose names start with prefix and a dash,
// as `ip netns list` shows them.
func List(ctx context.Context, prefix string) ([]string, error) {
	out, err := output(ctx, "ip", "netns", "list")
	if err != nil {
		return nil, err
	}
	var names []string
	for line := range strings.Lines(out) {
		// "name (id: 3)" or just "name".
		fields := strings.Fields(line)
		if len(fields) > 0 && strings.HasPrefix(fields[0], prefix+"-") {
			names = append(names, fields[0])
		}
	}
	return names, nil
}

// runPID reads the process id from prefix-PID-tag-role; 0 if malformed.
func runPID(prefix, name string) int {
	rest := strings.TrimPrefix(name, prefix+"-")
	pid, _, _ := strings.Cut(rest, "-")
	n, err := strconv.Atoi(pid)
	if err != nil {
		return 0
	}
	return n
}

func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// Open topologies, so one SIGINT or SIGTERM removes them all.
var (
	liveMu sync.Mutex
	live   = map[*Topology]bool{}
)

func register(t *Topology) {
	liveMu.Lock()
	defer liveMu.Unlock()
	live[t] = true
}

func unregister(t *Topology) {
	liveMu.Lock()
	defer liveMu.Unlock()
	delete(live, t)
}

// CloseAll closes every open Topology of this process.
func CloseAll() error {
	liveMu.Lock()
	var open []*Topology
	for t := range live {
		open = append(open, t)
	}
	liveMu.Unlock()
	var errs []error
	for _, t := range open {
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}

var signalOnce sync.Once

// CloseOnSignal makes SIGINT and SIGTERM close every open Topology and then
// kill the process with the same signal, as if it had not been caught. Tests
// call it (a test binary interrupted by ^C runs no t.Cleanup); a program
// with its own signal handling calls CloseAll instead. Calling it more than
// once is harmless.
func CloseOnSignal() {
	signalOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		go func() {
			sig := <-ch
			_ = CloseAll()
			signal.Reset(sig)
			_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		}()
	})
}
