package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// Parked pulls are capped: past the cap a pull is answered SYSTEM_BUSY at
// once (clients back off), and the parked ones are still answered when
// their hold ends, by the expiry loop.
func TestBrokerLongPollingCapped(t *testing.T) {
	opts := testBrokerOptions(t, "127.0.1.1", "idc1", "broker-lpcap")
	opts.Hardening.MaxParkedPulls = 50
	opts.Hardening.MaxParkedPullsPerConn = 40
	opts.LongPollingMax = 2 * time.Second
	s := startBroker(t, opts)
	c := newRawClient(t)
	createTopic(t, c, s.Addr(), "CapTopic", 1)

	var answers []<-chan *remoting.Command
	for range 40 {
		answers = append(answers, asyncInvoke(c, s.Addr(), suspendedPull("cap_cg", "CapTopic", 0, 0)))
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := s.pulls.parked(); n != 40 {
			return fmt.Errorf("%d pulls parked", n)
		}
		return nil
	})
	expectCode(t, <-asyncInvoke(c, s.Addr(), suspendedPull("cap_cg", "CapTopic", 0, 0)), protocol.SystemBusy, "past the per-connection cap")

	c2 := newRawClient(t)
	for range 10 {
		answers = append(answers, asyncInvoke(c2, s.Addr(), suspendedPull("cap_cg", "CapTopic", 0, 0)))
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := s.pulls.parked(); n != 50 {
			return fmt.Errorf("%d pulls parked", n)
		}
		return nil
	})
	resp := <-asyncInvoke(c2, s.Addr(), suspendedPull("cap_cg", "CapTopic", 0, 0))
	expectCode(t, resp, protocol.SystemBusy, "past the broker's cap")
	t.Log(resp.Remark)

	for i, a := range answers {
		expectCode(t, <-a, protocol.PullNotFound, fmt.Sprint("parked pull ", i, " answered at its hold's end"))
	}
	testutil.Equal(t, s.pulls.parked(), 0)
}
