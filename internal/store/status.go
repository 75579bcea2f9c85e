package store

import (
	"fmt"
	"unsafe"
)

// PutStatus qualifies a successful put.
type PutStatus int

const (
	// PutOK: stored (and, in FlushSync mode, on disk).
	PutOK PutStatus = iota
	// PutFlushDiskTimeout: stored, but the sync flush did not complete within
	// Options.SyncFlushTimeout (or the caller's context ended first). The
	// broker answers FLUSH_DISK_TIMEOUT.
	PutFlushDiskTimeout
)

// String returns RocketMQ's PutMessageStatus name.
func (s PutStatus) String() string {
	switch s {
	case PutOK:
		return "PUT_OK"
	case PutFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	}
	return fmt.Sprintf("PutStatus(%d)", int(s))
}

// PutResult describes an appended message or batch.
type PutResult struct {
	Status          PutStatus
	QueueOffset     int64  // first queue offset assigned
	CommitLogOffset int64  // physical offset of the (first) record
	End             int64  // physical offset just past the last record (what replicas must hold)
	MsgID           string // offset message id(s); comma-joined for a batch
	StoreTimestamp  int64  // ms
	Count           int    // records written
}

// GetStatus is the outcome of GetMessages, with RocketMQ's GetMessageStatus
// meaning (see docs/storage.md for how the broker maps each to a pull code).
type GetStatus int

const (
	// Found: Messages holds at least one record.
	Found GetStatus = iota
	// NoMatchedMessage: entries were scanned but the filter rejected all.
	NoMatchedMessage
	// OffsetFoundNull: the consume-queue file holding the offset is gone.
	OffsetFoundNull
	// OffsetOverflowOne: offset == max offset (caught up).
	OffsetOverflowOne
	// OffsetOverflowBadly: offset > max offset.
	OffsetOverflowBadly
	// OffsetTooSmall: offset < min offset (messages were deleted).
	OffsetTooSmall
	// NoMessageInQueue: the queue is unknown or has never held a message.
	NoMessageInQueue
	// MessageWasRemoving: the entries point at deleted commit-log segments.
	MessageWasRemoving
	// MessageCorrupt: the first record to return fails its body CRC (or its
	// framing); it is not served. NextBeginOffset stays at its queue offset
	// and CorruptOffset names its commit-log offset. zonemq's own status:
	// RocketMQ serves such a record unchecked.
	MessageCorrupt
)

var getStatusNames = [...]string{
	Found:               "FOUND",
	NoMatchedMessage:    "NO_MATCHED_MESSAGE",
	OffsetFoundNull:     "OFFSET_FOUND_NULL",
	OffsetOverflowOne:   "OFFSET_OVERFLOW_ONE",
	OffsetOverflowBadly: "OFFSET_OVERFLOW_BADLY",
	OffsetTooSmall:      "OFFSET_TOO_SMALL",
	NoMessageInQueue:    "NO_MESSAGE_IN_QUEUE",
	MessageWasRemoving:  "MESSAGE_WAS_REMOVING",
	MessageCorrupt:      "MESSAGE_CORRUPT",
}

// String returns RocketMQ's GetMessageStatus name (FOUND, OFFSET_TOO_SMALL, …),
// which the broker sends as the pull response remark.
func (s GetStatus) String() string {
	if s >= 0 && int(s) < len(getStatusNames) {
		return getStatusNames[s]
	}
	return fmt.Sprintf("GetStatus(%d)", int(s))
}

// GetResult is the answer of GetMessages.
type GetResult struct {
	Status GetStatus
	// Messages are the stored records, verified and handed out in
	// RocketMQ's v1 format (the store's CRC32C trailer cut off), back to
	// back in one buffer (the caller's, with GetMessagesInto); each slice's
	// capacity ends at its record, so appending to one never touches
	// another. Their concatenation is a PULL_MESSAGE body (see Body).
	Messages [][]byte
	// NextBeginOffset is where the consumer continues; MinOffset and
	// MaxOffset are the queue's bounds when the call ran.
	NextBeginOffset, MinOffset, MaxOffset int64
	// CorruptOffset is the commit-log offset of the corrupt record when
	// Status is MessageCorrupt.
	CorruptOffset int64
	// FencedAt, from GetVisible, is the end of the first record the read
	// stopped before because it is not visible yet (0 when none): Visible
	// must reach it before the read can go on.
	FencedAt int64

	// block is the buffer Messages were read into, back to back.
	block []byte
}

// Body returns Messages back to back, a PULL_MESSAGE body. While Messages
// are still the records read, in order and none dropped (a filter or a
// corrupt record may have taken some out), that is the buffer they were
// read into, without a copy; otherwise a new buffer.
func (r *GetResult) Body() []byte {
	n := 0
	for _, m := range r.Messages {
		n += len(m)
	}
	// The records tile block in order, so covering its length from its
	// first byte means every one of them is there.
	if n > 0 && n == len(r.block) && unsafe.SliceData(r.Messages[0]) == unsafe.SliceData(r.block) {
		return r.block
	}
	body := make([]byte, 0, n)
	for _, m := range r.Messages {
		body = append(body, m...)
	}
	return body
}
