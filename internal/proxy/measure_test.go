package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// TestMeasureV5RTO measures what a 5.x producer sees when the access
// point's own broker stops, and when its whole IDC (access point included)
// is lost while it is configured with both IDCs' access points: the longest
// time between two successful sends around the fault, and the failed sends.
// A measurement, not a check: run with ZONEMQ_MEASURE=1 (docs/grpc.md).
func TestMeasureV5RTO(t *testing.T) {
	if os.Getenv("ZONEMQ_MEASURE") == "" {
		t.Skip("a measurement: set ZONEMQ_MEASURE=1")
	}
	for _, fault := range []string{"broker", "idc", "idc", "idc"} {
		c, ap1 := cluster(t, "V5RTO")
		ap2 := startAccessPoint(t, c, 2)
		endpoint := ap1.Addr()
		if fault == "idc" {
			endpoint += ";" + ap2.Addr()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, v5peer(t), "produce", "--endpoint", endpoint, "--topic", "V5RTO", "--count", "1500",
			"--inflight", "4", "--interval", "10ms")
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TMPDIR="+t.TempDir()) // its logs go with the test
		stdout, err := cmd.StdoutPipe()
		testutil.NoError(t, err)
		testutil.NoError(t, cmd.Start())
		var (
			oks     []int64
			failed  int
			faultAt int64
		)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l peerLine
			if json.Unmarshal(sc.Bytes(), &l) != nil || l.Op != "send" {
				continue
			}
			if l.Err != "" {
				failed++
			} else {
				oks = append(oks, l.At)
			}
			if len(oks) == 200 && faultAt == 0 {
				faultAt = time.Now().UnixMilli()
				go func() {
					if fault == "broker" {
						c.StopBroker(1)
					} else {
						ap1.Close(context.Background())
						c.StopIDC(1)
					}
				}()
			}
		}
		cmd.Wait()
		cancel()
		sort.Slice(oks, func(i, j int) bool { return oks[i] < oks[j] })
		var gap int64
		for i := 1; i < len(oks); i++ {
			if oks[i] >= faultAt-1000 && oks[i]-oks[i-1] > gap {
				gap = oks[i] - oks[i-1]
			}
		}
		through := ""
		if fault == "idc" {
			// Sends through idc1's access point landed in idc1, gone now.
			through = fmt.Sprintf(" (%d sends went through idc1's access point before the loss)", len(oks)-len(drain(t, c, "V5RTO")))
		}
		t.Logf("%s lost: %d sends ok, %d failed; longest gap between successful sends after the fault: %d ms%s",
			fault, len(oks), failed, gap, through)
		c.Close()
	}
}
