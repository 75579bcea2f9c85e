package ledger

import (
	"fmt"
	"io"
	"time"

	"github.com/anishathalye/porcupine"
)

// The controller's epoch history checked as a linearizable register, per
// broker group: every election writes (epoch, master) and every
// acknowledgement that carries an epoch reads it — the master that answered
// claims to be the group's master at that epoch at some instant between the
// send and its answer. The history is linearizable if one order of all
// these operations, each placed inside its own interval, makes every read
// return the last write and every write raise the epoch. A master that
// acknowledged after it was fenced, an epoch elected twice or going back,
// a master that was never elected: each breaks it. Porcupine
// (github.com/anishathalye/porcupine) searches for the order.

// Epoch-history verdicts (Result.EpochHistory).
const (
	EpochsLinearizable    = "linearizable"
	EpochsNotLinearizable = "not linearizable"
	EpochsUnknown         = "unknown: the search timed out"
)

// epochCheckTimeout bounds the search; a drill's history takes
// milliseconds.
const epochCheckTimeout = time.Minute

// epochOp is an operation's input: an election (write) or an
// acknowledgement (read).
type epochOp struct {
	write bool
	group string
	// epoch and addr: what is elected, or (reads) what the answer claimed.
	epoch int64
	addr  string
	key   string // a read's message
}

// epochState is the register: the group's current epoch and master.
type epochState struct {
	epoch int64
	addr  string
}

var epochModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range h {
			g := op.Input.(epochOp).group
			if by[g] == nil {
				order = append(order, g)
			}
			by[g] = append(by[g], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, g := range order {
			out = append(out, by[g])
		}
		return out
	},
	Init: func() interface{} { return epochState{} },
	Step: func(state, input, _ interface{}) (bool, interface{}) {
		s, op := state.(epochState), input.(epochOp)
		if op.write {
			return op.epoch > s.epoch, epochState{op.epoch, op.addr}
		}
		return op.epoch == s.epoch && (s.addr == "" || op.addr == "" || op.addr == s.addr), s
	},
	DescribeOperation: func(input, _ interface{}) string {
		op := input.(epochOp)
		if op.write {
			return fmt.Sprintf("elect %s epoch %d", op.addr, op.epoch)
		}
		return fmt.Sprintf("%s acked by %s at epoch %d", op.key, op.addr, op.epoch)
	},
	DescribeState: func(state interface{}) string {
		s := state.(epochState)
		return fmt.Sprintf("epoch %d, master %s", s.epoch, s.addr)
	},
}

// epochOperations turns the input into the register's history: the
// elections, each spread over ±Grace (the history's clock and the
// client's are the same host's but the election's instant is known to a
// millisecond), and every acknowledgement with an epoch at or after the
// group's first recorded one (earlier ones cannot be told apart).
func epochOperations(in Input) []porcupine.Operation {
	first := map[string]int64{}
	var ops []porcupine.Operation
	for _, e := range in.History {
		if e.At.IsZero() {
			continue
		}
		if f, ok := first[e.Group]; !ok || e.Epoch < f {
			first[e.Group] = e.Epoch
		}
		ops = append(ops, porcupine.Operation{ClientId: 0,
			Input: epochOp{write: true, group: e.Group, epoch: e.Epoch, addr: e.Addr},
			Call:  e.At.Add(-in.Grace).UnixNano(), Return: e.At.Add(in.Grace).UnixNano()})
	}
	for _, a := range in.Acks {
		f, ok := first[a.Group]
		if a.Epoch == 0 || !ok || a.Epoch < f {
			continue
		}
		ops = append(ops, porcupine.Operation{ClientId: 1,
			Input: epochOp{group: a.Group, epoch: a.Epoch, addr: a.Addr, key: a.Key},
			Call:  a.SentAt.UnixNano(), Return: a.AckedAt.UnixNano()})
	}
	return ops
}

// checkEpochs sets r.EpochHistory (left empty without a history).
func checkEpochs(in Input, r *Result) {
	ops := epochOperations(in)
	if len(in.History) == 0 || len(ops) == 0 {
		return
	}
	switch porcupine.CheckOperationsTimeout(epochModel, ops, epochCheckTimeout) {
	case porcupine.Ok:
		r.EpochHistory = EpochsLinearizable
	case porcupine.Illegal:
		r.EpochHistory = EpochsNotLinearizable
	default:
		r.EpochHistory = EpochsUnknown
	}
}

// VisualizeEpochs writes porcupine's HTML picture of the epoch register's
// history (the longest linearizable prefix of each group, and where it
// breaks) to w.
func VisualizeEpochs(in Input, w io.Writer) error {
	_, info := porcupine.CheckOperationsVerbose(epochModel, epochOperations(in), epochCheckTimeout)
	return porcupine.Visualize(epochModel, info, w)
}
