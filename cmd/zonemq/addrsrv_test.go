package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/addrsrv"
	"github.com/zonemq/zonemq/internal/testutil"
)

var addrsrvListeningRE = regexp.MustCompile(`msg="address server listening" .*addr=(\S+)`)

// addrsrvDeadAddr returns an address on ip that nothing listens on.
func addrsrvDeadAddr(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	testutil.NoError(t, err, "listen")
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestAddrsrvCmdHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"addrsrv", "--help"}, &stdout, &stderr)
	testutil.Equal(t, code, 0, "exit code")
	for _, want := range []string{"-listen", "-idc", "-namesrv", "-probe-interval", "-probe-timeout",
		"-down-after", "-log-level", "-config", "/rocketmq/nsaddr", "/v1/namesrvs", "/healthz"} {
		testutil.True(t, strings.Contains(stderr.String(), want), "--help mentions", want)
	}
	stderr.Reset()
	run([]string{"help"}, &stdout, &stderr)
	testutil.True(t, strings.Contains(stderr.String(), "addrsrv"), "command list mentions addrsrv")
}

func TestAddrsrvCmdUsageErrors(t *testing.T) {
	ok := []string{"--listen", "127.0.1.1:0", "--idc", "idc1"}
	cases := []struct {
		args []string
		want string
	}{
		{append(slices.Clone(ok), "--namesrv", "127.0.1.1:9876"), "namesrv"},
		{append(slices.Clone(ok), "--namesrv", "idc1=127.0.1.1:9876;127.0.1.2:9876"), "namesrv"},
		{append(slices.Clone(ok), "--namesrv", "idc1=127.0.1.1"), "namesrv"},
		{append(slices.Clone(ok), "--namesrv", "idc1=127.0.1.1:9876,"), "namesrv"},
		{append(slices.Clone(ok), "--namesrv", "idc1=127.0.1.1:9876,idc2=127.0.1.1:9876"), "listed twice"},
		{ok, "--namesrv is required"},
		{[]string{"--listen", "127.0.1.1:0", "--namesrv", "idc1=127.0.1.1:9876"}, "--idc is required"},
		{append(slices.Clone(ok), "--namesrv", "idc1=127.0.1.1:9876", "--probe-interval", "0s"), "--probe-interval"},
		{append(slices.Clone(ok), "--namesrv", "idc1=127.0.1.1:9876", "--probe-interval", "soon"), "probe-interval"},
		{append(slices.Clone(ok), "--namesrv", "idc1=127.0.1.1:9876", "--down-after", "0"), "--down-after"},
		{append(slices.Clone(ok), "--namesrv", "idc1=127.0.1.1:9876", "--log-level", "loud"), "--log-level"},
		{append(slices.Clone(ok), "--namesrv", "idc1=127.0.1.1:9876", "extra"), "unexpected argument"},
		{append(slices.Clone(ok), "--namesrv", "idc1=127.0.1.1:9876", "--config", "/nonexistent/addrsrv.conf"), "config"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"addrsrv"}, c.args...), &stdout, &stderr)
		if c.want == "config" {
			// A missing config file is an I/O error, not a usage error.
			testutil.True(t, code != 0, "exit code for", c.args)
		} else {
			testutil.Equal(t, code, 2, "exit code for", c.args, stderr.String())
		}
		testutil.True(t, strings.Contains(stderr.String(), c.want), "stderr for", c.args, "should mention", c.want, "got", stderr.String())
	}
}

func TestAddrsrvCmdConfigExample(t *testing.T) {
	path := filepath.Join("..", "..", "contrib", "addrsrv.conf.example")
	opts, level, err := parseAddrsrvArgs([]string{"--config", path}, io.Discard)
	testutil.NoError(t, err, "parse", path)
	testutil.Equal(t, opts.Listen, "127.0.1.1:8080", "listen")
	testutil.Equal(t, opts.IDC, "idc1", "idc")
	testutil.Equal(t, addrsrv.FormatNamesrvs(opts.Namesrvs),
		"idc1=127.0.1.1:9876,idc1=127.0.1.2:9876,idc2=127.0.2.1:9876,idc2=127.0.2.2:9876", "namesrv")
	testutil.Equal(t, opts.ProbeInterval, time.Second, "probe-interval")
	testutil.Equal(t, opts.ProbeTimeout, time.Duration(0), "probe-timeout")
	testutil.Equal(t, opts.DownAfter, 2, "down-after")
	testutil.Equal(t, level, "info", "log-level")

	// The command line wins over the file, key by key.
	opts, level, err = parseAddrsrvArgs([]string{"--config", path, "--idc", "idc2",
		"--namesrv", "idc2=127.0.2.9:9876", "--log-level", "debug"}, io.Discard)
	testutil.NoError(t, err, "parse with overrides")
	testutil.Equal(t, opts.IDC, "idc2", "idc from the command line")
	testutil.Equal(t, addrsrv.FormatNamesrvs(opts.Namesrvs), "idc2=127.0.2.9:9876", "namesrv from the command line")
	testutil.Equal(t, opts.Listen, "127.0.1.1:8080", "listen from the file")
	testutil.Equal(t, level, "debug", "log-level from the command line")

	// Every key in the file is a flag (parseFlags rejects unknown keys).
	bad := filepath.Join(t.TempDir(), "bad.conf")
	testutil.NoError(t, os.WriteFile(bad, []byte("idc=idc1\nprobeInterval=1s\n"), 0o644), "write")
	_, _, err = parseAddrsrvArgs([]string{"--config", bad}, io.Discard)
	testutil.True(t, err != nil && strings.Contains(err.Error(), "probeInterval"), "unknown key rejected", err)
}

// TestAddrsrvCmdRunAndStop runs the subcommand in process and stops it the
// way main does on SIGINT/SIGTERM: by cancelling its context.
func TestAddrsrvCmdRunAndStop(t *testing.T) {
	dead := addrsrvDeadAddr(t, "127.0.1.1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &cliBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runAddrsrv(ctx, []string{"--listen", "127.0.1.1:0", "--idc", "idc1",
			"--namesrv", "idc1=" + dead, "--probe-interval", "100ms"}, io.Discard, stderr)
	}()
	var base string
	testutil.Eventually(t, 5*time.Second, func() error {
		m := addrsrvListeningRE.FindStringSubmatch(stderr.String())
		if m == nil {
			return fmt.Errorf("no listening line in %q", stderr.String())
		}
		base = "http://" + m[1]
		return nil
	})
	testutil.Eventually(t, 5*time.Second, func() error {
		resp, err := http.Get(base + "/rocketmq/nsaddr")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if string(b) != dead {
			return fmt.Errorf("nsaddr %q", b)
		}
		return nil
	})
	// The failed probe is logged once, as a state change.
	testutil.Eventually(t, 5*time.Second, func() error {
		if !strings.Contains(stderr.String(), "name server down") {
			return fmt.Errorf("no state change logged: %s", stderr.String())
		}
		return nil
	})

	start := time.Now()
	cancel()
	select {
	case err := <-done:
		testutil.NoError(t, err, "runAddrsrv")
	case <-time.After(10 * time.Second):
		t.Fatal("addrsrv did not stop within 10 s")
	}
	t.Logf("stopped in %v", time.Since(start).Round(time.Millisecond))
	testutil.Equal(t, strings.Count(stderr.String(), "name server down"), 1, "down logged once, not per probe")
	testutil.True(t, strings.Contains(stderr.String(), "address server stopped"), "stop logged")
}

// TestAddrsrvCmdSignal runs the real command in a child process (this test
// binary re-executed) and stops it with SIGTERM: exit status 0 within 10 s.
func TestAddrsrvCmdSignal(t *testing.T) {
	if os.Getenv("ZONEMQ_ADDRSRV_CHILD") == "1" {
		t.Skip("child process")
	}
	dead := addrsrvDeadAddr(t, "127.0.1.1")
	cmd := exec.Command(os.Args[0], "-test.run=^TestAddrsrvCmdChild$", "--",
		"addrsrv", "--listen", "127.0.1.1:0", "--idc", "idc1", "--namesrv", "idc1="+dead)
	cmd.Env = append(os.Environ(), "ZONEMQ_ADDRSRV_CHILD=1")
	stderrPipe, err := cmd.StderrPipe()
	testutil.NoError(t, err, "stderr pipe")
	testutil.NoError(t, cmd.Start(), "start child")
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})

	listening := make(chan string, 1)
	var logs cliBuffer
	go func() {
		sc := bufio.NewScanner(stderrPipe)
		for sc.Scan() {
			fmt.Fprintln(&logs, sc.Text())
			if m := addrsrvListeningRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case listening <- m[1]:
				default:
				}
			}
		}
	}()
	var addr string
	select {
	case addr = <-listening:
	case <-time.After(10 * time.Second):
		t.Fatalf("child did not start: %s", logs.String())
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})

	testutil.NoError(t, cmd.Process.Signal(syscall.SIGTERM), "SIGTERM")
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		testutil.NoError(t, err, "child exit status (logs: "+logs.String()+")")
		testutil.Equal(t, cmd.ProcessState.ExitCode(), 0, "exit code")
	case <-time.After(10 * time.Second):
		t.Fatal("child did not stop within 10 s of SIGTERM")
	}
}

// TestAddrsrvCmdChild is the child process of TestAddrsrvCmdSignal: it runs
// the command line after "--" through main's run and exits with its status.
func TestAddrsrvCmdChild(t *testing.T) {
	if os.Getenv("ZONEMQ_ADDRSRV_CHILD") != "1" {
		t.Skip("only runs as TestAddrsrvCmdSignal's child process")
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(run(args, os.Stdout, os.Stderr))
}
