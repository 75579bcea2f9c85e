package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
)

// results holds every round's figure per system and case.
type results struct {
	values map[string]map[string][]float64 // system → case → one value per round
}

func newResults() *results { return &results{values: map[string]map[string][]float64{}} }

func (r *results) add(sys, key string, v float64) {
	if r.values[sys] == nil {
		r.values[sys] = map[string][]float64{}
	}
	r.values[sys][key] = append(r.values[sys][key], v)
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// cell renders the median and the range of vs.
func cell(vs []float64, unit string, scale float64, prec int) string {
	if len(vs) == 0 {
		return "—"
	}
	f := func(v float64) string { return strings.TrimSpace(fmt.Sprintf("%.*f", prec, v*scale)) }
	return fmt.Sprintf("%s%s (%s–%s)", f(median(vs)), unit, f(slices.Min(vs)), f(slices.Max(vs)))
}

// print writes the table: medians with ranges, and each zonemq column's
// ratio to JetStream (above 1 is better for zonemq in every row but the CPU
// and latency rows, where below 1 is).
func (r *results) print(w io.Writer, c config) {
	js, zm, before, rmq := r.values["jetstream"], r.values["zonemq"], r.values["zonemq-before"], r.values["zonemq-rmq"]
	fmt.Fprintf(w, "%d rounds, interleaved; %d-byte bodies; %s of publishing per case; GOMAXPROCS %d; median (min–max)\n\n",
		c.rounds, c.size, c.duration, runtime.GOMAXPROCS(0))
	type column struct {
		title string
		vals  map[string][]float64
		ratio string // title of its ratio column; "" for JetStream
	}
	cols := []column{{"JetStream", js, ""}}
	if before != nil {
		cols = append(cols, column{"zonemq before", before, "before ÷ JetStream"})
	}
	cols = append(cols, column{"zonemq, our SDK (`zonemq bench`)", zm, "zonemq ÷ JetStream"})
	if rmq != nil {
		cols = append(cols, column{"zonemq, rocketmq-client-go", rmq, "rocketmq-client-go ÷ JetStream"})
	}
	head, rule := "| case |", "|---|"
	for _, col := range cols {
		head += " " + col.title + " |"
		rule += "---|"
	}
	for _, col := range cols[1:] {
		head += " " + col.ratio + " |"
		rule += "---|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, rule)
	rows := []struct {
		label, key, unit string
		scale            float64
		prec             int
	}{
		{fmt.Sprintf("publish, async, %d in flight, msg/s", c.inflight), "async", " k", 1e-3, 1},
		{"ack p99 at that load, ms", "p99", "", 1, 1},
		{"1 in flight, msg/s", "one", " k", 1e-3, 2},
		{fmt.Sprintf("%d senders, synchronous, one client, msg/s", c.senders), "senders", " k", 1e-3, 2},
		{"fsync before ack (JetStream `sync_interval: always`), msg/s", "fsync", " k", 1e-3, 2},
		{"consume, msg/s", "consume", " k", 1e-3, 1},
		{fmt.Sprintf("3 copies (zonemq `--replication sync`, 2 replicas; JetStream R3 on 3 nodes), %d in flight, msg/s", c.inflight), "replicated", " k", 1e-3, 1},
		{"ack p99 with 3 copies, ms", "replicatedP99", "", 1, 1},
		{"broker CPU per 100 k published, s", "serverCPU", "", 0.1, 2},
		{"client CPU per 100 k published, s", "clientCPU", "", 0.1, 2},
	}
	ratio := func(a, b []float64) string {
		if ma, mb := median(a), median(b); ma > 0 && mb > 0 {
			return fmt.Sprintf("%.2f×", mb/ma)
		}
		return "—"
	}
	for _, row := range rows {
		line := "| " + row.label + " |"
		for _, col := range cols {
			line += " " + cell(col.vals[row.key], row.unit, row.scale, row.prec) + " |"
		}
		for _, col := range cols[1:] {
			line += " " + ratio(js[row.key], col.vals[row.key]) + " |"
		}
		fmt.Fprintln(w, line)
	}
	if before != nil {
		fmt.Fprintf(w, "\nzonemq before, CPU per published message (µs): broker %.1f, client %.1f\n",
			median(before["serverCPU"]), median(before["clientCPU"]))
	}
	fmt.Fprintf(w, "\nCPU per published message at %d in flight (µs, from /proc): broker %.1f vs nats-server %.1f; client %.1f vs nats.go %.1f\n",
		c.inflight, median(zm["serverCPU"]), median(js["serverCPU"]), median(zm["clientCPU"]), median(js["clientCPU"]))
	if rmq != nil {
		b, cl := median(rmq["serverCPU"]), median(rmq["clientCPU"])
		share := 0.0
		if b+cl > 0 {
			share = 100 * b / (b + cl)
		}
		fmt.Fprintf(w, "With rocketmq-client-go at %d in flight: broker %.1f µs and client %.1f µs of CPU per message; the broker's share %.0f %%\n",
			c.inflight, b, cl, share)
	}
}
