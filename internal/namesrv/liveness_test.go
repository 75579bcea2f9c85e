package namesrv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

// shortExpiry makes brokers and clients expire after 300 ms.
func shortExpiry(o *Options) {
	o.BrokerExpiry = 300 * time.Millisecond
	o.ScanInterval = 50 * time.Millisecond
	o.ClientExpiry = 300 * time.Millisecond
}

// TestNamesrvBrokerExpiry: a broker that stops heartbeating leaves the
// routes after its expiry (real clock, 300 ms); a per-broker
// heartbeatTimeoutMillis overrides the default; an expired broker's light
// heartbeat is refused until it registers in full again.
func TestNamesrvBrokerExpiry(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", shortExpiry)
	c := newClient(t)
	silent := newFakeBroker(t, "broker-silent", "127.0.2.1:10911", "idc2")
	patient := newFakeBroker(t, "broker-patient", "127.0.3.1:10911", "idc3")
	patient.timeout = 60_000
	patient.mustRegister(ns.Addr(), map[string]int{"TopicA": 3}, 1)

	start := time.Now()
	silent.mustRegister(ns.Addr(), map[string]int{"TopicA": 2}, 1)
	testutil.Eventually(t, 5*time.Second, routeIs(t, c, ns.Addr(), "TopicA", "broker-patient@idc3=3"))
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("broker expired after %v, before its 300 ms expiry", took)
	}

	// The expired broker's heartbeat is refused with BROKER_NOT_EXIST; a
	// full registration brings it back.
	wantCode(t, silent.heartbeat(ns.Addr()), protocol.BrokerNotExist)
	silent.mustRegister(ns.Addr(), map[string]int{"TopicA": 2}, 1)
	wantCode(t, silent.heartbeat(ns.Addr()), protocol.Success)

	// A heartbeat naming the wrong broker for an address is refused too.
	impostor := newFakeBroker(t, "broker-other", silent.addr, "idc2")
	wantCode(t, impostor.heartbeat(ns.Addr()), protocol.BrokerNotExist)
	resp := invoke(t, c, ns.Addr(), protocol.BrokerHeartbeat, map[string]string{"brokerAddr": "x"}, nil)
	wantCode(t, resp, protocol.InvalidParameter)
}

// TestNamesrvBrokerHeartbeatKeepsAlive: BROKER_HEARTBEAT keeps a broker in
// the routes past its expiry while a silent one leaves. The clock is moved
// by hand so a loaded machine cannot make heartbeats look late.
func TestNamesrvBrokerHeartbeatKeepsAlive(t *testing.T) {
	clock := newFakeClock()
	ns := startNamesrv(t, "127.0.1.1", "idc1", fakeClockExpiry(clock))
	c := newClient(t)
	alive := newFakeBroker(t, "broker-alive", "127.0.1.1:10911", "idc1")
	silent := newFakeBroker(t, "broker-silent", "127.0.2.1:10911", "idc2")
	alive.mustRegister(ns.Addr(), map[string]int{"TopicA": 1}, 1)
	silent.mustRegister(ns.Addr(), map[string]int{"TopicA": 2}, 1)

	clock.Advance(200 * time.Millisecond)
	wantCode(t, alive.heartbeat(ns.Addr()), protocol.Success)
	scanned := waitEvent(t, &ns.scans, 2)
	clock.Advance(200 * time.Millisecond) // silent: 400 ms silent; alive: 200 ms
	scanned()
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicA", "broker-alive@idc1=1")())

	for range 3 { // three more expiry-length stretches, each bridged by a heartbeat
		wantCode(t, alive.heartbeat(ns.Addr()), protocol.Success)
		scanned = waitEvent(t, &ns.scans, 2)
		clock.Advance(250 * time.Millisecond)
		scanned()
		testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicA", "broker-alive@idc1=1")())
	}

	// Exactly at the expiry it is still there; just past it, gone.
	scanned = waitEvent(t, &ns.scans, 2)
	clock.Advance(50 * time.Millisecond)
	scanned()
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicA", "broker-alive@idc1=1")())
	clock.Advance(time.Millisecond)
	testutil.Eventually(t, 5*time.Second, routeIs(t, c, ns.Addr(), "TopicA", "<none>"))
}

// TestNamesrvBrokerHeartbeatTimeoutOverride: a heartbeat's
// heartbeatTimeoutMills replaces the broker's expiry.
func TestNamesrvBrokerHeartbeatTimeoutOverride(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", shortExpiry)
	c := newClient(t)
	b := newFakeBroker(t, "broker-a", "127.0.1.1:10911", "idc1")
	b.mustRegister(ns.Addr(), map[string]int{"TopicA": 1}, 1)
	h := protocol.BrokerHeartbeatRequestHeader{ClusterName: b.cluster, BrokerAddr: b.addr, BrokerName: b.name, HeartbeatTimeoutMillis: 60_000}
	wantCode(t, invoke(t, b.cli, ns.Addr(), protocol.BrokerHeartbeat, h.Ext(), nil), protocol.Success)
	resp := invoke(t, c, ns.Addr(), protocol.GetBrokerClusterInfo, nil, nil)
	var ci protocol.ClusterLiveInfo
	testutil.NoError(t, json.Unmarshal(resp.Body, &ci))
	testutil.Equal(t, ci.BrokerLiveTable[b.addr].HeartbeatTimeoutMillis, int64(60_000), "timeout after the heartbeat")
}

// TestNamesrvBrokerConnectionClose: a broker whose connection closes leaves
// the routes at once, without waiting for the expiry; only the connection
// of its latest registration counts.
func TestNamesrvBrokerConnectionClose(t *testing.T) {
	ns := startNamesrv(t, "127.0.1.1", "idc1", func(o *Options) { o.BrokerExpiry = time.Hour })
	c := newClient(t)
	a := newFakeBroker(t, "broker-a", "127.0.1.1:10911", "idc1")
	b := newFakeBroker(t, "broker-b", "127.0.2.1:10911", "idc2")
	a.mustRegister(ns.Addr(), map[string]int{"TopicA": 1}, 1)
	b.mustRegister(ns.Addr(), map[string]int{"TopicA": 2}, 1)

	a.cli.CloseConn(ns.Addr())
	testutil.Eventually(t, 3*time.Second, routeIs(t, c, ns.Addr(), "TopicA", "broker-b@idc2=2"))

	// A second connection cannot take broker-b over while the first is
	// open; once it closed, the broker re-registers over the second (a
	// reconnect).
	b2 := newFakeBroker(t, "broker-b", "127.0.2.1:10911", "idc2")
	wantCode(t, b2.register(ns.Addr(), topicTable(map[string]int{"TopicA": 2}), 1), protocol.NoPermission)
	closed := ns.connsClosed.Load()
	b.cli.CloseConn(ns.Addr())
	testutil.Eventually(t, 3*time.Second, func() error {
		if ns.connsClosed.Load() == closed {
			return fmt.Errorf("the name server has not processed the close yet")
		}
		return nil
	})
	b2.mustRegister(ns.Addr(), map[string]int{"TopicA": 2}, 1)
	testutil.NoError(t, routeIs(t, c, ns.Addr(), "TopicA", "broker-b@idc2=2")())
	b2.cli.CloseConn(ns.Addr())
	testutil.Eventually(t, 3*time.Second, routeIs(t, c, ns.Addr(), "TopicA", "<none>"))
}

// TestNamesrvShutdownIsIdempotent: Shutdown before, during and after Run.
func TestNamesrvShutdownIsIdempotent(t *testing.T) {
	opts := NewOptions()
	opts.Listen, opts.IDC, opts.KVConfigPath = "127.0.1.1:0", "idc1", ""
	s, err := New(opts)
	testutil.NoError(t, err)
	s.Shutdown()
	s.Shutdown()
	testutil.NoError(t, s.Run(context.Background()), "Run after Shutdown returns at once")

	s2, err := New(opts)
	testutil.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s2.Run(context.Background()) }()
	c := newClient(t)
	_, resp := getRoute(t, c, s2.Addr(), "T", nil)
	wantCode(t, resp, protocol.TopicNotExist)
	s2.Shutdown()
	select {
	case err := <-done:
		testutil.NoError(t, err, "Run")
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Shutdown")
	}
	s2.Shutdown()
}

// TestNamesrvOptionsValidation: New names the flag of a bad option.
func TestNamesrvOptionsValidation(t *testing.T) {
	cases := map[string]func(*Options){
		"--idc":           func(o *Options) { o.IDC = " " },
		"--listen":        func(o *Options) { o.Listen = "" },
		"--broker-expiry": func(o *Options) { o.BrokerExpiry = 0 },
		"--scan-interval": func(o *Options) { o.ScanInterval = -time.Second },
		"--client-expiry": func(o *Options) { o.ClientExpiry = 0 },
	}
	for flag, mutate := range cases {
		opts := NewOptions()
		opts.Listen, opts.IDC, opts.KVConfigPath = "127.0.1.1:0", "idc1", ""
		mutate(&opts)
		_, err := New(opts)
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s: got %v", flag, err)
		}
	}
	opts := NewOptions()
	opts.IDC = "idc1"
	opts.Listen = "127.0.1.1:notaport"
	if _, err := New(opts); err == nil || errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "--listen") {
		t.Errorf("bad listen address: %v", err)
	}
	def := NewOptions()
	testutil.Equal(t, def.Listen, "127.0.0.1:9876", "default listen")
	testutil.Equal(t, def.BrokerExpiry, 3*time.Second, "default broker expiry")
}
