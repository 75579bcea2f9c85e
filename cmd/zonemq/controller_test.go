package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/controller"
	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// These tests bind port 0 only: no lock needed.

func TestCLIControllerArgs(t *testing.T) {
	opts, level, err := parseControllerArgs([]string{"--id", "c1", "--data", t.TempDir(), "--bootstrap",
		"--raft-peers", "c1=127.0.1.1:9881, c2=127.0.2.1:9881", "--master-lease-timeout", "2s", "--log-level", "warn"}, io.Discard)
	testutil.NoError(t, err)
	testutil.Equal(t, level, "warn", "log level")
	testutil.Equal(t, len(opts.Peers), 2, "peers")
	testutil.Equal(t, opts.Peers[1], controller.Peer{ID: "c2", RaftAddr: "127.0.2.1:9881"}, "second peer")
	testutil.Equal(t, opts.MasterLeaseTimeout, 2*time.Second, "lease timeout")
	for _, bad := range [][]string{
		{"--data", "d"},
		{"--id", "c1"},
		{"--id", "c1", "--data", "d", "--raft-peers", "c1"},
		{"--id", "c1", "--data", "d", "--raft-peers", "c1=a:1,c1=b:1"},
	} {
		_, _, err := parseControllerArgs(bad, io.Discard)
		var ue *usageError
		testutil.True(t, errors.As(err, &ue), "usage error for", bad, err)
	}
	// A bootstrap that does not name this node is refused by New.
	opts, _, err = parseControllerArgs([]string{"--id", "c9", "--data", t.TempDir(), "--bootstrap",
		"--raft-peers", "c1=127.0.1.1:9881"}, io.Discard)
	testutil.NoError(t, err)
	_, err = controller.New(opts)
	testutil.True(t, err != nil && strings.Contains(err.Error(), "--raft-peers"), "bootstrap without this node", err)
}

// The commented example config parses, and flags win over it.
func TestCLIControllerExampleConfig(t *testing.T) {
	opts, level, err := parseControllerArgs([]string{"--config", "../../contrib/controller.conf.example", "--id", "c2"}, io.Discard)
	testutil.NoError(t, err, "parsing contrib/controller.conf.example")
	testutil.Equal(t, opts.NodeID, "c2", "flag wins")
	testutil.Equal(t, opts.RaftListen, "127.0.1.1:9881", "raft-listen")
	testutil.Equal(t, len(opts.Peers), 3, "peers")
	testutil.True(t, opts.Bootstrap, "bootstrap")
	testutil.Equal(t, opts.MasterLeaseTimeout, 1500*time.Millisecond, "lease")
	testutil.Equal(t, opts.LeaderLeaseTimeout, 500*time.Millisecond, "raft leader lease")
	testutil.Equal(t, level, "info", "log level")
}

func TestCLINamesrvControllerArgs(t *testing.T) {
	_, ctrl, _, err := parseNamesrvCommand([]string{"--idc", "idc1", "--controller", "--controller-id", "c1",
		"--controller-data", t.TempDir(), "--raft-peers", "c1=127.0.1.1:9881"}, io.Discard)
	testutil.NoError(t, err)
	opts, err := ctrl.options(nil)
	testutil.NoError(t, err)
	testutil.True(t, opts != nil && opts.NodeID == "c1" && len(opts.Peers) == 1, "embedded voter options", opts)
	_, ctrl, _, err = parseNamesrvCommand([]string{"--idc", "idc1", "--controller"}, io.Discard)
	testutil.NoError(t, err)
	_, err = ctrl.options(nil)
	var ue *usageError
	testutil.True(t, errors.As(err, &ue), "--controller without id and data", err)
	_, ctrl, _, err = parseNamesrvCommand([]string{"--idc", "idc1"}, io.Discard)
	testutil.NoError(t, err)
	opts, err = ctrl.options(nil)
	testutil.True(t, opts == nil && err == nil, "no voter without --controller")
}

// admin controller status and elect against a one-voter controller.
func TestCLIAdminController(t *testing.T) {
	opts := controller.NewOptions()
	opts.Listen, opts.RaftListen, opts.NodeID, opts.DataDir = "127.0.1.1:0", "127.0.1.1:0", "c1", t.TempDir()
	// A short lease: a switch commits only once the old master's lease
	// has ended; the brokers below keep reporting so they stay alive.
	opts.MasterLeaseTimeout = 2 * time.Second
	srv, err := controller.New(opts)
	testutil.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	t.Cleanup(func() { srv.Shutdown(); <-done })
	testutil.NoError(t, srv.Bootstrap([]controller.Peer{{ID: "c1", RaftAddr: srv.RaftAddr()}}))
	testutil.Eventually(t, 20*time.Second, func() error {
		if !srv.IsLeader() {
			return errors.New("not leading yet")
		}
		return nil
	})
	cl := controller.NewClient([]string{srv.Addr()})
	t.Cleanup(func() { cl.Close() })
	report := func() error {
		for id, role := range []string{protocol.RoleMaster, protocol.RoleReplica} {
			_, err := cl.Heartbeat(context.Background(), &protocol.ControllerHeartbeatRequestHeader{Cluster: "zc",
				BrokerName: "broker-a", BrokerID: int64(id), Addr: "127.0.1.1:1091" + string(rune('1'+id)), IDC: "idc1",
				Epoch: 1, LogEnd: 100, Role: role})
			if err != nil {
				return err
			}
		}
		return nil
	}
	testutil.NoError(t, report())
	stop := make(chan struct{})
	reporting := make(chan struct{})
	go func() {
		defer close(reporting)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				report()
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-reporting })

	var stdout, stderr bytes.Buffer
	code := run([]string{"admin", "controller", "status", "--controller", srv.Addr()}, &stdout, &stderr)
	testutil.Equal(t, code, 0, "status exit", stderr.String())
	for _, want := range []string{"leader c1", "broker-a", "0@127.0.1.1:10911(idc1) up"} {
		testutil.True(t, strings.Contains(stdout.String(), want), "status shows", want, stdout.String())
	}
	stdout.Reset()
	code = run([]string{"admin", "controller", "status", "--controller", srv.Addr(), "--output", "json"}, &stdout, &stderr)
	testutil.Equal(t, code, 0, "status json exit", stderr.String())
	var st protocol.ControllerStatus
	testutil.NoError(t, json.Unmarshal(stdout.Bytes(), &st))
	testutil.True(t, st.IsLeader && len(st.Groups) == 1 && st.Groups[0].MasterID == 0, "json status", st)

	// Replica 1 is not in the in-sync set: refused without --force.
	stderr.Reset()
	code = run([]string{"admin", "controller", "elect", "--controller", srv.Addr(), "--cluster", "zc", "--name", "broker-a",
		"--to", "1"}, &stdout, &stderr)
	testutil.Equal(t, code, 1, "elect a non-in-sync replica", stderr.String())
	testutil.True(t, strings.Contains(stderr.String(), "in-sync"), "says why", stderr.String())
	stdout.Reset()
	code = run([]string{"admin", "controller", "elect", "--controller", srv.Addr(), "--cluster", "zc", "--name", "broker-a",
		"--to", "1", "--force"}, &stdout, &stderr)
	testutil.Equal(t, code, 0, "forced elect", stderr.String())
	testutil.True(t, strings.Contains(stdout.String(), "master is now broker 1") && strings.Contains(stdout.String(), "epoch 2"),
		"forced elect output", stdout.String())
	// The text status shows the epoch history: broker 0 at epoch 1, then 1 at 2.
	stdout.Reset()
	code = run([]string{"admin", "controller", "status", "--controller", srv.Addr()}, &stdout, &stderr)
	testutil.Equal(t, code, 0, "status exit", stderr.String())
	var epochs []string
	for line := range strings.SplitSeq(stdout.String(), "\n") {
		if f := strings.Fields(line); len(f) >= 5 && f[1] == "broker-a" && (f[2] == "1" || f[2] == "2") && strings.Contains(f[4], ":") {
			epochs = append(epochs, f[2]+"@"+f[3])
		}
	}
	testutil.Equal(t, strings.Join(epochs, ","), "1@0,2@1", "history rows", stdout.String())
	code = run([]string{"admin", "controller", "status"}, &stdout, &stderr)
	testutil.Equal(t, code, 2, "status without --controller")
}

// `zonemq namesrv --controller` serves both on port 0 and stops both when
// its context ends.
func TestCLINamesrvEmbedsController(t *testing.T) {
	var stdout, stderr cliBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runNamesrv(ctx, []string{"--listen", "127.0.1.1:0", "--idc", "idc1", "--kv-config", "",
			"--controller", "--controller-id", "c1", "--controller-listen", "127.0.1.1:0", "--raft-listen", "127.0.1.1:0",
			"--controller-data", t.TempDir(), "--log-level", "error"}, &stdout, &stderr)
	}()
	stopped := false
	t.Cleanup(func() {
		cancel()
		if !stopped {
			<-done
		}
	})
	var addr string
	testutil.Eventually(t, 20*time.Second, func() error {
		for line := range strings.SplitSeq(stdout.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, "controller listening on "); ok {
				addr, _, _ = strings.Cut(rest, " ")
				return nil
			}
		}
		return errors.New("no controller line yet: " + stdout.String() + stderr.String())
	})
	testutil.True(t, strings.Contains(stdout.String(), "namesrv listening on 127.0.1.1:"), "namesrv line", stdout.String())
	cl := controller.NewClient([]string{addr})
	t.Cleanup(func() { cl.Close() })
	st, err := cl.Status(ctx, addr)
	testutil.NoError(t, err)
	// Never bootstrapped: a voter without a cluster, so no leader.
	testutil.Equal(t, st.NodeID, "c1", "the embedded voter answers")
	testutil.Equal(t, st.Leader, "", "no leader without a bootstrap")
	cancel()
	testutil.NoError(t, <-done, "runNamesrv")
	stopped = true
}
