package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strings"
	"time"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"rate": func(r float64) string {
		switch {
		case r == 0:
			return "0"
		case r < 10:
			return fmt.Sprintf("%.1f", r)
		default:
			return fmt.Sprintf("%.0f", r)
		}
	},
	"pct":   func(f float64) string { return fmt.Sprintf("%.0f%%", math.Round(f)) },
	"ratio": func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) },
	"clock": func(t time.Time) string { return t.Local().Format("15:04:05") },
	"ago": func(now, t time.Time) string {
		d := now.Sub(t).Round(time.Second)
		if d < time.Second {
			return "now"
		}
		return d.String() + " ago"
	},
	// short keeps a client id readable: "ip@instance@idc=x" → "ip@instance".
	"short": func(id string) string {
		if id == "" {
			return "—"
		}
		parts := strings.Split(id, "@")
		if len(parts) > 2 {
			parts = parts[:2]
		}
		return strings.Join(parts, "@")
	},
	"width": func(f float64) string { return fmt.Sprintf("%.1f%%", math.Max(f, 0)) },
	"idcClass": func(idc string) string {
		// A stable colour per IDC name, from a small palette.
		h := 0
		for _, c := range idc {
			h = h*31 + int(c)
		}
		if h < 0 {
			h = -h
		}
		return fmt.Sprintf("idc-c%d", h%6)
	},
	// dict builds a map for a sub-template: dict "k1" v1 "k2" v2.
	"dict": func(kv ...any) (map[string]any, error) {
		if len(kv)%2 != 0 {
			return nil, fmt.Errorf("dict: odd number of arguments")
		}
		m := make(map[string]any, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			k, ok := kv[i].(string)
			if !ok {
				return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
			}
			m[k] = kv[i+1]
		}
		return m, nil
	},
	"hasTraffic": func(ts []FlowTarget) bool {
		for _, t := range ts {
			if t.Rate > 0 {
				return true
			}
		}
		return false
	},
}

// pageData is what the templates render.
type pageData struct {
	Snapshot
	Polls int
	Now   time.Time
	Admin bool // the admin page is enabled
}

func (s *Server) data() pageData {
	snap, n := s.Snapshot()
	return pageData{Snapshot: snap, Polls: n, Now: time.Now(), Admin: s.opts.Admin}
}

// render executes a template into a buffer first, so a template error
// becomes a 500 instead of half a page.
func (s *Server) render(w http.ResponseWriter, name string) {
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, name, s.data()); err != nil {
		s.logger.Error("rendering the console page", "template", name, "err", err)
		http.Error(w, "rendering failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(buf.Bytes())
}

func (s *Server) handlePage(w http.ResponseWriter, r *http.Request) { s.render(w, "page.html") }

func (s *Server) handleLive(w http.ResponseWriter, r *http.Request) { s.render(w, "live") }

func (s *Server) handleSnapshot(w http.ResponseWriter, r *http.Request) {
	snap, _ := s.Snapshot()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(snap)
}
