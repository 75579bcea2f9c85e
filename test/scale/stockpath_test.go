package scale

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/zonemq/zonemq/client"
	"github.com/zonemq/zonemq/internal/remoting"
)

// BenchmarkBrokerCPUPerSend is issue 25's "stock clients' path": a broker
// process, and a producer in this process sending 1 KiB messages with 64
// in flight — rocketmq-client-go (SendAsync), zonemq's SDK (SendAsync), or
// the SDK's SendSync from 64 goroutines sharing one producer (sdk-sync, the
// way most applications send) — for ZONEMQ_SCALE_SENDS messages (default
// 100 000). For each client
//
//	msg/s              the rate
//	broker-us/msg      the broker process's CPU per message (user + system, from /proc)
//	broker-reads/msg, broker-writes/msg   its read and write system calls per message
//	                   (/proc/PID/io: the bound a frame per message sets)
func BenchmarkBrokerCPUPerSend(b *testing.B) {
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("ZONEMQ_SCALE_SENDS")); err == nil && v > 0 {
		n = v
	}
	for _, c := range []string{"rocketmq-client-go", "sdk", "sdk-sync"} {
		b.Run("client="+c, func(b *testing.B) {
			for range b.N {
				cpuPerSendPoint(b, c, n)
			}
		})
	}
}

func cpuPerSendPoint(b *testing.B, which string, n int) {
	ns, br := startBroker(b)
	c := remoting.NewClient(remoting.ClientOptions{})
	b.Cleanup(func() { c.Close() })
	const topic = "CPUTopic"
	createTopics(b, c, br.addr, []string{topic})
	waitFor(b, "the topic routed", time.Minute, func() error { return routed(c, ns.addr, topic) })
	body := make([]byte, 1024)
	var send func(done func(error)) error
	var sendSync func() error // sdk-sync: 64 goroutines call it
	switch which {
	case "rocketmq-client-go":
		rlog.SetLogLevel("error")
		p, err := rocketmq.NewProducer(producer.WithGroupName("scale_pg"), producer.WithRetry(2),
			producer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.addr})))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Shutdown() })
		send = func(done func(error)) error {
			return p.SendAsync(context.Background(), func(_ context.Context, _ *primitive.SendResult, err error) { done(err) },
				primitive.NewMessage(topic, body))
		}
	default:
		p, err := client.NewProducer(client.ProducerConfig{ClientConfig: client.ClientConfig{NamesrvAddrs: []string{ns.addr},
			IDC: "idc1", AllowUnknownIDC: true}, Group: "scale_pg"})
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Shutdown(context.Background()) })
		send = func(done func(error)) error {
			return p.SendAsync(context.Background(), func(_ *client.SendResult, err error) { done(err) },
				&client.Message{Topic: topic, Body: body})
		}
		if which == "sdk-sync" {
			sendSync = func() error {
				_, err := p.SendSync(context.Background(), &client.Message{Topic: topic, Body: body})
				return err
			}
		}
	}
	run := func(count int) {
		if sendSync != nil {
			var next, failed atomic.Int64
			var wg sync.WaitGroup
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(count) {
						if err := sendSync(); err != nil {
							failed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d sends failed", f)
			}
			return
		}
		window := make(chan struct{}, 64)
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range count {
			window <- struct{}{}
			wg.Add(1)
			err := send(func(err error) {
				if err != nil {
					failed.Add(1)
				}
				<-window
				wg.Done()
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
		if f := failed.Load(); f > 0 {
			b.Fatalf("%d sends failed", f)
		}
	}
	run(2000) // warm up: routes, connections
	cpu, r0, w0 := br.cpu(), procIO(br, "syscr"), procIO(br, "syscw")
	began := time.Now()
	run(n)
	took := time.Since(began)
	report(b, "stock-path", 0, float64(n)/took.Seconds(), "msg/s")
	report(b, "stock-path", 0, float64((br.cpu()-cpu).Microseconds())/float64(n), "broker-us/msg")
	report(b, "stock-path", 0, float64(procIO(br, "syscr")-r0)/float64(n), "broker-reads/msg")
	report(b, "stock-path", 0, float64(procIO(br, "syscw")-w0)/float64(n), "broker-writes/msg")
}

// procIO reads one counter of /proc/PID/io.
func procIO(p *proc, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && k == field {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
