package proxy

import "time"

// SetRenewTimes shortens the auto-renewal's invisible time and period for
// a test; it returns a func that restores them. Not safe while access
// points run.
func SetRenewTimes(invisible, every time.Duration) (restore func()) {
	inv, ev := renewInvisible, renewEvery
	renewInvisible, renewEvery = invisible, every
	return func() { renewInvisible, renewEvery = inv, ev }
}
