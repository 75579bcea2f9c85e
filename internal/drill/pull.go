package drill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/client/admin"
	"github.com/zonemq/zonemq/internal/ledger"
)

// The pull workload (issue 23: "SDK producers and consumers, push and
// pull"): in a chaos campaign, one producer sends to a topic of its own and
// the SDK's PullConsumer reads every queue of it at offsets it keeps itself
// — no rebalancing, no automatic commit, as an application that manages
// its own positions does — committing them now and then. It runs in the
// drill process, in the last IDC, knowing every IDC's address server.
const (
	pullTopic    = "ZonemqDrillPull"
	pullGroup    = "zonemq_drill_pull_cg"
	pullProducer = "zonemq_drill_pull_pg"
	pullQueues   = 2
	// pullEvery is the pause between two passes over the queues, and
	// pullRefresh how often the queue list is read again.
	pullEvery   = 100 * time.Millisecond
	pullRefresh = 3 * time.Second
	pullCommit  = 2 * time.Second
)

// pullWork is the pull workload's producer and consumer.
type pullWork struct {
	idc      string
	producer *client.Producer
	consumer *client.PullConsumer

	mu     sync.Mutex
	acks   []ledger.Ack
	recvs  []ledger.Consumption
	failed []string // keys of sends that failed (they may be stored)

	stopSend context.CancelFunc
	stopPull context.CancelFunc
	sendWG   sync.WaitGroup
	pullWG   sync.WaitGroup
}

// startPull creates the pull topic on every group and starts the consumer
// and the producer.
func startPull(ctx context.Context, c *cluster, interval time.Duration, logger *slog.Logger) (*pullWork, error) {
	home := c.idcs[len(c.idcs)-1]
	cfg := client.ClientConfig{IDC: home.name, LocalIP: home.ip, Dial: home.dial, Logger: logger.With("client", "pull")}
	cfg.AddrsrvURLs = append(cfg.AddrsrvURLs, home.addrsrvs...)
	err := withAdmin(ctx, cfg, "creating the pull topic", func(adm *admin.Client) error {
		return adm.CreateTopic(ctx, admin.TopicSpec{Topic: pullTopic, Queues: pullQueues})
	})
	if err != nil {
		return nil, err
	}
	w := &pullWork{idc: home.name}
	if w.consumer, err = client.NewPullConsumer(client.PullConsumerConfig{ClientConfig: cfg, Group: pullGroup}); err != nil {
		return nil, err
	}
	if err := w.consumer.Start(ctx); err != nil {
		return nil, fmt.Errorf("drill: starting the pull consumer: %w", err)
	}
	if w.producer, err = startProducer(ctx, cfg, pullProducer, "pull"); err != nil {
		w.consumer.Shutdown(context.Background())
		return nil, err
	}
	pullCtx, stopPull := context.WithCancel(context.Background())
	sendCtx, stopSend := context.WithCancel(context.Background())
	w.stopPull, w.stopSend = stopPull, stopSend
	w.pullWG.Add(1)
	go w.pullLoop(pullCtx)
	w.sendWG.Add(1)
	go w.sendLoop(sendCtx, interval)
	return w, nil
}

// sendLoop sends one message per interval, each with a key of its own.
func (w *pullWork) sendLoop(ctx context.Context, interval time.Duration) {
	defer w.sendWG.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		key := fmt.Sprintf("pull-%d", n)
		start := time.Now()
		res, err := w.producer.SendSync(context.Background(), &client.Message{Topic: pullTopic, Keys: []string{key}, Body: []byte(key)})
		end := time.Now()
		w.mu.Lock()
		if err != nil || res.Status != client.SendOK {
			w.failed = append(w.failed, key)
		} else {
			w.acks = append(w.acks, ackOf(key, "", res, start, end))
		}
		w.mu.Unlock()
	}
}

// pullLoop reads every queue from the group's committed offset (the first
// time it sees the queue) or where its last pull ended, and commits its
// positions every pullCommit. Errors — a broker down, a route gone stale —
// leave the position as it was: the next pass tries again.
func (w *pullWork) pullLoop(ctx context.Context) {
	defer w.pullWG.Done()
	pos := map[client.MessageQueue]int64{}
	var queues []client.MessageQueue
	var listed, committed time.Time
	for ctx.Err() == nil {
		if time.Since(listed) > pullRefresh {
			if qs, err := w.consumer.FetchQueues(ctx, pullTopic); err == nil {
				queues, listed = qs, time.Now()
			}
		}
		for _, mq := range queues {
			if ctx.Err() != nil {
				return
			}
			off, known := pos[mq]
			if !known {
				c, err := w.consumer.QueryOffset(ctx, mq)
				switch {
				case errors.Is(err, client.ErrNoOffset):
					c = 0 // a new group reads from the first message
				case err != nil:
					continue
				}
				off = c
			}
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			res, err := w.consumer.Pull(pctx, mq, off, 32)
			cancel()
			if err != nil {
				pos[mq] = off
				continue
			}
			now := time.Now()
			if res.Status == client.PullFound {
				w.mu.Lock()
				for _, m := range res.Messages {
					if len(m.Keys) > 0 {
						w.recvs = append(w.recvs, ledger.Consumption{Key: m.Keys[0], Consumer: w.idc + "/pull",
							Group: m.BrokerName, Queue: m.QueueID, Offset: m.QueueOffset, At: now})
					}
				}
				w.mu.Unlock()
			}
			// A position past the queue's end (a replica that is behind)
			// is kept: the queue grows to it. One below its start moves up.
			if res.Status == client.PullFound || res.Status == client.PullNoMatchedMsg ||
				(res.Status == client.PullOffsetIllegal && res.NextBeginOffset > off) {
				off = res.NextBeginOffset
			}
			pos[mq] = off
		}
		if time.Since(committed) > pullCommit {
			for mq, off := range pos {
				cctx, cancel := context.WithTimeout(ctx, time.Second)
				w.consumer.CommitOffset(cctx, mq, off) // best effort: a failed one is sent again next time
				cancel()
			}
			committed = time.Now()
		}
		if err := sleepCtx(ctx, pullEvery); err != nil {
			return
		}
	}
}

// snapshot copies the records.
func (w *pullWork) snapshot() ([]ledger.Ack, []ledger.Consumption, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]ledger.Ack(nil), w.acks...), append([]ledger.Consumption(nil), w.recvs...), append([]string(nil), w.failed...)
}

// unconsumed counts acknowledged messages not pulled yet.
func (w *pullWork) unconsumed() int {
	if w == nil {
		return 0
	}
	acks, recvs, _ := w.snapshot()
	return undelivered(acks, recvs)
}

func (w *pullWork) stopSending() {
	if w != nil {
		w.stopSend()
		w.sendWG.Wait()
	}
}

func (w *pullWork) close(ctx context.Context) {
	if w == nil {
		return
	}
	w.stopSending()
	w.stopPull()
	w.pullWG.Wait()
	w.producer.Shutdown(ctx)
	w.consumer.Shutdown(ctx)
}
