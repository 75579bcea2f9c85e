package store

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
)

func TestZZInspect(t *testing.T) {
	dirs := os.Getenv("ZZ_DIRS")
	if dirs == "" {
		t.Skip()
	}
	for _, d := range strings.Split(dirs, ",") {
		s, err := Open(Options{Dir: d})
		if err != nil {
			t.Fatal(err)
		}
		if k := os.Getenv("ZZ_KEY"); k != "" {
			found, err := s.QueryByKey(os.Getenv("ZZ_TOPIC"), k, 10, 0, 0)
			fmt.Println("query", k, err)
			for _, m := range found {
				fmt.Printf("  q%d off %d clog %d born %s stored %s host %s props %q\n", m.QueueID, m.QueueOffset, m.CommitLogOffset, time.UnixMilli(m.BornTimestamp).UTC().Format("15:04:05.000"), time.UnixMilli(m.StoreTimestamp).UTC().Format("15:04:05.000"), m.StoreHost, m.Properties)
			}
		}
		for _, spec := range strings.Split(os.Getenv("ZZ_AT"), ";") {
			if spec == "" {
				continue
			}
			f := strings.Split(spec, ":")
			q, _ := strconv.Atoi(f[1])
			off, _ := strconv.ParseInt(f[2], 10, 64)
			n, _ := strconv.Atoi(f[3])
			r := s.GetMessages(f[0], int32(q), off, n, 0, nil)
			fmt.Println(d, spec, r.Status, r.MinOffset, r.MaxOffset)
			for _, b := range r.Messages {
				m, _, err := protocol.DecodeStoredMessage(b, true, false)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Printf("  q%d off %d clog %d body %q born %s stored %s host %s\n", m.QueueID, m.QueueOffset, m.CommitLogOffset, m.Body, time.UnixMilli(m.BornTimestamp).UTC().Format("15:04:05.000"), time.UnixMilli(m.StoreTimestamp).UTC().Format("15:04:05.000"), m.StoreHost)
			}
		}
		s.Close()
	}
}
