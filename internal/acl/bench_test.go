package acl

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkACLCheckSend: the cost the ACL adds to one SEND_MESSAGE_V2
// (14 ext fields, 1 KiB body): signature verification and one topic
// permission.
func BenchmarkACLCheckSend(b *testing.B) {
	path := filepath.Join(b.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(path, []byte(sampleACL), 0o600); err != nil {
		b.Fatal(err)
	}
	c, err := Load(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	ext := map[string]string{"a": "pg", "b": "topicB", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1733000000000",
		"h": "0", "i": "KEYSk1\x01TAGSt\x02", "j": "0", "k": "false", "l": "0", "m": "false", "n": "broker-a"}
	body := make([]byte, 1024)
	Sign(310, ext, body, "RocketMQ", "12345678", time.Now())
	r := Request{Code: 310, Ext: ext, Body: body, RemoteAddr: "127.0.0.1:5555", Resources: []Resource{{Name: "topicB", Perm: Pub}}}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := c.Check(r); err != nil {
			b.Fatal(err)
		}
	}
}
