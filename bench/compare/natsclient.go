package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// clientResult is what one client process reports on stdout, as JSON: the
// same fields are read out of `zonemq bench --output json`.
type clientResult struct {
	Messages   int64   `json:"messages"`
	Seconds    float64 `json:"seconds"`
	MsgsPerSec float64 `json:"msgsPerSec"`
	P99Ms      float64 `json:"p99Ms"`
}

const (
	natsStream  = "BENCH"
	natsSubject = "bench.msgs"
)

// runNatsClient is the JetStream side's client process: it publishes
// (--inflight 1: synchronously; more: PublishAsync with that many acks
// pending) or consumes the whole stream with an ordered consumer.
func runNatsClient(args []string, stdout io.Writer) error {
	f, err := parseClientFlags("nats-client", "url", "NATS server URL", args)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(f.addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	// The publisher's own window bounds what is pending; the library's
	// limit only has to stay out of its way (past it, PublishAsync stalls
	// and then fails).
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(max(f.inflight, 1)+16))
	if err != nil {
		return err
	}
	ctx := context.Background()
	var res clientResult
	switch f.mode {
	case "publish":
		// A cluster that just started takes a moment to elect its
		// JetStream meta leader: retry for a while.
		for deadline := time.Now().Add(30 * time.Second); ; {
			_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
				Name: natsStream, Subjects: []string{natsSubject}, Storage: jetstream.FileStorage, Replicas: max(f.replicas, 1),
			})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("creating the stream: %w", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		body := make([]byte, f.size)
		for i := range body {
			body[i] = byte(rand.Uint32())
		}
		if f.inflight <= 1 {
			res, err = syncSenders(max(f.senders, 1), f.duration, func() error {
				_, err := js.Publish(ctx, natsSubject, body)
				return err
			})
		} else {
			res, err = natsPublishAsync(js, body, f.inflight, f.duration)
		}
	case "consume":
		res, err = natsConsume(ctx, js, f.idle)
	default:
		err = fmt.Errorf("unknown --mode %q", f.mode)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(res)
}

// syncSenders runs senders goroutines, each calling send and waiting for
// it, one after the other, for d: the way most applications publish.
func syncSenders(senders int, d time.Duration, send func() error) (clientResult, error) {
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Since(start) < d {
				t := time.Now()
				if err := send(); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					break
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return clientResult{}, firstErr
	}
	return summarize(lat, time.Since(start)), nil
}

// natsPublishAsync keeps inflight publishes pending; a collector waits for
// the acks in publish order (JetStream acks in order) and frees the window.
func natsPublishAsync(js jetstream.JetStream, body []byte, inflight int, d time.Duration) (clientResult, error) {
	type pending struct {
		f     jetstream.PubAckFuture
		start time.Time
	}
	// The collector holds one more than the channel: inflight in all.
	window := make(chan pending, max(inflight-1, 1))
	var lat []time.Duration
	collected := make(chan error, 1)
	go func() {
		for p := range window {
			select {
			case <-p.f.Ok():
				lat = append(lat, time.Since(p.start))
			case err := <-p.f.Err():
				collected <- err
				for range window {
				}
				return
			}
		}
		collected <- nil
	}()
	start := time.Now()
	var err error
	for time.Since(start) < d {
		t := time.Now()
		var f jetstream.PubAckFuture
		if f, err = js.PublishAsync(natsSubject, body); err != nil {
			break
		}
		window <- pending{f: f, start: t}
	}
	close(window)
	if cerr := <-collected; err == nil {
		err = cerr
	}
	if err != nil {
		return clientResult{}, err
	}
	return summarize(lat, time.Since(start)), nil
}

func natsConsume(ctx context.Context, js jetstream.JetStream, idle time.Duration) (clientResult, error) {
	stream, err := js.Stream(ctx, natsStream)
	if err != nil {
		return clientResult{}, err
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return clientResult{}, err
	}
	want := int64(info.State.Msgs)
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return clientResult{}, err
	}
	it, err := cons.Messages()
	if err != nil {
		return clientResult{}, err
	}
	defer it.Stop()
	var n int64
	var first, last time.Time
	for n < want {
		msg, err := it.Next(jetstream.NextMaxWait(idle))
		if err != nil {
			break
		}
		_ = msg.Data()
		last = time.Now()
		if n == 0 {
			first = last
		}
		n++
	}
	res := clientResult{Messages: n}
	if secs := last.Sub(first).Seconds(); secs > 0 {
		res.Seconds = secs
		res.MsgsPerSec = float64(n) / secs
	}
	return res, nil
}

func summarize(lat []time.Duration, took time.Duration) clientResult {
	res := clientResult{Messages: int64(len(lat)), Seconds: took.Seconds()}
	res.MsgsPerSec = float64(len(lat)) / took.Seconds()
	if len(lat) > 0 {
		slices.Sort(lat)
		res.P99Ms = float64(lat[(len(lat)*99)/100]) / 1e6
	}
	return res
}
