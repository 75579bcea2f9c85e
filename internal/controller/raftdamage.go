package controller

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// A voter's damaged Raft state. Every Raft log entry and stable-store value
// carries a CRC-32C (checkedStore), and a voter reads its whole Raft state
// when it starts (verifyRaftState). One whose state is damaged — a file
// that does not open, a checksum that fails, a page that makes bbolt panic,
// snapshots that do not restore — moves it aside into quarantine/ and starts
// empty under its own id, and then, before it votes again (voteGuard), it
// waits out every election that may have been under way when it lost its
// state and copies the leader's log up to the commit index the leader
// first tells it. So it can neither give a second vote in a term it voted
// in (a candidate asks for votes once per term, for one election timeout
// or two) nor vote for a candidate that lacks entries committed with its
// own lost copy (the leader that restored it had them all). The voters
// that kept their state are a majority meanwhile; a voter that is empty
// and has not caught up never decides anything.

// errRaftDamaged marks damaged Raft state.
var errRaftDamaged = errors.New("the Raft state is damaged")

// crcTable is CRC-32C (Castagnoli), as the store's records use.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// checkMagic ends every checksummed value: value, CRC-32C (4 bytes, big
// endian), magic. Values without it were written before checksums and are
// taken as they are.
const checkMagic = "zqc1"

// checkedStore is the Raft log and stable store with a checksum on every
// entry and value.
type checkedStore struct {
	*raftboltdb.BoltStore
}

func sealed(v []byte, sum uint32) []byte {
	out := make([]byte, 0, len(v)+8)
	out = append(out, v...)
	out = binary.BigEndian.AppendUint32(out, sum)
	return append(out, checkMagic...)
}

// unseal splits a sealed value; ok is false for a value without the seal.
func unseal(b []byte) (v []byte, sum uint32, ok bool) {
	if len(b) < 8 || string(b[len(b)-4:]) != checkMagic {
		return b, 0, false
	}
	return b[:len(b)-8], binary.BigEndian.Uint32(b[len(b)-8:]), true
}

// logSum covers what an entry says: index, term, type, data, extensions.
func logSum(l *raft.Log, ext []byte) uint32 {
	var head [17]byte
	binary.BigEndian.PutUint64(head[0:], l.Index)
	binary.BigEndian.PutUint64(head[8:], l.Term)
	head[16] = byte(l.Type)
	sum := crc32.Update(0, crcTable, head[:])
	sum = crc32.Update(sum, crcTable, l.Data)
	return crc32.Update(sum, crcTable, ext)
}

func sealLog(l *raft.Log) *raft.Log {
	c := *l
	c.Extensions = sealed(l.Extensions, logSum(l, l.Extensions))
	return &c
}

// GetLog implements raft.LogStore, checking the entry.
func (c checkedStore) GetLog(index uint64, log *raft.Log) error {
	if err := c.BoltStore.GetLog(index, log); err != nil {
		return err
	}
	ext, sum, ok := unseal(log.Extensions)
	if !ok {
		return nil
	}
	if log.Index != index || logSum(log, ext) != sum {
		return fmt.Errorf("%w: Raft log entry %d fails its checksum", errRaftDamaged, index)
	}
	log.Extensions = ext
	if len(ext) == 0 {
		log.Extensions = nil
	}
	return nil
}

// StoreLog implements raft.LogStore.
func (c checkedStore) StoreLog(l *raft.Log) error { return c.BoltStore.StoreLog(sealLog(l)) }

// StoreLogs implements raft.LogStore.
func (c checkedStore) StoreLogs(logs []*raft.Log) error {
	out := make([]*raft.Log, len(logs))
	for i, l := range logs {
		out[i] = sealLog(l)
	}
	return c.BoltStore.StoreLogs(out)
}

// Set implements raft.StableStore.
func (c checkedStore) Set(k, v []byte) error {
	return c.BoltStore.Set(k, sealed(v, crc32.Checksum(v, crcTable)))
}

// Get implements raft.StableStore, checking the value.
func (c checkedStore) Get(k []byte) ([]byte, error) {
	b, err := c.BoltStore.Get(k)
	if err != nil {
		return nil, err
	}
	v, sum, ok := unseal(b)
	if ok && crc32.Checksum(v, crcTable) != sum {
		return nil, fmt.Errorf("%w: Raft value %q fails its checksum", errRaftDamaged, k)
	}
	return v, nil
}

// SetUint64 implements raft.StableStore.
func (c checkedStore) SetUint64(k []byte, v uint64) error {
	return c.Set(k, binary.BigEndian.AppendUint64(nil, v))
}

// GetUint64 implements raft.StableStore.
func (c checkedStore) GetUint64(k []byte) (uint64, error) {
	v, err := c.Get(k)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: Raft value %q is %d bytes, not 8", errRaftDamaged, k, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// raftStableKeys are the values hashicorp/raft keeps in the stable store.
var raftStableKeys = [][]byte{[]byte("CurrentTerm"), []byte("LastVoteTerm"), []byte("LastVoteCand")}

// openBolt opens the bbolt file at path. bbolt panics on some damaged
// pages, and a page past the end of a cut file faults: both become
// errRaftDamaged. (A panic leaves the file's lock with this process; the
// damaged file is then moved aside and a new one made.)
func openBolt(path string) (b *raftboltdb.BoltStore, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			b, err = nil, fmt.Errorf("%w: opening it panicked: %v", errRaftDamaged, p)
		}
	}()
	return raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: boltOptions()})
}

// verifyRaftState reads every entry and value of the store, turning a
// bbolt panic or fault on a damaged page into errRaftDamaged.
func verifyRaftState(c checkedStore) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: reading it panicked: %v", errRaftDamaged, p)
		}
	}()
	first, err := c.FirstIndex()
	if err != nil {
		return fmt.Errorf("%w: %v", errRaftDamaged, err)
	}
	last, err := c.LastIndex()
	if err != nil {
		return fmt.Errorf("%w: %v", errRaftDamaged, err)
	}
	var l raft.Log
	for i := first; i != 0 && i <= last; i++ {
		if err := c.GetLog(i, &l); err != nil {
			if errors.Is(err, errRaftDamaged) {
				return err
			}
			return fmt.Errorf("%w: entry %d: %v", errRaftDamaged, i, err)
		}
	}
	for _, k := range raftStableKeys {
		if _, err := c.Get(k); err != nil && err.Error() != "not found" {
			if errors.Is(err, errRaftDamaged) {
				return err
			}
			return fmt.Errorf("%w: %s: %v", errRaftDamaged, k, err)
		}
	}
	return nil
}

// openRaftStore opens and verifies the Raft log in dir. A damaged one is
// moved aside (quarantineRaft) and an empty one opened: fresh is then true.
func openRaftStore(dir string, logger *slog.Logger) (store checkedStore, fresh bool, err error) {
	path := filepath.Join(dir, "raft.db")
	b, err := openBolt(path)
	if err == nil {
		store = checkedStore{b}
		if err = verifyRaftState(store); err == nil {
			return store, false, nil
		}
		b.Close()
	} else if errors.Is(err, errBoltLocked) || os.IsPermission(err) {
		return checkedStore{}, false, fmt.Errorf("controller: opening the Raft log in %s (another voter using it?): %w", dir, err)
	} else if !errors.Is(err, errRaftDamaged) {
		err = fmt.Errorf("%w: %v", errRaftDamaged, err)
	}
	if qerr := quarantineRaft(dir, err, logger); qerr != nil {
		return checkedStore{}, false, qerr
	}
	b, err = openBolt(path)
	if err != nil {
		return checkedStore{}, false, fmt.Errorf("controller: opening a new Raft log in %s: %w", dir, err)
	}
	return checkedStore{b}, true, nil
}

// quarantineRaft moves the Raft log and snapshots in dir into
// dir/quarantine/<time>/ for an operator to look at, and says so.
func quarantineRaft(dir string, why error, logger *slog.Logger) error {
	to := filepath.Join(dir, "quarantine", time.Now().UTC().Format("20060102T150405.000"))
	if err := os.MkdirAll(to, 0o755); err != nil {
		return fmt.Errorf("controller: quarantining damaged Raft state: %w", err)
	}
	for _, name := range []string{"raft.db", "snapshots"} {
		if err := os.Rename(filepath.Join(dir, name), filepath.Join(to, name)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("controller: quarantining damaged Raft state: %w", err)
		}
	}
	logger.Error("this voter's Raft state is damaged: moved aside; it starts empty and votes again only once it has "+
		"caught up with the leader", "why", why, "quarantine", to)
	return nil
}

// voteGuard stands between the Raft transport and a voter that started
// empty after damage: until it may vote again (see the top of the file) it
// answers every vote and pre-vote request with a refusal; everything else
// passes.
type voteGuard struct {
	*raft.NetworkTransport
	out     chan raft.RPC
	until   time.Time     // elections under way at the loss are over by then
	target  atomic.Uint64 // the commit index the first leader named; 0 until then
	caught  atomic.Bool
	applied func() uint64 // the voter's last log index
	damaged bool          // its state was damaged (not merely absent)
	logger  *slog.Logger
	once    sync.Once
}

func newVoteGuard(t *raft.NetworkTransport, electionTimeout time.Duration, logger *slog.Logger) *voteGuard {
	return &voteGuard{NetworkTransport: t, out: make(chan raft.RPC), until: time.Now().Add(3 * electionTimeout), logger: logger}
}

// Consumer implements raft.Transport.
func (g *voteGuard) Consumer() <-chan raft.RPC { return g.out }

// run passes the transport's requests on until stop closes.
func (g *voteGuard) run(stop <-chan struct{}) {
	in := g.NetworkTransport.Consumer()
	for {
		var rpc raft.RPC
		select {
		case <-stop:
			return
		case rpc = <-in:
		}
		switch req := rpc.Command.(type) {
		case *raft.AppendEntriesRequest:
			g.target.CompareAndSwap(0, req.LeaderCommitIndex)
		case *raft.InstallSnapshotRequest:
			g.target.CompareAndSwap(0, req.LastLogIndex)
		case *raft.RequestVoteRequest:
			if g.abstaining() {
				rpc.Respond(&raft.RequestVoteResponse{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax},
					Term: req.Term, Granted: false}, nil)
				continue
			}
		case *raft.RequestPreVoteRequest:
			if g.abstaining() {
				rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax},
					Term: req.Term, Granted: false}, nil)
				continue
			}
		}
		select {
		case g.out <- rpc:
		case <-stop:
			return
		}
	}
}

// abstaining reports whether the voter must not vote yet.
func (g *voteGuard) abstaining() bool {
	if g.caught.Load() {
		return false
	}
	target := g.target.Load()
	if time.Now().Before(g.until) || target == 0 || g.applied == nil || g.applied() < target {
		return true
	}
	g.caught.Store(true)
	g.once.Do(func() {
		g.logger.Info("the voter that started empty after damage has caught up with the leader: it votes again", "index", target)
	})
	return false
}

// boltOptions: bbolt locks the file, and another voter on the same --data
// would make Open wait for ever, so it gives up after a second.
func boltOptions() *bbolt.Options { return &bbolt.Options{Timeout: time.Second} }

// errBoltLocked is bbolt's answer when another process holds the file.
var errBoltLocked = bbolt.ErrTimeout
