package broker

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/store"
)

// holdFsync makes opts' broker fsync its commit log (FlushSync) and each
// fsync wait while hold is set, until free is called. Register free with
// t.Cleanup after the broker starts, so it runs before the broker stops:
// its flusher may be waiting then.
func holdFsync(opts *Options) (hold *atomic.Bool, free func()) {
	hold = new(atomic.Bool)
	release := make(chan struct{})
	var once sync.Once
	opts.Flush = store.FlushSync
	opts.commitLogSync = func(f *os.File) error {
		if hold.Load() {
			<-release
		}
		return f.Sync()
	}
	return hold, func() { once.Do(func() { close(release) }) }
}

// controllerGroup is group name as the controller's leader among ctrl
// sees it (nil, err while no voter leads or it has no such group).
func controllerGroup(t *testing.T, c *remoting.Client, ctrl []string, name string) (*protocol.ControllerStatus, *protocol.ControllerGroup, error) {
	t.Helper()
	for _, addr := range ctrl {
		var st protocol.ControllerStatus
		if err := json.Unmarshal(invoke(t, c, addr, protocol.ControllerGetStatus, nil, nil).Body, &st); err != nil {
			return nil, nil, err
		}
		if !st.IsLeader {
			continue
		}
		for i := range st.Groups {
			if st.Groups[i].BrokerName == name {
				return &st, &st.Groups[i], nil
			}
		}
		return &st, nil, fmt.Errorf("the controller has no group %s: %+v", name, st.Groups)
	}
	return nil, nil, fmt.Errorf("no controller leader")
}
