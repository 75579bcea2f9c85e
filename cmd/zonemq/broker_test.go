package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/broker"
	"github.com/zonemq/zonemq/internal/testutil"
)

var brokerListeningRE = regexp.MustCompile(`broker listening on (\S+) idc=(\S+) name=(\S+)`)

// brokerDeadAddr returns an address on ip that nothing listens on.
func brokerDeadAddr(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	testutil.NoError(t, err, "listen")
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestBrokerCmdHelp(t *testing.T) {
	var stderr cliBuffer
	_, err := parseBrokerArgs([]string{"--help"}, &stderr)
	testutil.True(t, errors.Is(err, flag.ErrHelp), "--help returns flag.ErrHelp", err)
	help := stderr.String()
	for _, f := range []string{"listen", "idc", "name", "id", "cluster", "data", "addrsrv", "namesrv", "flush",
		"heartbeat-interval", "register-interval", "auto-create-topic", "max-message-size", "file-reserved-time",
		"disk-max-used-ratio", "segment-size", "log-level", "config", "message-delay-level", "lock-lease",
		"transaction-check-interval", "transaction-timeout", "transaction-check-max"} {
		testutil.True(t, regexp.MustCompile(`(?m)^  -`+f+`( |$)`).MatchString(help), "help explains --"+f, help)
	}
	for _, k := range []string{"-listenPort", "-transactionTimeOut", "-transactionCheckInterval"} {
		testutil.True(t, !strings.Contains(help, k), "RocketMQ keys stay out of the help", k)
	}
}

func TestBrokerCmdUsageErrors(t *testing.T) {
	base := []string{"--idc", "idc1", "--name", "b", "--data", t.TempDir(), "--namesrv", "127.0.1.1:9876"}
	without := func(flag string) []string {
		var out []string
		for i := 0; i < len(base); i += 2 {
			if base[i] != flag {
				out = append(out, base[i], base[i+1])
			}
		}
		return out
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{without("--idc"), "--idc"},
		{without("--name"), "--name"},
		{without("--data"), "--data"},
		{without("--namesrv"), "--addrsrv"},
		{append(base, "--flush", "sometimes"), "--flush"},
		{append(base, "--bogus"), "bogus"},
	} {
		_, err := parseBrokerArgs(tc.args, &cliBuffer{})
		var ue *usageError
		testutil.True(t, errors.As(err, &ue), "usage error for", tc.args, err)
		testutil.True(t, strings.Contains(err.Error(), tc.want), "error names", tc.want, err)
	}
	// An option New rejects is a usage error too.
	var stderr cliBuffer
	err := runBroker(context.Background(), append(base, "--name", "bad name!"), &cliBuffer{}, &stderr)
	var ue *usageError
	testutil.True(t, errors.As(err, &ue) && strings.Contains(err.Error(), "--name"), "bad --name is a usage error", err)
	for _, tc := range [][2]string{
		{"--message-delay-level", "1s 5x"},
		{"--transaction-check-max", "-1"},
	} {
		err := runBroker(context.Background(), append(base, tc[0], tc[1]), &cliBuffer{}, &cliBuffer{})
		testutil.True(t, errors.As(err, &ue) && strings.Contains(err.Error(), tc[0]), "bad "+tc[0]+" is a usage error naming it", err)
	}
}

func TestBrokerCmdConfigExample(t *testing.T) {
	ba, err := parseBrokerArgs([]string{"--config", "../../contrib/broker.conf.example"}, &cliBuffer{})
	testutil.NoError(t, err, "parsing contrib/broker.conf.example")
	o := ba.opts
	testutil.Equal(t, o.Listen, "127.0.1.1:10911", "listen")
	testutil.Equal(t, o.IDC, "idc1", "idc")
	testutil.Equal(t, o.BrokerName, "broker-idc1-a", "name")
	testutil.Equal(t, o.Cluster, "DefaultCluster", "cluster")
	testutil.Equal(t, o.DataDir, "/var/lib/zonemq/broker-idc1-a", "data")
	testutil.Equal(t, strings.Join(o.AddrsrvURLs, ","), "http://127.0.1.1:18080,http://127.0.2.1:18080", "addrsrv")
	testutil.Equal(t, len(o.NamesrvAddrs), 0, "namesrv commented out")
	testutil.Equal(t, o.HeartbeatInterval, time.Second, "heartbeat-interval")
	testutil.Equal(t, o.RegisterInterval, 30*time.Second, "register-interval")
	testutil.Equal(t, o.FileReservedTime, 72*time.Hour, "file-reserved-time")
	testutil.Equal(t, o.DiskMaxUsedRatio, 0.9, "disk-max-used-ratio")
	testutil.Equal(t, o.SegmentSize, int64(1<<30), "segment-size")
	testutil.Equal(t, o.MaxMessageSize, 4<<20, "max-message-size")
	testutil.Equal(t, o.ChannelExpiry, 120*time.Second, "channel-expiry")
	testutil.Equal(t, o.MessageDelayLevel, broker.DefaultMessageDelayLevel, "message-delay-level")
	testutil.Equal(t, o.LockLease, 60*time.Second, "lock-lease")
	testutil.Equal(t, o.TransactionCheckInterval, 30*time.Second, "transaction-check-interval")
	testutil.Equal(t, o.TransactionTimeout, 6*time.Second, "transaction-timeout")
	testutil.Equal(t, o.TransactionCheckMax, 15, "transaction-check-max")
	testutil.Equal(t, o.EnablePropertyFilter, true, "enable-property-filter")
	testutil.Equal(t, o.TimerMaxDelay, 72*time.Hour, "timer-max-delay")
	testutil.Equal(t, ba.logLevel, "info", "log-level")
	flush, _ := broker.ParseFlushMode("async")
	testutil.Equal(t, o.Flush, flush, "flush")

	// The command line wins over the file.
	ba, err = parseBrokerArgs([]string{"--config", "../../contrib/broker.conf.example", "--idc", "idc2", "--flush", "sync"}, &cliBuffer{})
	testutil.NoError(t, err, "parsing with overrides")
	testutil.Equal(t, ba.opts.IDC, "idc2", "flag over config")
	flush, _ = broker.ParseFlushMode("sync")
	testutil.Equal(t, ba.opts.Flush, flush, "flag over config")
}

func TestBrokerCmdRocketMQConf(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "broker.conf")
	os.WriteFile(conf, []byte(`# a stock RocketMQ broker.conf
brokerClusterName = ZoneCluster
brokerName = broker-a
brokerId = 0
namesrvAddr = 127.0.1.1:9876;127.0.2.1:9876
listenPort = 10921
brokerIP1 = 127.0.1.1
storePathRootDir = /tmp/zonemq-rocketmq-conf
flushDiskType = SYNC_FLUSH
autoCreateTopicEnable = false
maxMessageSize = 65536
fileReservedTime = 48
diskMaxUsedSpaceRatio = 75
registerNameServerPeriod = 10000
mappedFileSizeCommitLog = 104857600
deleteWhen = 04
brokerRole = ASYNC_MASTER
messageDelayLevel = 1s 2s 3s
transactionCheckInterval = 5000
transactionTimeOut = 3000
transactionCheckMax = 5
enablePropertyFilter = false
traceTopicEnable = false
timerMaxDelaySec = 3600
idc = idc1
`), 0o644)
	ba, err := parseBrokerArgs([]string{"--config", conf}, &cliBuffer{})
	testutil.NoError(t, err, "parsing a RocketMQ broker.conf")
	o := ba.opts
	testutil.Equal(t, o.Cluster, "ZoneCluster", "brokerClusterName")
	testutil.Equal(t, o.BrokerName, "broker-a", "brokerName")
	testutil.Equal(t, strings.Join(o.NamesrvAddrs, ";"), "127.0.1.1:9876;127.0.2.1:9876", "namesrvAddr")
	testutil.Equal(t, o.Listen, "127.0.1.1:10921", "listenPort + brokerIP1")
	testutil.Equal(t, o.DataDir, "/tmp/zonemq-rocketmq-conf", "storePathRootDir")
	sync, _ := broker.ParseFlushMode("sync")
	testutil.Equal(t, o.Flush, sync, "flushDiskType")
	testutil.Equal(t, o.AutoCreateTopic, false, "autoCreateTopicEnable")
	testutil.Equal(t, o.MaxMessageSize, 65536, "maxMessageSize")
	testutil.Equal(t, o.FileReservedTime, 48*time.Hour, "fileReservedTime in hours")
	testutil.Equal(t, o.DiskMaxUsedRatio, 0.75, "diskMaxUsedSpaceRatio in percent")
	testutil.Equal(t, o.RegisterInterval, 10*time.Second, "registerNameServerPeriod in ms")
	testutil.Equal(t, o.SegmentSize, int64(104857600), "mappedFileSizeCommitLog")
	testutil.Equal(t, o.MessageDelayLevel, "1s 2s 3s", "messageDelayLevel")
	testutil.Equal(t, o.TransactionCheckInterval, 5*time.Second, "transactionCheckInterval in ms")
	testutil.Equal(t, o.TransactionTimeout, 3*time.Second, "transactionTimeOut in ms")
	testutil.Equal(t, o.TransactionCheckMax, 5, "transactionCheckMax")
	testutil.Equal(t, o.Replication, "async", "brokerRole ASYNC_MASTER")
	testutil.Equal(t, o.EnablePropertyFilter, false, "enablePropertyFilter")
	testutil.Equal(t, o.TraceTopicEnable, false, "traceTopicEnable")
	testutil.Equal(t, o.TimerMaxDelay, time.Hour, "timerMaxDelaySec in seconds")
	testutil.Equal(t, len(ba.warnings), 1, fmt.Sprintf("warnings %v", ba.warnings))

	// A flag on the command line beats the converted key.
	ba, err = parseBrokerArgs([]string{"--config", conf, "--listen", "127.0.1.1:0", "--file-reserved-time", "1h",
		"--transaction-timeout", "1s", "--message-delay-level", "9s"}, &cliBuffer{})
	testutil.NoError(t, err, "parsing with overrides")
	testutil.Equal(t, ba.opts.Listen, "127.0.1.1:0", "--listen over listenPort")
	testutil.Equal(t, ba.opts.FileReservedTime, time.Hour, "--file-reserved-time over fileReservedTime")
	testutil.Equal(t, ba.opts.TransactionTimeout, time.Second, "--transaction-timeout over transactionTimeOut")
	testutil.Equal(t, ba.opts.MessageDelayLevel, "9s", "--message-delay-level over messageDelayLevel")

	os.WriteFile(conf, []byte("transactionTimeOut=6s\nidc=idc1\nbrokerName=b\nstorePathRootDir=/tmp/x\nnamesrvAddr=127.0.1.1:9876\n"), 0o644)
	_, err = parseBrokerArgs([]string{"--config", conf}, &cliBuffer{})
	testutil.True(t, err != nil && strings.Contains(err.Error(), "transactionTimeOut") && strings.Contains(err.Error(), "milliseconds"),
		"transactionTimeOut is in ms", err)

	os.WriteFile(conf, []byte("brokerRole=SLAVE\nidc=idc1\nbrokerName=b\nstorePathRootDir=/tmp/x\nnamesrvAddr=127.0.1.1:9876\n"), 0o644)
	_, err = parseBrokerArgs([]string{"--config", conf}, &cliBuffer{})
	testutil.True(t, err != nil && strings.Contains(err.Error(), "brokerId >= 1"), "a slave with brokerId 0 is refused", err)

	os.WriteFile(conf, []byte("brokerRole=SLAVE\nbrokerId=2\nhaMasterAddress=127.0.1.1:10911\nidc=idc2\nbrokerName=b\nstorePathRootDir=/tmp/x\nnamesrvAddr=127.0.1.1:9876\n"), 0o644)
	ba, err = parseBrokerArgs([]string{"--config", conf}, &cliBuffer{})
	testutil.NoError(t, err, "a slave config")
	testutil.Equal(t, ba.opts.BrokerID, int64(2), "brokerId")
	testutil.Equal(t, ba.opts.MasterAddr, "127.0.1.1:10911", "haMasterAddress")

	os.WriteFile(conf, []byte("brokerRole=SYNC_MASTER\nidc=idc1\nbrokerName=b\nstorePathRootDir=/tmp/x\nnamesrvAddr=127.0.1.1:9876\n"), 0o644)
	ba, err = parseBrokerArgs([]string{"--config", conf}, &cliBuffer{})
	testutil.NoError(t, err, "a sync master config")
	testutil.Equal(t, ba.opts.Replication, "sync", "SYNC_MASTER")
}

// TestBrokerCmdRunAndStop runs the subcommand in process against a name
// server address nobody listens on and stops it by cancelling its context.
func TestBrokerCmdRunAndStop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr := &cliBuffer{}, &cliBuffer{}
	data := filepath.Join(t.TempDir(), "new", "dir")
	done := make(chan error, 1)
	go func() {
		done <- commands["broker"].run(ctx, []string{"--listen", "127.0.1.1:0", "--idc", "idc1", "--name", "broker-cmd",
			"--data", data, "--namesrv", brokerDeadAddr(t, "127.0.1.1"), "--segment-size", "1048576"}, stdout, stderr)
	}()
	testutil.Eventually(t, 10*time.Second, func() error {
		m := brokerListeningRE.FindStringSubmatch(stdout.String())
		if m == nil {
			return fmt.Errorf("no listening line on stdout %q (stderr %q)", stdout.String(), stderr.String())
		}
		testutil.Equal(t, m[2], "idc1", "idc on the listening line")
		testutil.Equal(t, m[3], "broker-cmd", "name on the listening line")
		return nil
	})
	_, err := os.Stat(data)
	testutil.NoError(t, err, "--data created")
	cancel()
	select {
	case err := <-done:
		testutil.NoError(t, err, "run")
	case <-time.After(10 * time.Second):
		t.Fatal("broker did not stop within 10 s")
	}
	for _, want := range []string{"role=broker", "idc=idc1", "broker serving", "broker stopped"} {
		testutil.True(t, strings.Contains(stderr.String(), want), "logs mention", want, stderr.String())
	}
}

// TestBrokerCmdSignal runs the real command in a child process and stops it
// with SIGTERM: exit status 0 within 10 s.
func TestBrokerCmdSignal(t *testing.T) {
	if os.Getenv("ZONEMQ_BROKER_CHILD") == "1" {
		t.Skip("child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBrokerCmdChild$", "--",
		"broker", "--listen", "127.0.1.1:0", "--idc", "idc1", "--name", "broker-sig", "--data", t.TempDir(),
		"--namesrv", brokerDeadAddr(t, "127.0.1.1"), "--segment-size", "1048576")
	cmd.Env = append(os.Environ(), "ZONEMQ_BROKER_CHILD=1")
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
			if m := brokerListeningRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case listening <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		t.Fatalf("child did not start: %s", logs.String())
	}
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
	testutil.True(t, strings.Contains(logs.String(), "broker stopped"), "stop logged", logs.String())
}

// TestBrokerCmdChild is TestBrokerCmdSignal's child process.
func TestBrokerCmdChild(t *testing.T) {
	if os.Getenv("ZONEMQ_BROKER_CHILD") != "1" {
		t.Skip("only runs as TestBrokerCmdSignal's child process")
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
