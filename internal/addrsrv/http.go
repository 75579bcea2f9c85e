package addrsrv

import (
	"encoding/json"
	"net/http"
	"strings"
)

// lastProbeLayout is RFC 3339 with milliseconds: probes run more often than
// once a second in tests and drills.
const lastProbeLayout = "2006-01-02T15:04:05.000Z07:00"

// routes is the HTTP API of docs/architecture.md §6. The method in each pattern
// makes ServeMux answer other methods with 405 (GET patterns also take HEAD);
// paths with no pattern get 404.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	// Stock clients ask for /rocketmq/<subgroup>, subgroup "nsaddr" or
	// "nsaddr-<unit>" (with ?nofix=1); every unit gets the same list.
	mux.HandleFunc("GET /rocketmq/{subgroup}", s.handleNsAddr)
	mux.HandleFunc("GET /v1/namesrvs", s.handleNamesrvs)
	mux.HandleFunc("GET /healthz", s.handleHealthz)
	return mux
}

// handleNsAddr serves "host:port;host:port" with no trailing newline: the
// Java TopAddressing client cuts the body at the first CR/LF and the Go
// HttpResolver splits the trimmed body on ';'.
func (s *Server) handleNsAddr(w http.ResponseWriter, r *http.Request) {
	sub := r.PathValue("subgroup")
	if sub != "nsaddr" && !strings.HasPrefix(sub, "nsaddr-") {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte(strings.Join(s.List(), ";")))
}

// IDCHeader names the response header of GET /v1/namesrvs that carries the
// address server's own IDC.
const IDCHeader = "Zonemq-Idc"

// namesrvJSON is one element of GET /v1/namesrvs.
type namesrvJSON struct {
	Addr      string `json:"addr"`
	IDC       string `json:"idc"`
	Alive     bool   `json:"alive"`
	LastProbe string `json:"lastProbe"` // RFC 3339, "" before the first probe
	LastError string `json:"lastError"`
}

// handleNamesrvs serves every configured name server with its probe state.
func (s *Server) handleNamesrvs(w http.ResponseWriter, r *http.Request) {
	list := s.Namesrvs()
	out := make([]namesrvJSON, len(list))
	for i, ns := range list {
		out[i] = namesrvJSON{Addr: ns.Addr, IDC: ns.IDC, Alive: ns.Alive, LastError: ns.LastError}
		if !ns.LastProbe.IsZero() {
			out[i].LastProbe = ns.LastProbe.UTC().Format(lastProbeLayout)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	// The console groups address servers by IDC; the list alone does not
	// say which IDC this server is in.
	w.Header().Set(IDCHeader, s.opts.IDC)
	json.NewEncoder(w).Encode(out)
}

// handleHealthz answers 200 while the server runs; it says nothing about the
// name servers (see /v1/namesrvs), so a load balancer never drops every
// address server of an IDC because that IDC's name servers are down.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte("ok"))
}
