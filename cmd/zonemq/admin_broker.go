package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/zonemq/zonemq/client/admin"
)

// switchJSON is `admin broker switch --output json`.
type switchJSON struct {
	Broker    string `json:"broker"`
	NewMaster string `json:"newMaster"`
	Epoch     int64  `json:"epoch"`
	LogEnd    int64  `json:"logEnd"`
	Forced    bool   `json:"forced"`
}

func runAdminBrokerSwitch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("broker switch", "--name BROKER --to ID [--force] [--timeout 5s] [--output text|json]", stderr)
	name := s.fs.String("name", "", "the broker group (broker name) to switch (required)")
	to := s.fs.Int64("to", 0, "the replica `id` that becomes master (required, >= 1)")
	force := s.fs.Bool("force", false, "promote the replica although the master is gone: what the master acknowledged\n"+
		"and the replica lacks is dropped from the group (nothing, with --replication sync)")
	timeout := s.fs.Duration("timeout", 5*time.Second, "longest writes stay paused while the replica catches up")
	check := func() error {
		if *name == "" {
			return usagef("admin broker switch: --name is required")
		}
		if *to < 1 {
			return usagef("admin broker switch: --to must be a replica id (1 or more)")
		}
		return nil
	}
	if err := s.connect(ctx, args, check); err != nil {
		return err
	}
	defer s.close()
	began := time.Now()
	res, err := s.admin.SwitchMaster(ctx, *name, *to, *force, *timeout)
	if err != nil {
		return fmt.Errorf("switch %s to replica %d: %s", *name, *to, oneLine(err.Error()))
	}
	if s.json() {
		return printJSON(stdout, switchJSON{Broker: res.Broker, NewMaster: res.NewMaster, Epoch: res.Epoch, LogEnd: res.LogEnd, Forced: res.Forced})
	}
	if res.Forced {
		fmt.Fprintf(stdout, "%s: replica %d at %s promoted by force in %s\n", res.Broker, *to, res.NewMaster, time.Since(began).Round(time.Millisecond))
		return nil
	}
	fmt.Fprintf(stdout, "%s: master is now %s (epoch %d, log end %d), switched in %s\n",
		res.Broker, res.NewMaster, res.Epoch, res.LogEnd, time.Since(began).Round(time.Millisecond))
	return nil
}

// brokerStatusJSON is one broker in `admin broker status --output json`.
type brokerStatusJSON struct {
	Name           string `json:"name"`
	ID             int64  `json:"id"`
	Addr           string `json:"addr"`
	IDC            string `json:"idc"`
	Role           string `json:"role"`
	Epoch          string `json:"epoch"`
	LogEnd         string `json:"logEnd"`
	InSyncReplicas string `json:"inSyncReplicas"`
	Replicas       string `json:"replicas,omitempty"`
	MasterAddr     string `json:"masterAddr,omitempty"`
	Error          string `json:"error,omitempty"`
}

func runAdminBrokerStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s := newAdminSession("broker status", "[--name BROKER] [--output text|json]", stderr)
	name := s.fs.String("name", "", "only this broker group (default: every group)")
	if err := s.connect(ctx, args, nil); err != nil {
		return err
	}
	defer s.close()
	brokers, err := s.admin.Cluster(ctx)
	if err != nil {
		return fmt.Errorf("cluster info: %s", oneLine(err.Error()))
	}
	var out []brokerStatusJSON
	for _, b := range brokers {
		if (*name != "" && b.Name != *name) || !b.Alive {
			continue
		}
		st := brokerStatusJSON{Name: b.Name, ID: b.ID, Addr: b.Addr, IDC: b.IDC}
		info, err := s.admin.BrokerRuntime(ctx, b.Addr)
		if err != nil {
			st.Error = oneLine(err.Error())
		} else {
			st.Role, st.Epoch, st.LogEnd = info["brokerRole"], info["replicationEpoch"], info["commitLogMaxOffset"]
			st.InSyncReplicas, st.Replicas, st.MasterAddr = info["inSyncReplicas"], info["replicas"], info["masterAddr"]
		}
		out = append(out, st)
	}
	if *name != "" && len(out) == 0 {
		return fmt.Errorf("broker status: no live broker named %s", *name)
	}
	if s.json() {
		if out == nil {
			out = []brokerStatusJSON{}
		}
		return printJSON(stdout, out)
	}
	t := newTable(stdout, "BROKER", "ID", "ADDRESS", "IDC", "ROLE", "EPOCH", "LOG END", "IN SYNC", "REPLICAS / MASTER")
	for _, st := range out {
		detail := st.Replicas
		if st.MasterAddr != "" {
			detail = "follows " + st.MasterAddr
		}
		if st.Error != "" {
			detail = "error: " + st.Error
		}
		t.row(st.Name, st.ID, st.Addr, st.IDC, st.Role, st.Epoch, st.LogEnd, st.InSyncReplicas, detail)
	}
	return t.flush()
}

// brokerAddr reads a --broker value that wants an address: host:port as
// given, or a broker name (what `admin cluster` shows first, and so what
// people paste) for the address of that group's live master, else of its
// lowest live replica.
func brokerAddr(ctx context.Context, a *admin.Client, v string) (string, error) {
	if _, _, err := net.SplitHostPort(v); err == nil {
		return v, nil
	}
	brokers, err := a.Cluster(ctx)
	if err != nil {
		return "", fmt.Errorf("--broker %s is not host:port, and the broker list to look it up as a name failed: %s", v, oneLine(err.Error()))
	}
	best := admin.BrokerStatus{ID: -1}
	for _, b := range brokers {
		if b.Name == v && b.Alive && (best.ID < 0 || b.ID < best.ID) {
			best = b
		}
	}
	if best.ID < 0 {
		return "", usagef("--broker %s is neither host:port nor the name of a live broker (zonemq admin cluster lists both)", v)
	}
	return best.Addr, nil
}
