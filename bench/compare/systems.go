package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// system is one of the two brokers under comparison.
type system interface {
	name() string
	// start starts the server (fsync before every ack when syncEach) with
	// its data under dir and returns the process to measure and a client.
	start(c config, dir string, syncEach bool) (*server, systemClient, error)
	stop(*server)
}

// systemClient runs client processes against a started system.
type systemClient interface {
	publish(c config, inflight int, logPath string) (clientResult, time.Duration, error)
	consume(c config, logPath string) (clientResult, error)
}

// natsSystem is nats-server with JetStream, a file store.
type natsSystem struct{}

func (natsSystem) name() string { return "jetstream" }

func (natsSystem) start(c config, dir string, syncEach bool) (*server, systemClient, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	conf := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream {\n  store_dir: %q\n", port, filepath.Join(dir, "js"))
	if syncEach {
		conf += "  sync_interval: always\n"
	}
	conf += "}\n"
	confPath := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, nil, err
	}
	srv, err := startServer("nats-server", filepath.Join(dir, "nats-server.log"), "Server is ready", c.natsServer, "-c", confPath)
	if err != nil {
		return nil, nil, err
	}
	return srv, childClient{cmd: "nats-client", flag: "--url", addr: "nats://127.0.0.1:" + strconv.Itoa(port)}, nil
}

func (natsSystem) stop(s *server) { s.stop() }

// childClient runs one of this program's own client commands (`compare
// nats-client --url`, `compare rmq-client --namesrv`) against a server.
type childClient struct {
	cmd  string // nats-client or rmq-client
	flag string // the flag naming the server: --url or --namesrv
	addr string
}

func (k childClient) publish(c config, inflight int, logPath string) (clientResult, time.Duration, error) {
	var r clientResult
	cpu, err := runClient(logPath, &r, c.self, k.cmd, k.flag, k.addr, "--mode", "publish",
		"--inflight", strconv.Itoa(inflight), "--size", strconv.Itoa(c.size), "--duration", c.duration.String())
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

// zonemqNamesrv maps each started broker (the process measured) to its name
// server, stopped with it.
var zonemqNamesrv = map[*server]*server{}

// zonemqNamesrvAddr is each started broker's name server address.
var zonemqNamesrvAddr = map[*server]string{}

func (z zonemqSystem) start(c config, dir string, syncEach bool) (*server, systemClient, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	nsPort, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	brPort, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	nsAddr := "127.0.0.1:" + strconv.Itoa(nsPort)
	ns, err := startServer("zonemq namesrv", filepath.Join(dir, "namesrv.log"), "namesrv listening", z.bin,
		"namesrv", "--listen", nsAddr, "--idc", "idc1", "--kv-config", "")
	if err != nil {
		return nil, nil, err
	}
	flush := "async"
	if syncEach {
		flush = "sync"
	}
	// Ready once the name server routes it, not when it listens: a client
	// started in between finds no broker to create the topic on.
	br, err := startServer("zonemq broker", filepath.Join(dir, "broker.log"), "registered with name server", z.bin,
		"broker", "--listen", "127.0.0.1:"+strconv.Itoa(brPort), "--idc", "idc1", "--name", "bench-broker",
		"--data", filepath.Join(dir, "data"), "--namesrv", nsAddr, "--flush", flush)
	if err != nil {
		ns.stop()
		return nil, nil, err
	}
	zonemqNamesrv[br] = ns
	zonemqNamesrvAddr[br] = nsAddr
	if z.rmq {
		return br, childClient{cmd: "rmq-client", flag: "--namesrv", addr: nsAddr}, nil
	}
	return br, zonemqClient{bin: z.bin, namesrv: nsAddr}, nil
}

func (zonemqSystem) stop(s *server) {
	s.stop()
	zonemqNamesrv[s].stop()
	delete(zonemqNamesrv, s)
	delete(zonemqNamesrvAddr, s)
}

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

func (z zonemqClient) publish(c config, inflight int, logPath string) (clientResult, time.Duration, error) {
	args := []string{"bench", "--namesrv", z.namesrv, "--idc", "idc1", "--topic", "BenchTopic", "--mode", "send",
		"--size", strconv.Itoa(c.size), "--duration", c.duration.String(), "--output", "json", "--log-level", "error"}
	if inflight > 1 {
		args = append(args, "--inflight", strconv.Itoa(inflight))
	} else {
		args = append(args, "--producers", "1")
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
