package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// server is a server process under measurement.
type server struct {
	name   string
	cmd    *exec.Cmd
	log    *os.File
	exited chan struct{} // closed once the process has been waited for
}

// startServer starts bin with args, its output in logPath, and waits until
// it prints ready (or exits, or 30 s pass).
func startServer(name, logPath, ready string, bin string, args ...string) (*server, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	pr, pw := io.Pipe()
	cmd.Stdout = io.MultiWriter(logf, pw)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	s := &server{name: name, cmd: cmd, log: logf, exited: make(chan struct{})}
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), ready) {
				close(found)
				signalled = true
			}
		}
	}()
	go func() { cmd.Wait(); pw.Close(); close(s.exited) }()
	select {
	case <-found:
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("%s exited before it was ready; see %s", name, logPath)
	case <-time.After(30 * time.Second):
		s.stop()
		return nil, fmt.Errorf("%s not ready after 30 s; see %s", name, logPath)
	}
}

// stop sends SIGTERM and waits (SIGKILL after 15 s).
func (s *server) stop() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	s.log.Close()
}

// cpu is the process's user+system CPU time so far, from /proc (clock
// ticks of 10 ms: USER_HZ is 100 on Linux).
func (s *server) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	rest := string(b[bytes.LastIndexByte(b, ')')+2:])
	f := strings.Fields(rest)
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// runClient runs a client process to completion and returns its JSON
// result (decoded into out) and its CPU time.
func runClient(logPath string, out any, bin string, args ...string) (time.Duration, error) {
	cmd := exec.Command(bin, args...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	logf, err := os.Create(logPath)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	cmd.Stderr = logf
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%s %s: %v; see %s", filepath.Base(bin), strings.Join(args, " "), err, logPath)
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return cpu, fmt.Errorf("%s: reading its JSON: %v (%q)", filepath.Base(bin), err, stdout.String())
	}
	return cpu, nil
}

// freePort returns a TCP port free on 127.0.0.1 right now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// freePorts returns n distinct free loopback ports.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitLogCount waits until the file at path holds substr n times (n <= 0:
// at once), checking every 50 ms for at most limit.
func waitLogCount(path, substr string, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		b, err := os.ReadFile(path)
		if err == nil && strings.Count(string(b), substr) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%q not seen %d times in %s within %s", substr, n, path, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
