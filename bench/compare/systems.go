package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// system is one of the two brokers under comparison.
type system interface {
	name() string
	// start starts the server as setup says with its data under dir and
	// returns the process to measure and a client.
	start(c config, dir string, s setup) (*server, systemClient, error)
	stop(*server)
}

// setup is how a system's servers are started for a case.
type setup int

const (
	setupPlain      setup = iota // one server, its default flushing
	setupFsync                   // one server, fsync before every ack
	setupReplicated              // three copies on three servers, acknowledged once every copy holds it
)

// publishLoad is how a publish case sends: inflight asynchronous
// publishes, or (inflight 1) senders goroutines publishing synchronously,
// sharing one client.
type publishLoad struct{ inflight, senders int }

// systemClient runs client processes against a started system.
type systemClient interface {
	publish(c config, load publishLoad, logPath string) (clientResult, time.Duration, error)
	consume(c config, logPath string) (clientResult, error)
}

// companions are the processes started with a measured server (a zonemq
// broker's name server and replicas, a JetStream cluster's other nodes),
// stopped with it.
var companions = map[*server][]*server{}

// stopWithCompanions stops s, then the processes started with it.
func stopWithCompanions(s *server) {
	s.stop()
	for _, o := range companions[s] {
		o.stop()
	}
	delete(companions, s)
}

// natsSystem is nats-server with JetStream, a file store.
type natsSystem struct{}

func (natsSystem) name() string { return "jetstream" }

func (natsSystem) start(c config, dir string, st setup) (*server, systemClient, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	nodes := 1
	if st == setupReplicated {
		nodes = 3
	}
	ports, err := freePorts(2 * nodes)
	if err != nil {
		return nil, nil, err
	}
	var routes []string
	for i := range nodes {
		routes = append(routes, fmt.Sprintf("\"nats-route://127.0.0.1:%d\"", ports[nodes+i]))
	}
	var srvs []*server
	var urls []string
	for i := range nodes {
		conf := fmt.Sprintf("server_name: n%d\nlisten: \"127.0.0.1:%d\"\njetstream {\n  store_dir: %q\n", i+1, ports[i],
			filepath.Join(dir, fmt.Sprintf("js%d", i+1)))
		if st == setupFsync {
			conf += "  sync_interval: always\n"
		}
		conf += "}\n"
		if nodes > 1 {
			conf += fmt.Sprintf("cluster {\n  name: bench\n  listen: \"127.0.0.1:%d\"\n  routes: [%s]\n}\n", ports[nodes+i],
				strings.Join(routes, ", "))
		}
		confPath := filepath.Join(dir, fmt.Sprintf("nats%d.conf", i+1))
		if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
			return nil, nil, err
		}
		srv, err := startServer("nats-server", filepath.Join(dir, fmt.Sprintf("nats-server%d.log", i+1)), "Server is ready",
			c.natsServer, "-c", confPath)
		if err != nil {
			for _, s := range srvs {
				s.stop()
			}
			return nil, nil, err
		}
		srvs = append(srvs, srv)
		urls = append(urls, "nats://127.0.0.1:"+strconv.Itoa(ports[i]))
	}
	companions[srvs[0]] = srvs[1:]
	return srvs[0], childClient{cmd: "nats-client", flag: "--url", addr: strings.Join(urls, ","),
		extra: []string{"--replicas", strconv.Itoa(nodes)}}, nil
}

func (natsSystem) stop(s *server) { stopWithCompanions(s) }

// childClient runs one of this program's own client commands (`compare
// nats-client --url`, `compare rmq-client --namesrv`) against a server.
type childClient struct {
	cmd   string // nats-client or rmq-client
	flag  string // the flag naming the server: --url or --namesrv
	addr  string
	extra []string // more flags for publishing
}

func (k childClient) publish(c config, load publishLoad, logPath string) (clientResult, time.Duration, error) {
	var r clientResult
	args := append([]string{k.cmd, k.flag, k.addr, "--mode", "publish", "--inflight", strconv.Itoa(load.inflight),
		"--senders", strconv.Itoa(load.senders), "--size", strconv.Itoa(c.size), "--duration", c.duration.String()}, k.extra...)
	cpu, err := runClient(logPath, &r, c.self, args...)
	return r, cpu, err
}

func (k childClient) consume(c config, logPath string) (clientResult, error) {
	var r clientResult
	_, err := runClient(logPath, &r, c.self, k.cmd, k.flag, k.addr, "--mode", "consume")
	return r, err
}

// zonemqSystem is a zonemq name server and broker, the client `zonemq bench`
// (the public SDK), all from one binary.
type zonemqSystem struct {
	label, bin string
	// rmq: the client processes use the stock rocketmq-client-go
	// (`compare rmq-client`) instead of `zonemq bench`.
	rmq bool
}

func (z zonemqSystem) name() string { return z.label }

func (z zonemqSystem) start(c config, dir string, st setup) (*server, systemClient, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	copies := 1
	if st == setupReplicated {
		copies = 3
	}
	ports, err := freePorts(1 + copies)
	if err != nil {
		return nil, nil, err
	}
	nsAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	ns, err := startServer("zonemq namesrv", filepath.Join(dir, "namesrv.log"), "namesrv listening", z.bin,
		"namesrv", "--listen", nsAddr, "--idc", "idc1", "--kv-config", "")
	if err != nil {
		return nil, nil, err
	}
	flush, replication := "async", "async"
	if st == setupFsync {
		flush = "sync"
	}
	if st == setupReplicated {
		replication = "sync"
	}
	// Ready once the name server routes it, not when it listens: a client
	// started in between finds no broker to create the topic on.
	brokerLog := filepath.Join(dir, "broker.log")
	br, err := startServer("zonemq broker", brokerLog, "registered with name server", z.bin,
		"broker", "--listen", "127.0.0.1:"+strconv.Itoa(ports[1]), "--idc", "idc1", "--name", "bench-broker",
		"--data", filepath.Join(dir, "data"), "--namesrv", nsAddr, "--flush", flush, "--replication", replication)
	if err != nil {
		ns.stop()
		return nil, nil, err
	}
	companions[br] = []*server{ns}
	// Replicas in idc2, idc3, ...: ready once the master counts every one
	// in sync, so that each send waits for all three copies.
	for i := 1; i < copies; i++ {
		r, err := startServer("zonemq replica", filepath.Join(dir, fmt.Sprintf("replica%d.log", i)), "following the master", z.bin,
			"broker", "--listen", "127.0.0.1:"+strconv.Itoa(ports[1+i]), "--idc", fmt.Sprintf("idc%d", i+1), "--name", "bench-broker",
			"--id", strconv.Itoa(i), "--data", filepath.Join(dir, fmt.Sprintf("data%d", i)), "--namesrv", nsAddr, "--flush", flush)
		if err != nil {
			stopWithCompanions(br)
			return nil, nil, err
		}
		companions[br] = append(companions[br], r)
	}
	if err := waitLogCount(brokerLog, "replica joined the in-sync set", copies-1, 30*time.Second); err != nil {
		stopWithCompanions(br)
		return nil, nil, err
	}
	if z.rmq {
		return br, childClient{cmd: "rmq-client", flag: "--namesrv", addr: nsAddr}, nil
	}
	return br, zonemqClient{bin: z.bin, namesrv: nsAddr}, nil
}

func (zonemqSystem) stop(s *server) { stopWithCompanions(s) }

type zonemqClient struct{ bin, namesrv string }

// benchJSON is the part of `zonemq bench --output json` read here.
type benchJSON struct {
	Send *struct {
		Messages   int64   `json:"messages"`
		Errors     int64   `json:"errors"`
		Seconds    float64 `json:"seconds"`
		MsgsPerSec float64 `json:"msgsPerSec"`
		Latency    struct {
			P50  float64 `json:"p50"`
			P99  float64 `json:"p99"`
			P999 float64 `json:"p999"` // zonemq bench from this change on
			Max  float64 `json:"max"`
		} `json:"latencyMs"`
	} `json:"send"`
	Consume *struct {
		Messages   int64   `json:"messages"`
		Seconds    float64 `json:"seconds"`
		MsgsPerSec float64 `json:"msgsPerSec"`
	} `json:"consume"`
}

func (z zonemqClient) publish(c config, load publishLoad, logPath string) (clientResult, time.Duration, error) {
	args := []string{"bench", "--namesrv", z.namesrv, "--idc", "idc1", "--topic", "BenchTopic", "--mode", "send",
		"--size", strconv.Itoa(c.size), "--duration", c.duration.String(), "--output", "json", "--log-level", "error"}
	if load.inflight > 1 {
		args = append(args, "--inflight", strconv.Itoa(load.inflight))
	} else {
		args = append(args, "--producers", strconv.Itoa(max(load.senders, 1)))
	}
	var b benchJSON
	cpu, err := runClient(logPath, &b, z.bin, args...)
	if err != nil {
		return clientResult{}, cpu, err
	}
	if b.Send == nil {
		return clientResult{}, cpu, fmt.Errorf("zonemq bench reported no send section")
	}
	return clientResult{Messages: b.Send.Messages, Seconds: b.Send.Seconds, MsgsPerSec: b.Send.MsgsPerSec, P99Ms: b.Send.Latency.P99}, cpu, nil
}

func (z zonemqClient) consume(c config, logPath string) (clientResult, error) {
	var b benchJSON
	_, err := runClient(logPath, &b, z.bin, "bench", "--namesrv", z.namesrv, "--idc", "idc1", "--topic", "BenchTopic",
		"--mode", "consume", "--idle", "3s", "--duration", "2m", "--output", "json", "--log-level", "error")
	if err != nil {
		return clientResult{}, err
	}
	if b.Consume == nil {
		return clientResult{}, fmt.Errorf("zonemq bench reported no consume section")
	}
	return clientResult{Messages: b.Consume.Messages, Seconds: b.Consume.Seconds, MsgsPerSec: b.Consume.MsgsPerSec}, nil
}
