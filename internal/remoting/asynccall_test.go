package remoting

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// countingWaiter records what a Send told it.
type countingWaiter struct {
	answers, slows atomic.Int32
	code           atomic.Int32
	err            atomic.Pointer[error]
}

func (w *countingWaiter) Answered(resp *Command, err error) {
	if err != nil {
		w.err.Store(&err)
	} else {
		w.code.Store(resp.Code)
	}
	w.answers.Add(1)
}

func (w *countingWaiter) Slow() { w.slows.Add(1) }

// One timer serves a connection's asynchronous calls: a call with a short
// timeout sent after one with a long timeout must still time out on its
// own deadline, and the long one must stay pending.
func TestSendKeepsEachCallsDeadline(t *testing.T) {
	s, parked, _ := blockingServer(t)
	c := newTestClient(t, ClientOptions{})
	cn, err := c.Conn(invokeCtx(t, 5*time.Second), s.Addr())
	testutil.NoError(t, err)

	long, short := &countingWaiter{}, &countingWaiter{}
	cn.Send(NewRequest(2, nil, nil), time.Now().Add(time.Minute), time.Time{}, long)
	<-parked
	cn.Send(NewRequest(2, nil, nil), time.Now().Add(100*time.Millisecond), time.Time{}, short)
	<-parked
	testutil.Eventually(t, 5*time.Second, func() error {
		if short.answers.Load() != 1 {
			return errors.New("the short call has not timed out")
		}
		return nil
	})
	testutil.ErrorIs(t, *short.err.Load(), ErrTimeout)
	testutil.Equal(t, long.answers.Load(), int32(0))
}

// A call with no answer after slowAfter is marked slow once; its answer
// still comes when the peer sends it. An answered call is never marked.
func TestSendMarksASlowCallOnce(t *testing.T) {
	s, parked, release := blockingServer(t)
	c := newTestClient(t, ClientOptions{})
	cn, err := c.Conn(invokeCtx(t, 5*time.Second), s.Addr())
	testutil.NoError(t, err)

	fast := &countingWaiter{}
	now := time.Now()
	cn.Send(NewRequest(1, nil, nil), now.Add(time.Minute), now.Add(50*time.Millisecond), fast)
	testutil.Eventually(t, 5*time.Second, func() error {
		if fast.answers.Load() != 1 {
			return errors.New("no answer yet")
		}
		return nil
	})

	w := &countingWaiter{}
	now = time.Now()
	cn.Send(NewRequest(2, nil, nil), now.Add(time.Minute), now.Add(50*time.Millisecond), w)
	<-parked
	testutil.Eventually(t, 5*time.Second, func() error {
		if w.slows.Load() == 0 {
			return errors.New("not marked slow yet")
		}
		return nil
	})
	testutil.Equal(t, w.answers.Load(), int32(0))
	// Its slow mark was due before the parked call's: it is past.
	testutil.Equal(t, fast.slows.Load(), int32(0))

	close(release)
	testutil.Eventually(t, 5*time.Second, func() error {
		if w.answers.Load() != 1 {
			return fmt.Errorf("%d answers", w.answers.Load())
		}
		return nil
	})
	testutil.Equal(t, w.code.Load(), int32(77))
	testutil.Equal(t, w.slows.Load(), int32(1))
}
