package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

var namesrvListeningRE = regexp.MustCompile(`namesrv listening on (\S+) idc=(\S+)`)

// namesrvRawRequest sends one JSON-header request frame, built by hand the
// way rocketmq-client-go writes it, and returns the response's code and
// remark. (cmd/zonemq does not import the remoting package.)
func namesrvRawRequest(t *testing.T, addr string, code int, ext map[string]string) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	testutil.NoError(t, err, "dial", addr)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	header, _ := json.Marshal(map[string]any{"code": code, "language": "GO", "version": 317, "opaque": 7,
		"flag": 0, "remark": "", "extFields": ext})
	frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)))
	frame = binary.BigEndian.AppendUint32(frame, uint32(len(header))) // serialize type 0 (JSON) in the top byte
	frame = append(frame, header...)
	_, err = conn.Write(frame)
	testutil.NoError(t, err, "write")

	var lens [8]byte
	_, err = io.ReadFull(conn, lens[:])
	testutil.NoError(t, err, "read frame length")
	total := binary.BigEndian.Uint32(lens[0:4])
	hlen := binary.BigEndian.Uint32(lens[4:8]) & 0xFFFFFF
	testutil.Equal(t, lens[4], byte(0), "a JSON response header")
	rest := make([]byte, total-4)
	_, err = io.ReadFull(conn, rest)
	testutil.NoError(t, err, "read frame")
	var resp struct {
		Code   int    `json:"code"`
		Opaque int    `json:"opaque"`
		Flag   int    `json:"flag"`
		Remark string `json:"remark"`
	}
	testutil.NoError(t, json.Unmarshal(rest[:hlen], &resp), "response header", string(rest[:hlen]))
	testutil.Equal(t, resp.Opaque, 7, "opaque echoed")
	testutil.Equal(t, resp.Flag&1, 1, "response flag")
	return resp.Code, resp.Remark
}

func TestNamesrvCmdHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"namesrv", "--help"}, &stdout, &stderr)
	testutil.Equal(t, code, 0, "exit code")
	for _, want := range []string{"-listen", "-idc", "-broker-expiry", "-scan-interval", "-client-expiry",
		"-kv-config", "-max-frame-size", "-log-level", "-config", "127.0.0.1:9876", "kvConfigPath", "__ZONE_MODE"} {
		testutil.True(t, strings.Contains(stderr.String(), want), "--help mentions", want)
	}
	stderr.Reset()
	run([]string{"help"}, &stdout, &stderr)
	testutil.True(t, strings.Contains(stderr.String(), "namesrv"), "command list mentions namesrv")
}

func TestNamesrvCmdUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"namesrv", "--listen", "127.0.1.1:0"}, "--idc is required"},
		{[]string{"namesrv", "--idc", "idc1", "--broker-expiry", "soon"}, "broker-expiry"},
		{[]string{"namesrv", "--idc", "idc1", "--scan-interval", "0s", "--listen", "127.0.1.1:0"}, "--scan-interval must be positive"},
		{[]string{"namesrv", "--idc", "idc1", "--log-level", "loud", "--listen", "127.0.1.1:0"}, "log-level"},
		{[]string{"namesrv", "--idc", "idc1", "stray"}, "unexpected argument"},
	}
	for _, tc := range cases {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		testutil.Equal(t, code, 2, "exit code of", tc.args)
		testutil.True(t, strings.Contains(stderr.String(), tc.want), "stderr of", tc.args, "mentions", tc.want, stderr.String())
	}
}

func TestNamesrvCmdConfigExample(t *testing.T) {
	path := filepath.Join("..", "..", "contrib", "namesrv.conf.example")
	opts, level, err := parseNamesrvArgs([]string{"--config", path}, io.Discard)
	testutil.NoError(t, err, "parse", path)
	testutil.Equal(t, opts.Listen, "127.0.1.1:9876", "listen")
	testutil.Equal(t, opts.IDC, "idc1", "idc")
	testutil.Equal(t, opts.BrokerExpiry, 3*time.Second, "broker-expiry")
	testutil.Equal(t, opts.ScanInterval, time.Second, "scan-interval")
	testutil.Equal(t, opts.ClientExpiry, 3*time.Second, "client-expiry")
	testutil.Equal(t, opts.KVConfigPath, "/var/lib/zonemq/namesrv/kvConfig.json", "kv-config")
	testutil.Equal(t, opts.MaxFrameSize, 0, "max-frame-size")
	testutil.Equal(t, level, "info", "log-level")

	// The command line wins over the file, key by key.
	opts, level, err = parseNamesrvArgs([]string{"--config", path, "--idc", "idc2", "--broker-expiry", "5s",
		"--log-level", "debug"}, io.Discard)
	testutil.NoError(t, err, "parse with overrides")
	testutil.Equal(t, opts.IDC, "idc2", "idc from the command line")
	testutil.Equal(t, opts.BrokerExpiry, 5*time.Second, "broker-expiry from the command line")
	testutil.Equal(t, opts.Listen, "127.0.1.1:9876", "listen from the file")
	testutil.Equal(t, level, "debug", "log-level from the command line")

	// RocketMQ's kvConfigPath is accepted; keys whose unit or meaning
	// differs are not.
	dir := t.TempDir()
	alias := filepath.Join(dir, "rocketmq.conf")
	testutil.NoError(t, os.WriteFile(alias, []byte("idc=idc3\nkvConfigPath=/tmp/kv.json\n"), 0o644), "write")
	opts, _, err = parseNamesrvArgs([]string{"--config", alias}, io.Discard)
	testutil.NoError(t, err, "parse alias")
	testutil.Equal(t, opts.KVConfigPath, "/tmp/kv.json", "kvConfigPath alias")
	for _, key := range []string{"listenPort=9876", "scanNotActiveBrokerInterval=5000"} {
		bad := filepath.Join(dir, "bad.conf")
		testutil.NoError(t, os.WriteFile(bad, []byte("idc=idc1\n"+key+"\n"), 0o644), "write")
		_, _, err = parseNamesrvArgs([]string{"--config", bad}, io.Discard)
		name, _, _ := strings.Cut(key, "=")
		testutil.True(t, err != nil && strings.Contains(err.Error(), name), "rejected:", key, err)
	}

	// Defaults without a file.
	opts, _, err = parseNamesrvArgs([]string{"--idc", "idc1"}, io.Discard)
	testutil.NoError(t, err, "defaults")
	testutil.Equal(t, opts.Listen, "127.0.0.1:9876", "default listen")
	if home, err := os.UserHomeDir(); err == nil {
		testutil.Equal(t, opts.KVConfigPath, filepath.Join(home, "zonemq", "namesrv", "kvConfig.json"), "default kv-config")
	}
}

// TestNamesrvCmdRunAndStop runs the subcommand in process, asks it for a
// route over the wire, and stops it the way main does on SIGINT/SIGTERM: by
// cancelling its context.
func TestNamesrvCmdRunAndStop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr := &cliBuffer{}, &cliBuffer{}
	kv := filepath.Join(t.TempDir(), "kvConfig.json")
	done := make(chan error, 1)
	go func() {
		done <- commands["namesrv"].run(ctx, []string{"--listen", "127.0.1.1:0", "--idc", "idc1",
			"--kv-config", kv, "--scan-interval", "100ms"}, stdout, stderr)
	}()
	var addr string
	testutil.Eventually(t, 5*time.Second, func() error {
		m := namesrvListeningRE.FindStringSubmatch(stdout.String())
		if m == nil {
			return fmt.Errorf("no listening line on stdout %q (stderr %q)", stdout.String(), stderr.String())
		}
		addr = m[1]
		testutil.Equal(t, m[2], "idc1", "idc on the listening line")
		return nil
	})

	code, remark := namesrvRawRequest(t, addr, 105, map[string]string{"topic": "ProbeTopic"})
	testutil.Equal(t, code, 17, "GET_ROUTEINFO_BY_TOPIC of an unknown topic: TOPIC_NOT_EXIST")
	testutil.Equal(t, remark, "No topic route info in name server for the topic: ProbeTopic", "remark")
	code, _ = namesrvRawRequest(t, addr, 100, map[string]string{"namespace": "ns", "key": "k", "value": "v"})
	testutil.Equal(t, code, 0, "PUT_KV_CONFIG")
	_, err := os.Stat(kv)
	testutil.NoError(t, err, "KV config written to --kv-config")

	start := time.Now()
	cancel()
	select {
	case err := <-done:
		testutil.NoError(t, err, "run")
	case <-time.After(10 * time.Second):
		t.Fatal("namesrv did not stop within 10 s")
	}
	t.Logf("stopped in %v", time.Since(start).Round(time.Millisecond))
	logs := stderr.String()
	for _, want := range []string{"role=namesrv", "idc=idc1", "name server serving", "name server stopped"} {
		testutil.True(t, strings.Contains(logs, want), "logs mention", want, logs)
	}
}

// TestNamesrvCmdSignal runs the real command in a child process (this test
// binary re-executed) and stops it with SIGTERM: exit status 0 within 10 s.
func TestNamesrvCmdSignal(t *testing.T) {
	if os.Getenv("ZONEMQ_NAMESRV_CHILD") == "1" {
		t.Skip("child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNamesrvCmdChild$", "--",
		"namesrv", "--listen", "127.0.1.1:0", "--idc", "idc1", "--kv-config", filepath.Join(t.TempDir(), "kv.json"))
	cmd.Env = append(os.Environ(), "ZONEMQ_NAMESRV_CHILD=1")
	stdoutPipe, err := cmd.StdoutPipe()
	testutil.NoError(t, err, "stdout pipe")
	var logs cliBuffer
	cmd.Stderr = &logs
	testutil.NoError(t, cmd.Start(), "start child")
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})

	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdoutPipe)
		for sc.Scan() {
			if m := namesrvListeningRE.FindStringSubmatch(sc.Text()); m != nil {
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
	code, _ := namesrvRawRequest(t, addr, 106, nil)
	testutil.Equal(t, code, 0, "GET_BROKER_CLUSTER_INFO")

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
	testutil.True(t, strings.Contains(logs.String(), "name server stopped"), "stop logged", logs.String())
}

// TestNamesrvCmdChild is the child process of TestNamesrvCmdSignal: it runs
// the command line after "--" through main's run and exits with its status.
func TestNamesrvCmdChild(t *testing.T) {
	if os.Getenv("ZONEMQ_NAMESRV_CHILD") != "1" {
		t.Skip("only runs as TestNamesrvCmdSignal's child process")
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
