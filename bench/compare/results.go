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

// print writes the table: medians with ranges, and zonemq's ratio to
// JetStream (above 1 is better for zonemq in every row but the CPU and
// latency rows, where below 1 is).
func (r *results) print(w io.Writer, c config) {
	js, zm, before := r.values["jetstream"], r.values["zonemq"], r.values["zonemq-before"]
	fmt.Fprintf(w, "%d rounds, interleaved; %d-byte bodies; %s of publishing per case; GOMAXPROCS %d; median (min–max)\n\n",
		c.rounds, c.size, c.duration, runtime.GOMAXPROCS(0))
	if before != nil {
		fmt.Fprintln(w, "| case | JetStream | zonemq before | zonemq, our SDK (`zonemq bench`) | before ÷ JetStream | zonemq ÷ JetStream |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|")
	} else {
		fmt.Fprintln(w, "| case | JetStream | zonemq, our SDK (`zonemq bench`) | zonemq ÷ JetStream |")
		fmt.Fprintln(w, "|---|---|---|---|")
	}
	rows := []struct {
		label, key, unit string
		scale            float64
		prec             int
	}{
		{fmt.Sprintf("publish, async, %d in flight, msg/s", c.inflight), "async", " k", 1e-3, 1},
		{"ack p99 at that load, ms", "p99", "", 1, 1},
		{"1 in flight, msg/s", "one", " k", 1e-3, 2},
		{"fsync before ack (JetStream `sync_interval: always`), msg/s", "fsync", " k", 1e-3, 2},
		{"consume, msg/s", "consume", " k", 1e-3, 1},
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
		if before != nil {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", row.label,
				cell(js[row.key], row.unit, row.scale, row.prec), cell(before[row.key], row.unit, row.scale, row.prec),
				cell(zm[row.key], row.unit, row.scale, row.prec), ratio(js[row.key], before[row.key]), ratio(js[row.key], zm[row.key]))
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", row.label,
			cell(js[row.key], row.unit, row.scale, row.prec), cell(zm[row.key], row.unit, row.scale, row.prec), ratio(js[row.key], zm[row.key]))
	}
	if before != nil {
		fmt.Fprintf(w, "\nzonemq before, CPU per published message (µs): broker %.1f, client %.1f\n",
			median(before["serverCPU"]), median(before["clientCPU"]))
	}
	fmt.Fprintf(w, "\nCPU per published message at %d in flight (µs, from /proc): broker %.1f vs nats-server %.1f; client %.1f vs nats.go %.1f\n",
		c.inflight, median(zm["serverCPU"]), median(js["serverCPU"]), median(zm["clientCPU"]), median(js["clientCPU"]))
}
