// Package ledger checks a record of what a cluster acknowledged and what
// its consumers received against what a correct zonemq must guarantee
// through failures: every acknowledged message consumed, no
// acknowledgement from a fenced master (checked against the failover
// controller's epoch history), and, for an ordered topic, every key's
// messages consumed in the order they were acknowledged.
//
// It knows nothing of how the record was made: the drill (internal/drill)
// fills it from its producers and consumers, a test may build one by hand.
package ledger

import (
	"time"
)

// Ack is one acknowledged send: the broker's answer to a message with a
// unique Key.
type Ack struct {
	// Key identifies the message; consumptions refer to it.
	Key string
	// OrderKey, when set, marks the message as sent to an ordered topic
	// with this sharding key: the key's messages must be consumed in
	// acknowledgement order (see Check).
	OrderKey string
	// Group is the broker group (broker name) that stored it; Addr the
	// address of the broker that answered.
	Group string
	Addr  string
	// Queue and Offset are where it was stored.
	Queue  int
	Offset int64
	// Epoch is the answering master's replication epoch (0: unknown, the
	// acknowledgement is not checked against the history).
	Epoch int64
	// SentAt is when the send started, AckedAt when the answer arrived.
	SentAt, AckedAt time.Time
}

// Consumption is one delivery of a message to a consumer.
type Consumption struct {
	Key      string
	Consumer string
	Group    string
	Queue    int
	Offset   int64
	At       time.Time
	// Seq orders deliveries that share a time (lower first); a recorder
	// that numbers its deliveries as they arrive fills it.
	Seq int64
}

// Epoch is one entry of the controller's epoch history: from At on,
// broker MasterID at Addr is Group's master at Epoch.
type Epoch struct {
	Group    string
	Epoch    int64
	MasterID int64
	Addr     string
	At       time.Time
}

// Input is what Check reads.
type Input struct {
	Acks []Ack
	// Unacked are the keys of sends that failed or were never answered:
	// they may have been stored (the answer was lost), so a delivery of
	// one is not unexpected. A delivered key that is neither acknowledged
	// nor here was never sent.
	Unacked      []string
	Consumptions []Consumption
	// History is the controller's epoch history of every group (any
	// order). A group without history is not checked for fencing.
	History []Epoch
	// Grace is how long after its election an epoch counts as in force
	// for a send that started then: it covers the history's clock
	// resolution (milliseconds) and a send that left just before the
	// election. Zero means none.
	Grace time.Duration
}

// maxExamples bounds how many examples of each violation a Result keeps.
const maxExamples = 10

// Result is what Check found. Counts are of messages; the examples name
// the first few of each kind.
type Result struct {
	Acked    int `json:"acked"`
	Consumed int `json:"consumed"`
	// Lost: acknowledged, never consumed.
	Lost int `json:"lost"`
	// Duplicates: deliveries beyond a message's first, and DuplicateCauses
	// the same split by cause: "redelivered" (the same stored message
	// delivered again: a consumer restarted, a queue changed hands, an
	// offset commit was lost), "resent to another group" (an attempt went
	// unanswered and the producer's retry stored a second copy in another
	// group) or "stored twice in one group" (also unexpected).
	Duplicates      int            `json:"duplicates"`
	DuplicateCauses map[string]int `json:"duplicateCauses,omitempty"`
	// Unexpected: deliveries of a key that was never sent, or of a key at
	// a second position (queue, offset) of one group — one value at two
	// offsets of one log. StoredTwice counts the keys stored at two
	// positions, in one group or two.
	Unexpected         int      `json:"unexpected"`
	StoredTwice        int      `json:"storedTwice"`
	UnexpectedExamples []string `json:"unexpectedExamples,omitempty"`
	// FencedAcks: acknowledgements no master could validly give (see
	// Check).
	FencedAcks int `json:"fencedAcks"`
	// Unchecked: acknowledgements without an epoch or whose group has no
	// history; they were not checked for fencing.
	Unchecked int `json:"unchecked"`
	// EpochHistory is the verdict on the controller's epoch history read
	// as a linearizable register (EpochsLinearizable, …; empty without a
	// history), see epochs.go.
	EpochHistory string `json:"epochHistory,omitempty"`
	// OrderedKeys is how many order keys were checked; OrderViolations how
	// many messages were consumed out of their key's order.
	OrderedKeys     int `json:"orderedKeys"`
	OrderViolations int `json:"orderViolations"`
	// Examples of each kind of violation.
	LostExamples   []string `json:"lostExamples,omitempty"`
	FencedExamples []string `json:"fencedExamples,omitempty"`
	OrderExamples  []string `json:"orderExamples,omitempty"`
}

// OK reports whether nothing was lost or unexpected, no fenced master
// acknowledged, the epoch history is not shown non-linearizable and every
// ordered key kept its order. Duplicates of one
// stored message are allowed (delivery is at least once).
func (r *Result) OK() bool {
	return r.Lost == 0 && r.Unexpected == 0 && r.FencedAcks == 0 && r.OrderViolations == 0 &&
		r.EpochHistory != EpochsNotLinearizable
}

func addExample(list *[]string, s string) {
	if len(*list) < maxExamples {
		*list = append(*list, s)
	}
}
