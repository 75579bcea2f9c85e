package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// Timings of a replica's side.
const (
	// replicaRetry is the pause after a failed attempt to reach the master.
	replicaRetry = 200 * time.Millisecond
	// refusedRetry is the pause after the master refused this replica (an
	// operator has to act; the error is logged each time).
	refusedRetry = 5 * time.Second
	// metaSyncInterval is how often a replica copies the master's metadata.
	metaSyncInterval = time.Second
	// fetchRPCTimeout bounds one fetch: the master parks it up to
	// fetchMaxWait, plus time to send a chunk.
	fetchRPCTimeout = fetchMaxWait + 5*time.Second
)

// replicaLoop follows the master while this broker is a replica, and idles
// while it is master; it ends with ctx.
func (r *replication) replicaLoop(ctx context.Context) {
	// lastErr is the last reason logged at Warn: a new reason is logged
	// there once (a replica that cannot catch up must say why; the chaos
	// campaign met one that retried silently for minutes), repeats at
	// Debug.
	var lastErr string
	for ctx.Err() == nil {
		roleCh := r.roleChanged()
		if r.master.Load() {
			select {
			case <-ctx.Done():
				return
			case <-roleCh:
			}
			continue
		}
		err := r.followOnce(ctx, roleCh)
		if ctx.Err() != nil {
			return
		}
		pause := replicaRetry
		if err != nil {
			level := slog.LevelDebug
			if msg := err.Error(); msg != lastErr {
				level, lastErr = slog.LevelWarn, msg
			}
			r.s.logger.Log(ctx, level, "replication from the master stopped; retrying", "master", r.masterAddr(), "err", err)
			var pe *protocol.Error
			if errors.As(err, &pe) && pe.Code == protocol.SystemError {
				// Refused for a reason an operator must fix (logged by
				// hello): do not hammer the master.
				pause = refusedRetry
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-roleCh:
		case <-time.After(pause):
		}
	}
}

// masterAddr is the address being followed ("" while unknown).
func (r *replication) masterAddr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.follow
}

// findMaster returns the master's address: the configured one, else the
// id-0 address the name servers list for this group.
func (r *replication) findMaster(ctx context.Context) (string, error) {
	if a := r.s.opts.MasterAddr; a != "" {
		return a, nil
	}
	if r.controllerMode() {
		// The controller names the master; the name servers may lag.
		r.mu.Lock()
		a := r.follow
		r.mu.Unlock()
		if a != "" && a != r.s.addr {
			return a, nil
		}
	}
	req := r.s.signRequest(remoting.NewRequest(int32(protocol.GetBrokerClusterInfo), nil, nil))
	var errs []error
	for _, ns := range r.s.startupNamesrvs(ctx) {
		ictx, cancel := context.WithTimeout(ctx, r.s.opts.NamesrvTimeout)
		resp, err := r.s.namesrvs.client.Invoke(ictx, ns, req)
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		info, err := protocol.DecodeClusterLiveInfo(resp.Body)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if bd, ok := info.BrokerAddrTable[r.s.opts.BrokerName]; ok {
			if a := bd.MasterAddr(); a != "" && a != r.s.addr {
				return a, nil
			}
		}
	}
	if len(errs) > 0 {
		return "", fmt.Errorf("no name server lists a master for %s: %w", r.s.opts.BrokerName, errors.Join(errs...))
	}
	return "", fmt.Errorf("no name server lists a master for %s", r.s.opts.BrokerName)
}

// followOnce says hello to the master, aligns the log and fetches until
// something fails or the role changes.
func (r *replication) followOnce(ctx context.Context, roleCh <-chan struct{}) error {
	s := r.s
	addr, err := r.findMaster(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.follow = addr
	r.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, s.opts.NamesrvTimeout)
	conn, err := r.client.Conn(dctx, addr)
	cancel()
	if err != nil {
		return err
	}
	// A role change (promotion) ends the fetch at once.
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-roleCh:
			stop()
		case <-fctx.Done():
		}
	}()

	epoch, err := r.hello(fctx, conn)
	if err != nil {
		return err
	}
	// Topics first, so consumers reading from this replica find them.
	if err := r.syncMeta(fctx, addr); err != nil {
		s.logger.Debug("first metadata sync with the master failed", "master", addr, "err", err)
	}
	for fctx.Err() == nil {
		from := s.store.CommitLogMaxOffset()
		h := protocol.ReplicaFetchRequestHeader{BrokerName: s.opts.BrokerName, ReplicaID: r.regID.Load(), Epoch: epoch,
			Offset: from, MaxBytes: fetchMaxBytes, MaxWaitMillis: fetchMaxWait.Milliseconds()}
		ictx, cancel := context.WithTimeout(fctx, fetchRPCTimeout)
		resp, err := conn.Invoke(ictx, s.signRequest(remoting.NewRequest(int32(protocol.ReplicaFetch), h.Ext(), nil)))
		cancel()
		if err != nil {
			return err
		}
		if resp.Code != int32(protocol.Success) {
			return fmt.Errorf("fetch refused: %w", &protocol.Error{Code: protocol.ResponseCode(resp.Code), Remark: resp.Remark})
		}
		if resp.ExtFields[extSyncMetaNow] == "true" {
			// The master is handing over and waits for our metadata.
			if err := r.syncMeta(fctx, addr); err != nil {
				s.logger.Debug("metadata sync the master asked for failed", "master", addr, "err", err)
			}
		}
		var rh protocol.ReplicaFetchResponseHeader
		if err := rh.SetExt(resp.ExtFields); err != nil {
			return fmt.Errorf("fetch answer: %w", err)
		}
		if len(resp.Body) > 0 {
			end, err := s.store.AppendReplicated(fctx, from, resp.Body)
			if err != nil {
				if errors.Is(err, store.ErrCorrupt) {
					s.logger.Error("the master sent a damaged chunk; fetching it again", "from", from, "err", err)
				}
				return err
			}
			if err := r.noteCaughtUp(end); err != nil {
				return err
			}
		}
		if rh.Confirmed < 0 {
			rh.Confirmed = store.NoFence // an older master: no fence
		}
		r.followConfirmed(rh.Confirmed)
	}
	return fctx.Err()
}

// hello opens replication on conn: truncate a divergent tail, start an
// empty log where the master's starts, and adopt the master's epochs.
func (r *replication) hello(ctx context.Context, conn *remoting.Conn) (int64, error) {
	s := r.s
	end := s.store.CommitLogMaxOffset()
	history := r.epochs()
	h := protocol.ReplicaHelloRequestHeader{BrokerName: s.opts.BrokerName, ReplicaID: r.regID.Load(), ReplicaAddr: s.addr,
		IDC: s.opts.IDC, LastEpoch: epochOf(history, end), LogEnd: end, SegmentSize: s.store.SegmentSize()}
	ictx, cancel := context.WithTimeout(ctx, s.opts.NamesrvTimeout*2)
	resp, err := conn.Invoke(ictx, s.signRequest(remoting.NewRequest(int32(protocol.ReplicaHello), h.Ext(), nil)))
	cancel()
	if err != nil {
		return 0, err
	}
	if resp.Code != int32(protocol.Success) {
		err := &protocol.Error{Code: protocol.ResponseCode(resp.Code), Remark: resp.Remark}
		s.logger.Error("the master refused this replica", "master", conn.RemoteAddr(), "err", err)
		return 0, err
	}
	var rh protocol.ReplicaHelloResponseHeader
	if err := rh.SetExt(resp.ExtFields); err != nil {
		return 0, err
	}
	var masterEpochs []protocol.EpochEntry
	if err := json.Unmarshal(resp.Body, &masterEpochs); err != nil {
		return 0, fmt.Errorf("master's epoch history: %w", err)
	}
	if err := checkTruncation(history, end, rh, masterEpochs); err != nil {
		// Keep the data: an operator decides (issue 22: a squatter's
		// truncateTo=0 cut a master's log to nothing).
		s.logger.Error("not following the master: it asks this broker to drop data its epoch history does not prove "+
			"the group never acknowledged", "master", conn.RemoteAddr(), "err", err)
		return 0, err
	}
	if rh.TruncateTo < end {
		s.logger.Warn("dropping a log tail the group never acknowledged before following the master",
			"from", rh.TruncateTo, "to", end, "bytes", end-rh.TruncateTo, "lastEpoch", h.LastEpoch, "masterEpoch", rh.Epoch)
		if err := s.store.TruncateLog(rh.TruncateTo); err != nil {
			return 0, fmt.Errorf("truncating to %d: %w", rh.TruncateTo, err)
		}
	}
	if s.store.CommitLogMaxOffset() == 0 && rh.LogMin > 0 {
		if err := s.store.StartLogAt(rh.LogMin); err != nil {
			return 0, err
		}
	}
	r.mu.Lock()
	r.state.Epochs = masterEpochs
	r.noteEpochLocked()
	if r.state.MustCatchUp != "" {
		r.catchUpTo.Store(rh.LogEnd)
	} else {
		r.catchUpTo.Store(-1)
	}
	err = r.persistLocked()
	r.mu.Unlock()
	if err != nil {
		return 0, err
	}
	s.logger.Info("following the master", "master", conn.RemoteAddr(), "epoch", rh.Epoch, "from", s.store.CommitLogMaxOffset(), "masterEnd", rh.LogEnd)
	return rh.Epoch, nil
}

// noteCaughtUp clears the MustCatchUp mark once the replica's log reaches
// where its master's ended at the HELLO: it then holds everything the group
// had acknowledged, as any in-sync replica does.
func (r *replication) noteCaughtUp(end int64) error {
	if to := r.catchUpTo.Load(); to < 0 || end < to {
		return nil // the common case: no lock per fetched chunk
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state.MustCatchUp == "" {
		return nil
	}
	r.catchUpTo.Store(-1)
	r.s.logger.Info("the log has caught up with the master: this broker may lead again", "was", r.state.MustCatchUp, "logEnd", end)
	r.state.MustCatchUp = ""
	return r.persistLocked()
}

// metaLoop copies the master's topics, groups, offsets and delay progress
// every metaSyncInterval while this broker is a replica, and hands the
// master the offsets consumers committed here.
func (r *replication) metaLoop(ctx context.Context) {
	t := time.NewTicker(metaSyncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if r.master.Load() {
			continue
		}
		addr := r.masterAddr()
		if addr == "" {
			continue
		}
		if err := r.syncMeta(ctx, addr); err != nil && ctx.Err() == nil {
			r.s.logger.Debug("metadata sync with the master failed", "master", addr, "err", err)
		}
	}
}

// syncMeta does one exchange with the master. Exchanges run one at a time
// (the periodic one, the first after a hello, one a switchover asks for):
// applying two at once would interleave their metadata.
func (r *replication) syncMeta(ctx context.Context, addr string) error {
	r.metaMu.Lock()
	defer r.metaMu.Unlock()
	s := r.s
	dirty := r.takeDirtyOffsets()
	var out protocol.ReplicaMeta
	for k := range dirty {
		if off, ok := s.store.QueryOffset(k.group, k.topic, k.queueID); ok {
			setNested(&out.Offsets, k, off)
		}
	}
	body, err := json.Marshal(&out)
	if err != nil {
		return err
	}
	req := s.signRequest(remoting.NewRequest(int32(protocol.ReplicaSyncMeta),
		map[string]string{"brokerName": s.opts.BrokerName, "replicaId": strconv.FormatInt(r.regID.Load(), 10)}, body))
	ictx, cancel := context.WithTimeout(ctx, 3*time.Second)
	resp, err := r.client.Invoke(ictx, addr, req)
	cancel()
	if err == nil && resp.Code != int32(protocol.Success) {
		err = &protocol.Error{Code: protocol.ResponseCode(resp.Code), Remark: resp.Remark}
	}
	if err != nil {
		r.restoreDirtyOffsets(dirty)
		return err
	}
	var in protocol.ReplicaMeta
	if err := json.Unmarshal(resp.Body, &in); err != nil {
		r.restoreDirtyOffsets(dirty)
		return fmt.Errorf("master metadata: %w", err)
	}
	return r.applyMeta(&in, dirty)
}

// applyMeta makes the replica's metadata the master's. Offsets committed
// here since the last exchange never move back: they stay dirty until the
// master's value has caught up with them.
func (r *replication) applyMeta(in *protocol.ReplicaMeta, sent map[offsetKey]struct{}) error {
	s := r.s
	var errs []error
	if len(in.Topics) > 0 {
		var w protocol.TopicConfigSerializeWrapper
		if err := json.Unmarshal(in.Topics, &w); err != nil {
			errs = append(errs, fmt.Errorf("topics: %w", err))
		} else if w.DataVersion != r.metaVersions[0] {
			changed, err := s.topics.replaceAll(w)
			if err != nil {
				errs = append(errs, err)
			} else {
				r.metaVersions[0] = w.DataVersion
				if changed {
					s.topicsChanged()
				}
			}
		}
	}
	if len(in.Groups) > 0 {
		var w protocol.SubscriptionGroupWrapper
		if err := json.Unmarshal(in.Groups, &w); err != nil {
			errs = append(errs, fmt.Errorf("groups: %w", err))
		} else if w.DataVersion != r.metaVersions[1] {
			if err := s.groups.replaceAll(w); err != nil {
				errs = append(errs, err)
			} else {
				r.metaVersions[1] = w.DataVersion
			}
		}
	}
	if len(in.DelayOffsets) > 0 {
		if err := s.store.SaveMetadata(delayOffsetMetadata, in.DelayOffsets); err != nil {
			errs = append(errs, err)
		}
	}
	if len(in.Timers) > 0 {
		// The timer service reads it when this broker becomes master.
		if err := s.store.SaveMetadata(timerMetadata, in.Timers); err != nil {
			errs = append(errs, err)
		}
	}
	r.dirtyMu.Lock()
	for group, topics := range in.Offsets {
		for topic, queues := range topics {
			for q, off := range queues {
				k := offsetKey{group, topic, q}
				_, dirtyNow := r.dirtyOffsets[k]
				_, wasSent := sent[k]
				if cur, ok := s.store.QueryOffset(group, topic, q); (dirtyNow || wasSent) && ok && cur > off {
					// The master has not merged it yet: keep ours, send again.
					r.dirtyOffsets[k] = struct{}{}
					continue
				}
				s.store.CommitOffset(group, topic, q, off)
			}
		}
	}
	r.dirtyMu.Unlock()
	if len(in.Epochs) > 0 {
		r.mu.Lock()
		// Only a history that says the same of every record this broker
		// holds: an exchange can reach a new master before the HELLO that
		// cuts this broker's unacknowledged tail, and that master's history
		// would relabel the tail as its own epoch's, so the HELLO would keep
		// it (seed 61's divergence).
		if !r.state.Master && sameHistoryBelow(r.state.Epochs, in.Epochs, s.store.CommitLogMaxOffset()) {
			r.state.Epochs = in.Epochs
			r.noteEpochLocked()
			errs = append(errs, r.persistLocked())
		}
		r.mu.Unlock()
	}
	return errors.Join(errs...)
}

// sameHistoryBelow reports whether two epoch histories name the same
// epochs, starting at the same offsets, for the log below end.
func sameHistoryBelow(mine, theirs []protocol.EpochEntry, end int64) bool {
	below := func(h []protocol.EpochEntry) []protocol.EpochEntry {
		i := 0
		for i < len(h) && h[i].StartOffset < end {
			i++
		}
		return h[:i]
	}
	return slices.Equal(below(mine), below(theirs))
}

func (r *replication) takeDirtyOffsets() map[offsetKey]struct{} {
	r.dirtyMu.Lock()
	defer r.dirtyMu.Unlock()
	d := r.dirtyOffsets
	r.dirtyOffsets = map[offsetKey]struct{}{}
	return d
}

func (r *replication) restoreDirtyOffsets(d map[offsetKey]struct{}) {
	r.dirtyMu.Lock()
	defer r.dirtyMu.Unlock()
	for k := range d {
		r.dirtyOffsets[k] = struct{}{}
	}
}

// setNested sets m[group][topic][queue] = off, creating the maps.
func setNested(m *map[string]map[string]map[int32]int64, k offsetKey, off int64) {
	if *m == nil {
		*m = map[string]map[string]map[int32]int64{}
	}
	topics := (*m)[k.group]
	if topics == nil {
		topics = map[string]map[int32]int64{}
		(*m)[k.group] = topics
	}
	queues := topics[k.topic]
	if queues == nil {
		queues = map[int32]int64{}
		topics[k.topic] = queues
	}
	queues[k.queueID] = off
}

// addrList returns the name servers the broker registers with, sorted.
func (r *registrar) addrList() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(maps.Keys(r.peers))
}

// checkTruncation checks a master's HELLO answer against this broker's own
// log (its epoch history and end): a replica truncates only what the
// master's epoch history proves the group never acknowledged. The master
// must be at this broker's last epoch or later; for a truncation, at a
// later one (a master of the same epoch whose log ends earlier lost
// acknowledged data, and this broker holds it); the two histories must
// agree on every epoch both hold; and truncateTo must be exactly where the
// master's history says this broker's last epoch ended.
func checkTruncation(mine []protocol.EpochEntry, end int64, rh protocol.ReplicaHelloResponseHeader, theirs []protocol.EpochEntry) error {
	if end == 0 || len(mine) == 0 {
		return nil // nothing to lose
	}
	last := epochOf(mine, end)
	if rh.Epoch < last {
		return fmt.Errorf("the master is at epoch %d, older than this broker's last epoch %d", rh.Epoch, last)
	}
	if n := len(theirs); n == 0 || theirs[n-1].Epoch != rh.Epoch || rh.LogEnd < theirs[n-1].StartOffset {
		return fmt.Errorf("the master's epoch history %v does not end at its epoch %d and log end %d", theirs, rh.Epoch, rh.LogEnd)
	}
	starts := map[int64]int64{}
	for _, e := range theirs {
		starts[e.Epoch] = e.StartOffset
	}
	for _, e := range mine {
		if st, ok := starts[e.Epoch]; ok && st != e.StartOffset {
			return fmt.Errorf("epoch %d starts at %d here but at %d on the master: unrelated histories (a second process with this broker's name?)",
				e.Epoch, e.StartOffset, st)
		}
	}
	ended, covered := epochEnd(theirs, last, rh.LogEnd)
	if !covered {
		return fmt.Errorf("the master's history %v has no epoch up to this broker's last epoch %d: unrelated histories", theirs, last)
	}
	proven := min(end, ended)
	if rh.TruncateTo != proven {
		return fmt.Errorf("the master asks to keep %d bytes, its history proves %d", rh.TruncateTo, proven)
	}
	if proven < end && rh.Epoch == last {
		return fmt.Errorf("the master of this broker's own epoch %d ends at %d, before this broker's %d: it lost acknowledged data",
			last, proven, end)
	}
	return nil
}
