package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// namesrvEntry is one element of an address server's GET /v1/namesrvs.
type namesrvEntry struct {
	Addr      string `json:"addr"`
	IDC       string `json:"idc"`
	Alive     bool   `json:"alive"`
	LastProbe string `json:"lastProbe"`
	LastError string `json:"lastError"`
}

// maxAddrsrvBody bounds an address server's answer.
const maxAddrsrvBody = 1 << 20

// addrsrvLoop asks every address server for the name servers of all IDCs,
// at once and every AddrsrvRefresh, and registers with all of them, alive or
// not (a name server that is down gets the registration when it returns).
// Each address server's last good answer is kept, so one that is unreachable
// costs nothing; when all are, the last list stays.
func (s *Server) addrsrvLoop(ctx context.Context) {
	client := &http.Client{Timeout: min(2*time.Second, s.opts.AddrsrvRefresh)}
	if s.opts.NamesrvTLS != nil {
		// The name servers' TLS settings also verify https:// address
		// servers: one CA for the cluster.
		client.Transport = &http.Transport{TLSClientConfig: s.opts.NamesrvTLS, IdleConnTimeout: time.Minute}
	}
	last := map[string][]string{} // url → last good list
	failing := map[string]bool{}
	t := time.NewTicker(s.opts.AddrsrvRefresh)
	defer t.Stop()
	for {
		for _, u := range s.opts.AddrsrvURLs {
			addrs, err := fetchNamesrvs(ctx, client, u)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				if !failing[u] {
					s.logger.Warn("address server unreachable; keeping its last list", "addrsrv", u, "err", err)
				}
				failing[u] = true
				continue
			}
			if failing[u] {
				s.logger.Info("address server reachable again", "addrsrv", u)
			}
			failing[u] = false
			last[u] = addrs
		}
		var fetched []string
		for _, addrs := range last {
			fetched = append(fetched, addrs...)
		}
		if len(last) > 0 {
			s.namesrvs.setAddrs(s.opts.NamesrvAddrs, fetched)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// fetchNamesrvs reads GET <base>/v1/namesrvs and returns every listed name
// server address, sorted.
func fetchNamesrvs(ctx context.Context, client *http.Client, base string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/v1/namesrvs", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAddrsrvBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", req.URL, resp.Status)
	}
	var entries []namesrvEntry
	if err := json.Unmarshal(body, &entries); err != nil {
		return nil, fmt.Errorf("GET %s: %w", req.URL, err)
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Addr != "" {
			out = append(out, e.Addr)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
