package drill

import (
	"fmt"
	"html"
	"io"
	"slices"
	"strings"
	"time"
)

// The campaign's timeline, for an operator to read at a glance: every
// fault as a band on its target's row, and each IDC's producer —
// acknowledged sends and errors — per slice of time below them. It is
// written twice: as text in the report (a letter per fault kind, a bar
// per slice) and as an SVG picture in the work folder.

// timeline is the campaign cut into equal slices.
type timeline struct {
	from, to time.Time
	slice    time.Duration
	// faults: per target, the kind in force in each slice ("" none).
	targets []string
	faults  map[string][]string
	// acks and errs per IDC per slice.
	idcs       []string
	acks, errs map[string][]int
	maxAcks    int
}

func newTimeline(columns int, idcs []string, sends []sendRecord, plan ChaosPlan, began, healed time.Time) *timeline {
	tl := &timeline{from: began.Add(-5 * time.Second), to: healed.Add(15 * time.Second), idcs: idcs,
		faults: map[string][]string{}, acks: map[string][]int{}, errs: map[string][]int{}}
	tl.slice = max(time.Millisecond, tl.to.Sub(tl.from)/time.Duration(columns))
	n := int(tl.to.Sub(tl.from)/tl.slice) + 1
	at := func(t time.Time) int { return int(t.Sub(tl.from) / tl.slice) }
	for _, e := range plan.Events {
		f, t := eventSpan(e, began)
		row := tl.faults[e.Target]
		if row == nil {
			row = make([]string, n)
			tl.faults[e.Target] = row
			tl.targets = append(tl.targets, e.Target)
		}
		for i := max(0, at(f)); i <= at(t) && i < n; i++ {
			row[i] = e.Kind
		}
	}
	slices.Sort(tl.targets)
	for _, idc := range idcs {
		tl.acks[idc], tl.errs[idc] = make([]int, n), make([]int, n)
	}
	for _, s := range sends {
		i := at(s.end)
		if i < 0 || i >= n || tl.acks[s.producerIDC] == nil {
			continue
		}
		if s.err != nil {
			tl.errs[s.producerIDC][i]++
		} else {
			tl.acks[s.producerIDC][i]++
			tl.maxAcks = max(tl.maxAcks, tl.acks[s.producerIDC][i])
		}
	}
	return tl
}

// faultLetter is a kind's mark on the text timeline.
func faultLetter(kind string) string {
	switch kind {
	case "":
		return "·"
	case FaultOneWay:
		return "o"
	case FaultPower:
		return "P"
	case FaultClock:
		return "t"
	case FaultBridge:
		return "B"
	}
	return kind[:1]
}

var sparks = []rune(" ▁▂▃▄▅▆▇█")

// writeText draws the timeline as text, one column per slice.
func (tl *timeline) writeText(w io.Writer) {
	n := len(tl.acks[tl.idcs[0]])
	fmt.Fprintf(w, "timeline: %s per column, from 5s before the first fault to 15s after the heal\n", tl.slice.Round(time.Millisecond))
	for _, t := range tl.targets {
		var b strings.Builder
		for _, k := range tl.faults[t] {
			b.WriteString(faultLetter(k))
		}
		fmt.Fprintf(w, "  %-30s %s\n", t, b.String())
	}
	for _, idc := range tl.idcs {
		var a, e strings.Builder
		for i := 0; i < n; i++ {
			v := tl.acks[idc][i]
			level := 0
			if v > 0 && tl.maxAcks > 0 {
				level = 1 + v*(len(sparks)-2)/tl.maxAcks
			}
			a.WriteRune(sparks[level])
			if tl.errs[idc][i] > 0 {
				e.WriteByte('!')
			} else {
				e.WriteByte(' ')
			}
		}
		fmt.Fprintf(w, "  %-30s %s\n", idc+" producer: acked", a.String())
		fmt.Fprintf(w, "  %-30s %s\n", idc+" producer: errors", strings.TrimRight(e.String(), " "))
	}
	fmt.Fprintln(w, "  (k kill, s stop, p pause, c corrupt, P power, d disk-full, i isolate, o one-way, B bridge, f flaky, t clock; ! a slice with send errors)")
}

// faultColor is a kind's band colour in the picture.
var faultColor = map[string]string{
	FaultKill: "#d62728", FaultStop: "#ff7f0e", FaultPause: "#9467bd", FaultIsolate: "#1f77b4", FaultOneWay: "#17becf",
	FaultCorrupt: "#8c564b", FaultPower: "#000000", FaultDiskFull: "#7f7f7f", FaultFlaky: "#bcbd22", FaultClock: "#e377c2",
	FaultBridge: "#aec7e8",
}

// writeSVG draws the timeline as an SVG picture.
func (tl *timeline) writeSVG(w io.Writer) error {
	const label, width, row, barRow = 240.0, 960.0, 16.0, 40.0
	n := len(tl.acks[tl.idcs[0]])
	colW := width / float64(n)
	height := 40 + row*float64(len(tl.targets)) + (barRow+row)*float64(len(tl.idcs)) + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="monospace" font-size="11">`+"\n",
		label+width+20, height)
	fmt.Fprintf(&b, `<text x="4" y="14">zonemq drill --chaos: faults (bands) and each IDC's acknowledged sends and errors; %s per column</text>`+"\n",
		tl.slice.Round(time.Millisecond))
	y := 30.0
	// Time axis ticks every tenth of the span.
	for i := 0; i <= 10; i++ {
		x := label + width*float64(i)/10
		at := time.Duration(float64(tl.to.Sub(tl.from))*float64(i)/10) - 5*time.Second
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" fill="#666">%s</text>`+"\n",
			x, y, x, height-20, x+2, height-8, at.Round(time.Second))
	}
	for _, t := range tl.targets {
		fmt.Fprintf(&b, `<text x="4" y="%.1f">%s</text>`+"\n", y+row-4, html.EscapeString(t))
		for i, k := range tl.faults[t] {
			if k != "" {
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.2f" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n",
					label+float64(i)*colW, y+2, colW+0.2, row-4, faultColor[k], k)
			}
		}
		y += row
	}
	for _, idc := range tl.idcs {
		y += row
		fmt.Fprintf(&b, `<text x="4" y="%.1f">%s producer: acked (green), errors (red)</text>`+"\n", y+barRow/2, idc)
		for i := 0; i < n; i++ {
			if v := tl.acks[idc][i]; v > 0 && tl.maxAcks > 0 {
				h := barRow * float64(v) / float64(tl.maxAcks)
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.2f" height="%.1f" fill="#2ca02c"/>`+"\n", label+float64(i)*colW, y+barRow-h, colW+0.2, h)
			}
			if v := tl.errs[idc][i]; v > 0 {
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.2f" height="4" fill="#d62728"><title>%d errors</title></rect>`+"\n",
					label+float64(i)*colW, y+barRow, colW+0.2, v)
			}
		}
		y += barRow
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
