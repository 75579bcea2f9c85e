package scale

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Every figure a point reports is also kept here, so that with
// ZONEMQ_SCALE_PLOT=DIR a curve's benchmark writes DIR/<curve>.svg: one
// small panel per figure, the counts on a log scale across, the figure
// from 0 up.

var figures = struct {
	sync.Mutex
	byCurve map[string]map[string]map[float64]float64 // curve → unit → x → value
}{byCurve: map[string]map[string]map[float64]float64{}}

// report is b.ReportMetric that also keeps the figure for the curve's plot.
func report(b *testing.B, curve string, x int, value float64, unit string) {
	b.ReportMetric(value, unit)
	figures.Lock()
	defer figures.Unlock()
	units := figures.byCurve[curve]
	if units == nil {
		units = map[string]map[float64]float64{}
		figures.byCurve[curve] = units
	}
	if units[unit] == nil {
		units[unit] = map[float64]float64{}
	}
	units[unit][float64(x)] = value
}

// plot writes the curve's SVG when ZONEMQ_SCALE_PLOT names a directory.
func plot(b *testing.B, curve, xLabel string) {
	dir := os.Getenv("ZONEMQ_SCALE_PLOT")
	if dir == "" {
		return
	}
	figures.Lock()
	units := figures.byCurve[curve]
	figures.Unlock()
	if len(units) == 0 {
		return
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for u := range units {
			if !yield(u) {
				return
			}
		}
	})
	const pw, ph, cols = 260, 150, 3
	rows := (len(names) + cols - 1) / cols
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="10">`+"\n",
		cols*pw, rows*ph+24)
	fmt.Fprintf(&sb, `<text x="4" y="14" font-size="12">zonemq %s (x: %s, log scale)</text>`+"\n", curve, xLabel)
	for i, unit := range names {
		ox, oy := float64(i%cols*pw), float64(24+i/cols*ph)
		pts := units[unit]
		xs := slices.Sorted(func(yield func(float64) bool) {
			for x := range pts {
				if !yield(x) {
					return
				}
			}
		})
		lo, hi := math.Log10(xs[0]), math.Log10(xs[len(xs)-1])
		if hi == lo {
			hi = lo + 1
		}
		top := 0.0
		for _, x := range xs {
			top = max(top, pts[x])
		}
		if top == 0 {
			top = 1
		}
		const l, r, t, bm = 44.0, 10.0, 16.0, 22.0
		px := func(x float64) float64 { return ox + l + (math.Log10(x)-lo)/(hi-lo)*(pw-l-r) }
		py := func(y float64) float64 { return oy + ph - bm - y/top*(ph-t-bm) }
		fmt.Fprintf(&sb, `<text x="%.0f" y="%.0f">%s</text>`+"\n", ox+l, oy+11, unit)
		fmt.Fprintf(&sb, `<path d="M%.1f %.1fV%.1fH%.1f" fill="none" stroke="#999"/>`+"\n", ox+l, oy+t, py(0), ox+pw-r)
		fmt.Fprintf(&sb, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", ox+l-3, py(top)+4, short(top))
		fmt.Fprintf(&sb, `<text x="%.0f" y="%.1f" text-anchor="end">0</text>`+"\n", ox+l-3, py(0)+4)
		var path strings.Builder
		for j, x := range xs {
			cmd := "L"
			if j == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&path, "%s%.1f %.1f", cmd, px(x), py(pts[x]))
			fmt.Fprintf(&sb, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="#1f77b4"/>`+"\n", px(x), py(pts[x]))
			fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n", px(x), oy+ph-8, short(x))
		}
		fmt.Fprintf(&sb, `<path d="%s" fill="none" stroke="#1f77b4" stroke-width="1.5"/>`+"\n", path.String())
	}
	sb.WriteString("</svg>\n")
	path := filepath.Join(dir, curve+".svg")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Errorf("writing %s: %v", path, err)
	}
}

// short renders a figure in a few characters (1.2k, 35M, 0.014).
func short(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
