package addrsrv_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/zonemq/zonemq/internal/addrsrv"
	"github.com/zonemq/zonemq/internal/testutil"
)

// TestAddrsrvGoClientResolver: the stock Go client's HTTP name-server
// resolver reads our list as it is.
func TestAddrsrvGoClientResolver(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("NAMESRV_ADDR", "") // its last fallback must not mask a failure
	rlog.SetLogLevel("error")

	a1, stopA1 := startNamesrv(t, "idc1", "127.0.1.1:0")
	b1, _ := startNamesrv(t, "idc2", "127.0.2.1:0")
	_, base := startAddrsrv(t, "127.0.2.1:0", "idc2",
		addrsrv.Namesrv{Addr: a1, IDC: "idc1"}, addrsrv.Namesrv{Addr: b1, IDC: "idc2"})
	waitList(t, base, b1+";"+a1, 5*time.Second)

	url := base + "/rocketmq/nsaddr"
	unitURL := url + "-unitA?nofix=1"
	testutil.RemoveResolverSnapshot(t, url)
	testutil.RemoveResolverSnapshot(t, unitURL)
	resolve := func(unit string) []string {
		r := primitive.NewHttpResolver("DEFAULT", url)
		r.DomainWithUnit(unit)
		return r.Resolve()
	}
	for _, unit := range []string{"", "unitA"} {
		// Eventually: under load a probe may miss and drop a name server
		// for an interval.
		testutil.Eventually(t, 5*time.Second, func() error {
			if got := resolve(unit); !slices.Equal(got, []string{b1, a1}) {
				return fmt.Errorf("unit %q: resolved %v, want [%s %s]", unit, got, b1, a1)
			}
			return nil
		})
	}

	stopA1()
	testutil.Eventually(t, downWithin+time.Second, func() error {
		if got := resolve(""); !slices.Equal(got, []string{b1}) {
			return fmt.Errorf("resolved %v, want [%s]", got, b1)
		}
		return nil
	})
}
