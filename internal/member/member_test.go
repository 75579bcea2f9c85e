package member

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func mustSecret(t *testing.T, text string) *Secret {
	t.Helper()
	s, err := ParseSecret(text)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSignVerify(t *testing.T) {
	s := mustSecret(t, NewSecretText())
	now := time.Now()
	ext := map[string]string{"brokerName": "broker-a", "brokerId": "0"}
	body := []byte(`{"topics":1}`)
	s.Sign(103, ext, body, now)
	if err := s.Verify(103, ext, body, now.Add(time.Second)); err != nil {
		t.Fatalf("a fresh signature: %v", err)
	}
	// The ACL layer signs after the member MAC; its fields do not matter.
	ext["AccessKey"], ext["Signature"] = "rocketmq2", "xyz"
	if err := s.Verify(103, ext, body, now); err != nil {
		t.Fatalf("with ACL fields added: %v", err)
	}

	refused := func(name string, code int32, ext map[string]string, body []byte, at time.Time, s *Secret) {
		t.Helper()
		err := s.Verify(code, ext, body, at)
		if !errors.Is(err, ErrNotMember) {
			t.Errorf("%s: got %v, want ErrNotMember", name, err)
		}
	}
	clone := func(f func(map[string]string)) map[string]string {
		c := map[string]string{}
		for k, v := range ext {
			c[k] = v
		}
		f(c)
		return c
	}
	refused("another code", 104, ext, body, now, s)
	refused("a changed field", 103, clone(func(m map[string]string) { m["brokerId"] = "1" }), body, now, s)
	refused("an added field", 103, clone(func(m map[string]string) { m["x"] = "" }), body, now, s)
	refused("a removed field", 103, clone(func(m map[string]string) { delete(m, "brokerName") }), body, now, s)
	refused("a changed body", 103, ext, []byte(`{"topics":2}`), now, s)
	refused("a replay after the window", 103, ext, body, now.Add(Window+time.Second), s)
	refused("a time from the future", 103, ext, body, now.Add(-Window-time.Second), s)
	refused("another secret", 103, ext, body, now, mustSecret(t, NewSecretText()))
	refused("no MAC", 103, map[string]string{"brokerName": "broker-a"}, body, now, s)
	// Moving characters between a key and its value must change the MAC.
	a := map[string]string{"ab": "c"}
	s.Sign(1, a, nil, now)
	refused("shifted key/value", 1, map[string]string{"a": "bc", ExtTime: a[ExtTime], ExtMAC: a[ExtMAC]}, nil, now, s)

	var off *Secret
	if err := off.Verify(103, map[string]string{}, nil, now); err != nil {
		t.Errorf("a nil secret must accept: %v", err)
	}
}

func TestParseSecretRules(t *testing.T) {
	if _, err := ParseSecret("short"); err == nil || !strings.Contains(err.Error(), "at least") {
		t.Errorf("a short secret: %v", err)
	}
	a, b := mustSecret(t, NewSecretText()), mustSecret(t, NewSecretText())
	if a.ID() == b.ID() {
		t.Error("two secrets share an id")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "secret")
	s, err := WriteSecretFile(p)
	if err != nil {
		t.Fatal(err)
	}
	l, err := LoadSecret(p)
	if err != nil || l.ID() != s.ID() {
		t.Fatalf("load: %v (id %s vs %s)", err, l.ID(), s.ID())
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSecret(p); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Errorf("a world-readable file: %v", err)
	}
}

// TestTLSMutual checks that two holders of one secret connect and that a
// holder of another secret, or a client with no certificate, cannot.
func TestTLSMutual(t *testing.T) {
	text := NewSecretText()
	server, err := mustSecret(t, text).TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 2)
				if _, err := c.Read(buf); err == nil {
					c.Write(buf)
				}
			}()
		}
	}()
	dial := func(cfg *tls.Config) error {
		d := &net.Dialer{Timeout: 2 * time.Second}
		c, err := tls.DialWithDialer(d, "tcp", ln.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("hi")); err != nil {
			return err
		}
		buf := make([]byte, 2)
		_, err = c.Read(buf)
		return err
	}
	same, err := mustSecret(t, text).TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(same); err != nil {
		t.Fatalf("a member with the same secret: %v", err)
	}
	other, err := mustSecret(t, NewSecretText()).TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(other); err == nil {
		t.Error("a member with another secret connected")
	}
	noCert := same.Clone()
	noCert.Certificates = nil
	if err := dial(noCert); err == nil {
		t.Error("a client without a certificate connected")
	}
	ln.Close()
	<-done
}
