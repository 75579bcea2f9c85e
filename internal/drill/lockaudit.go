package drill

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
)

// drillOrderlyGroup is the orderly consumer group the lock audit watches:
// one SDK consumer per IDC, in the drill process, reading the drill topic
// in order (the ledger's consumers are not orderly; these only ack).
const drillOrderlyGroup = "zonemq_drill_orderly_cg"

// lockAuditEvery is how often every broker's lock table is read.
const lockAuditEvery = 100 * time.Millisecond

// lockAudit judges queue ownership from the brokers, not the clients: an
// orderly consumer group runs in every IDC, and every broker's lock table
// for it (ZONEMQ_QUERY_QUEUE_LOCKS) is read every lockAuditEvery, each from
// inside the broker's own IDC, so a partition never hides a broker from its
// reader. A round is the tables read at about the same time; a queue (topic,
// broker name, queue id) held in one round by two clients, or on two
// brokers serving that broker name (master and replica of a replicated
// group both granting it, or two masters), is a conflict.
type lockAudit struct {
	consumers []*client.PushConsumer
	admins    []*admin.Client
	brokers   [][]string // per IDC, the broker addresses read through admins[k]
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	mu     sync.Mutex
	rounds []lockRound
}

// lockRound is one read of every broker's lock table.
type lockRound struct {
	at     time.Time
	owners map[client.MessageQueue]map[string]bool // queue → "client on master|replica broker" seen anywhere
	failed int                                     // brokers that did not answer
}

// startLockAudit starts the orderly consumers and the sampler.
func startLockAudit(ctx context.Context, c *cluster, logger *slog.Logger) (*lockAudit, error) {
	a := &lockAudit{}
	for _, i := range c.idcs {
		cc := clientConfig(i, logger)
		pc, err := client.NewPushConsumer(client.ConsumerConfig{ClientConfig: cc, Group: drillOrderlyGroup, Orderly: true})
		if err != nil {
			return nil, err
		}
		if err := pc.Subscribe(drillTopic, "*", func(context.Context, []*client.MessageExt) client.ConsumeResult {
			return client.ConsumeSuccess
		}); err != nil {
			return nil, err
		}
		if err := pc.Start(ctx); err != nil {
			a.close(ctx)
			return nil, fmt.Errorf("start %s orderly consumer: %w", i.name, err)
		}
		a.consumers = append(a.consumers, pc)
		adm, err := admin.New(admin.Config{ClientConfig: cc})
		if err != nil {
			a.close(ctx)
			return nil, err
		}
		if err := adm.Start(ctx); err != nil {
			a.close(ctx)
			return nil, fmt.Errorf("start %s lock reader: %w", i.name, err)
		}
		a.admins = append(a.admins, adm)
		var addrs []string
		for _, b := range append([]*proc{i.broker}, i.replicas...) {
			addrs = append(addrs, b.addr)
		}
		a.brokers = append(a.brokers, addrs)
	}
	sctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	a.wg.Add(1)
	go a.sample(sctx)
	return a, nil
}

// sample reads every broker's table every lockAuditEvery until ctx ends.
func (a *lockAudit) sample(ctx context.Context) {
	defer a.wg.Done()
	t := time.NewTicker(lockAuditEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r := lockRound{at: time.Now(), owners: map[client.MessageQueue]map[string]bool{}}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for k, adm := range a.admins {
			for _, addr := range a.brokers[k] {
				wg.Add(1)
				go func() {
					defer wg.Done()
					qctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
					table, err := adm.QueueLocks(qctx, addr, drillOrderlyGroup)
					cancel()
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						r.failed++
						return
					}
					role := "master"
					if !table.Master {
						role = "replica"
					}
					for _, l := range table.Locks {
						if r.owners[l.Queue] == nil {
							r.owners[l.Queue] = map[string]bool{}
						}
						r.owners[l.Queue][l.ClientID+" on "+role+" "+addr] = true
					}
				}()
			}
		}
		wg.Wait()
		a.mu.Lock()
		a.rounds = append(a.rounds, r)
		a.mu.Unlock()
	}
}

// LockAudit is what the lock audit saw of the orderly group's queue locks
// in a network scenario's window (from the cut to the end of the phase
// after the heal), read from every broker's lock table.
type LockAudit struct {
	// Rounds is how many times every broker's table was read.
	Rounds int `json:"rounds"`
	// Unread counts broker reads that got no answer.
	Unread int `json:"unread"`
	// Conflicts counts rounds in which a queue was held by two clients at
	// once (must be 0).
	Conflicts int `json:"conflicts"`
	// Changes counts hand-overs: a queue's owner differing from the owner
	// the previous round saw.
	Changes int `json:"ownerChanges"`
	// MaxLocked and EndLocked are the most queues locked in one round and
	// the number locked in the window's last round.
	MaxLocked int `json:"maxLocked"`
	EndLocked int `json:"endLocked"`
	// Example describes the first conflict, if any.
	Example string `json:"example,omitempty"`
}

// String is the audit as one line for the report's notes.
func (s LockAudit) String() string {
	line := fmt.Sprintf("lock tables read %d times (%d reads unanswered): %d rounds with a queue of two owners, "+
		"%d owner changes, up to %d queues locked, %d at the end", s.Rounds, s.Unread, s.Conflicts, s.Changes, s.MaxLocked, s.EndLocked)
	if s.Example != "" {
		line += "; first conflict: " + s.Example
	}
	return line
}

// summary judges the rounds between from and to.
func (a *lockAudit) summary(from, to time.Time) LockAudit {
	a.mu.Lock()
	defer a.mu.Unlock()
	var s LockAudit
	last := map[client.MessageQueue]string{}
	for _, r := range a.rounds {
		if r.at.Before(from) || r.at.After(to) {
			continue
		}
		s.Rounds++
		s.Unread += r.failed
		s.MaxLocked = max(s.MaxLocked, len(r.owners))
		s.EndLocked = len(r.owners)
		conflict := false
		for mq, owners := range r.owners {
			if len(owners) > 1 {
				conflict = true
				if s.Example == "" {
					s.Example = fmt.Sprintf("%v held by %s at %s", mq, strings.Join(slices.Sorted(maps.Keys(owners)), " and "),
						r.at.Format("15:04:05.000"))
				}
				continue
			}
			for o := range owners {
				if prev, ok := last[mq]; ok && prev != o {
					s.Changes++
				}
				last[mq] = o
			}
		}
		if conflict {
			s.Conflicts++
		}
	}
	return s
}

// close stops the sampler and the clients.
func (a *lockAudit) close(ctx context.Context) {
	if a == nil {
		return
	}
	if a.cancel != nil {
		a.cancel()
	}
	a.wg.Wait()
	for _, pc := range a.consumers {
		pc.Shutdown(ctx)
	}
	for _, adm := range a.admins {
		adm.Shutdown(ctx)
	}
}
