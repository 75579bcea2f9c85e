package broker

import "sync"

// maxPooledPullBuffer is the largest pull-answer buffer kept for reuse: a
// rare huge answer must not pin its memory afterwards.
const maxPooledPullBuffer = 1 << 20

// pullBuffers hold the bodies of pull answers. A pull reads its records
// straight into one (store.GetVisible), the answer is encoded from it
// onto the connection, and it comes back here (remoting.Command.Encoded):
// pulls at a high rate allocate no body each, and the collector has nothing
// to scan or return to the system for them.
var pullBuffers = sync.Pool{New: func() any { return new([]byte) }}

func getPullBuffer() *[]byte { return pullBuffers.Get().(*[]byte) }

func putPullBuffer(b *[]byte) {
	if cap(*b) > maxPooledPullBuffer {
		return
	}
	*b = (*b)[:0]
	pullBuffers.Put(b)
}
