package client

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// uniqKeys makes the UNIQ_KEY of every message this process sends: 32 hex
// characters laid out like rocketmq-client-go's — ip(4) pid(2) a random
// process tag(4), upper-case, then 6 lower-case bytes. Where the Go client
// puts seconds-since-month-start and a 16-bit counter there (which repeats
// after 65,536 messages in one second), zonemq puts one 48-bit value that
// starts at milliseconds-since-month-start<<16 and only ever increases, so
// two keys of one process never collide.
type uniqKeys struct {
	prefix string

	mu         sync.Mutex
	monthStart time.Time
	monthEnd   time.Time
	last       uint64
}

var processUniqKeys = newUniqKeys()

func newUniqKeys() *uniqKeys {
	var b [10]byte
	copy(b[:4], localIPv4())
	binary.BigEndian.PutUint16(b[4:], uint16(os.Getpid()))
	rand.Read(b[6:])
	return &uniqKeys{prefix: strings.ToUpper(hex.EncodeToString(b[:]))}
}

// next returns a new key.
func (u *uniqKeys) next() string {
	now := time.Now()
	u.mu.Lock()
	if !now.Before(u.monthEnd) {
		y, m, _ := now.Date()
		u.monthStart = time.Date(y, m, 1, 0, 0, 0, 0, now.Location())
		u.monthEnd = u.monthStart.AddDate(0, 1, 0)
		u.last = 0 // a new month: the key's time part restarts
	}
	v := uint64(now.Sub(u.monthStart).Milliseconds()) << 16
	if v <= u.last {
		v = u.last + 1
	}
	u.last = v
	u.mu.Unlock()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	var key [64]byte // one allocation: the string
	k := append(key[:0], u.prefix...)
	k = hex.AppendEncode(k, b[2:])
	return string(k)
}

// localIPv4 is the first non-loopback IPv4 address of this host, or
// 127.0.0.1; it only seeds the UNIQ_KEY prefix.
func localIPv4() net.IP {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
				if v4 := n.IP.To4(); v4 != nil {
					return v4
				}
			}
		}
	}
	return net.IPv4(127, 0, 0, 1).To4()
}
