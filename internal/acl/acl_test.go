package acl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

// sampleACL is shaped like RocketMQ's distributed plain_acl.yml.
const sampleACL = `# comment
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.{1,2}

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: "12345678"
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
`

func TestACLParseSample(t *testing.T) {
	cfg, err := ParseConfig([]byte(sampleACL))
	testutil.NoError(t, err)
	testutil.Equal(t, len(cfg.GlobalWhiteRemoteAddresses), 2, "global white addresses")
	a := cfg.Accounts["RocketMQ"]
	testutil.True(t, a != nil, "account RocketMQ")
	testutil.Equal(t, a.SecretKey, "12345678", "secret")
	testutil.Equal(t, a.DefaultGroupPerm, Sub, "default group perm")
	testutil.Equal(t, a.TopicPerms["topicB"], Pub|Sub, "topicB")
	testutil.Equal(t, a.GroupPerms["groupA"], Deny, "groupA")
	testutil.True(t, cfg.Accounts["rocketmq2"].Admin, "rocketmq2 is admin")
}

func TestACLParseErrors(t *testing.T) {
	for _, bad := range []string{
		"accounts:\n  - accessKey: short1\n    secretKey: x\n",
		"accounts:\n  - accessKey: longenough\n    secretKey: longenough\n    defaultTopicPerm: PUBSUB\n",
		"accounts:\n  - accessKey: longenough\n    secretKey: longenough\n    topicPrems:\n      - a=PUB\n",
		"acounts: []\n",
		"accounts:\n  - accessKey: longenough\n    secretKey: longenough\n  - accessKey: longenough\n    secretKey: longenough\n",
		"accounts:\n\t- accessKey: longenough\n",
		"globalWhiteRemoteAddresses:\n  - 10.1.300.*\n",
		"accounts:\n  - accessKey: &a longenough\n",
		"accounts:\n  - accessKey: longenough\n    secretKey: longenough\n    topicPerms:\n      - noequals\n",
	} {
		cfg, err := ParseConfig([]byte(bad))
		if err == nil {
			_, err = cfg.compile()
		}
		testutil.True(t, err != nil, "error for %q", bad)
	}
}

func TestACLPermissions(t *testing.T) {
	cfg, err := ParseConfig([]byte(sampleACL))
	testutil.NoError(t, err)
	a := cfg.Accounts["RocketMQ"]
	cases := []struct {
		res  Resource
		want bool
	}{
		{Resource{Name: "topicA", Perm: Pub}, false},
		{Resource{Name: "topicB", Perm: Pub}, true},
		{Resource{Name: "topicB", Perm: Sub}, true},
		{Resource{Name: "topicC", Perm: Pub}, false},
		{Resource{Name: "topicC", Perm: Sub}, true},
		{Resource{Name: "other", Perm: Sub}, false}, // default DENY
		{Resource{Name: "groupA", Group: true, Perm: Sub}, false},
		{Resource{Name: "groupX", Group: true, Perm: Sub}, true}, // default SUB
		{Resource{Name: "%RETRY%groupA", Perm: Pub}, false},      // a retry topic is its group
		{Resource{Name: "groupB", Group: true, Perm: Any}, true},
	}
	for _, c := range cases {
		testutil.Equal(t, a.allows(c.res), c.want, "%+v", c.res)
	}
	admin := cfg.Accounts["rocketmq2"]
	testutil.True(t, admin.allows(Resource{Name: "anything", Perm: Pub}), "admin without entries")
}

func TestACLAddressPatterns(t *testing.T) {
	cases := []struct {
		pattern, ip string
		want        bool
	}{
		{"192.168.0.*", "192.168.0.7", true},
		{"192.168.0.*", "192.168.1.7", false},
		{"192.168.0.1-10", "192.168.0.10", true},
		{"192.168.0.1-10", "192.168.0.11", false},
		{"192.168.0.{1,3}", "192.168.0.3", true},
		{"192.168.0.{1,3}", "192.168.0.2", false},
		{"10.0.0.0/8", "10.9.8.7", true},
		{"127.0.0.1", "127.0.0.1", true},
		{"*", "::1", true},
		{"", "127.0.0.1", false},
	}
	for _, c := range cases {
		m, err := parseAddrPattern(c.pattern)
		testutil.NoError(t, err)
		testutil.Equal(t, m(hostIP(c.ip+":1")), c.want, "%s vs %s", c.pattern, c.ip)
	}
}

// writeACL writes content to path atomically (rename), as an operator's
// deploy tool would.
func writeACL(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	testutil.NoError(t, os.WriteFile(tmp, []byte(content), 0o600))
	testutil.NoError(t, os.Rename(tmp, path))
}

func TestACLCheckAndReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	writeACL(t, path, sampleACL)
	c, err := Load(path, nil)
	testutil.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.WatchLoop(ctx, 10*time.Millisecond)
	}()
	t.Cleanup(func() { cancel(); <-done })

	signed := func(ak, sk string, ext map[string]string, body []byte) Request {
		e := map[string]string{}
		for k, v := range ext {
			e[k] = v
		}
		Sign(10, e, body, ak, sk, time.Now())
		return Request{Code: 10, Ext: e, Body: body, RemoteAddr: "127.0.0.1:5555",
			Resources: []Resource{{Name: "topicB", Perm: Pub}}}
	}
	body := []byte("hello")
	ext := map[string]string{"topic": "topicB", "a": "x"}
	testutil.NoError(t, c.Check(signed("RocketMQ", "12345678", ext, body)))

	r := signed("RocketMQ", "12345678", ext, body)
	r.Body = []byte("hellO")
	testutil.True(t, errors.Is(c.Check(r), ErrDenied), "changed body")
	r = signed("RocketMQ", "wrongsecret", ext, body)
	testutil.True(t, errors.Is(c.Check(r), ErrDenied), "wrong secret")
	r = signed("nobody1", "12345678", ext, body)
	testutil.True(t, errors.Is(c.Check(r), ErrDenied), "unknown key")
	r = Request{Code: 10, Ext: map[string]string{}, RemoteAddr: "127.0.0.1:1"}
	testutil.True(t, errors.Is(c.Check(r), ErrDenied), "unsigned")
	r.RemoteAddr = "10.10.103.9:1"
	testutil.NoError(t, c.Check(r))
	r = signed("RocketMQ", "12345678", ext, body)
	r.Admin = true
	testutil.True(t, errors.Is(c.Check(r), ErrDenied), "admin code from a non-admin")
	r = signed("rocketmq2", "12345678", ext, body)
	r.Admin = true
	testutil.NoError(t, c.Check(r))
	// The account's white address skips the signature.
	r = Request{Code: 10, Ext: map[string]string{ExtAccessKey: "rocketmq2"}, RemoteAddr: "192.168.1.4:1"}
	testutil.NoError(t, c.Check(r))
	// A security token is accepted signed (Java) and unsigned (Go client).
	e := map[string]string{"topic": "topicB", ExtSecurityToken: "tok"}
	Sign(0, e, body, "RocketMQ", "12345678", time.Now())
	testutil.NoError(t, c.Check(Request{Ext: e, Body: body, RemoteAddr: "127.0.0.1:1"}))
	e = map[string]string{"topic": "topicB"}
	Sign(0, e, body, "RocketMQ", "12345678", time.Now())
	e[ExtSecurityToken] = "tok"
	testutil.NoError(t, c.Check(Request{Ext: e, Body: body, RemoteAddr: "127.0.0.1:1"}))

	// A changed file takes effect; a bad one leaves the last good in force.
	n := c.Reloads()
	writeACL(t, path, "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    defaultTopicPerm: SUB\n")
	testutil.Eventually(t, 5*time.Second, func() error {
		if c.Reloads() == n {
			return errors.New("not reloaded yet")
		}
		return nil
	})
	testutil.True(t, errors.Is(c.Check(signed("RocketMQ", "12345678", ext, body)), ErrDenied), "topicB PUB after reload")
	writeACL(t, path, "accounts: [oops\n")
	n = c.Reloads()
	// Give the loop several passes at the bad file; nothing may change.
	for range 5 {
		_, err := c.reload()
		testutil.True(t, err != nil, "bad file refused")
	}
	testutil.Equal(t, c.Reloads(), n, "reloads after a bad file")
	r = signed("RocketMQ", "12345678", ext, body)
	r.Resources = []Resource{{Name: "topicZ", Perm: Sub}}
	testutil.NoError(t, c.Check(r))
}

func TestACLOpenMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "none.yml"), nil)
	testutil.True(t, err != nil, "missing file")
}

// FuzzACLSignature: whatever the ext fields and body, Check never panics,
// a request signed with the right secret passes and any change to its
// body is refused.
func FuzzACLSignature(f *testing.F) {
	f.Add("topic", "TopicA", "b", "Tag", []byte("body"), "12345678")
	f.Add("", "", "Signature", "forged", []byte{}, "")
	f.Add("AccessKey", "RocketMQ", "SecurityToken", "t", []byte{0, 1, 2}, "12345678")
	path := filepath.Join(f.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(path, []byte("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    defaultTopicPerm: PUB|SUB\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	c, err := Load(path, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string, body []byte, secret string) {
		ext := map[string]string{k1: v1, k2: v2}
		_ = c.Check(Request{Ext: ext, Body: body, RemoteAddr: "127.0.0.1:1"})
		Sign(0, ext, body, "RocketMQ", "12345678", time.Now())
		if err := c.Check(Request{Ext: ext, Body: body, RemoteAddr: "127.0.0.1:1"}); err != nil {
			t.Fatalf("signed request refused: %v (ext %q)", err, ext)
		}
		changed := append(append([]byte{}, body...), 'x')
		if c.Check(Request{Ext: ext, Body: changed, RemoteAddr: "127.0.0.1:1"}) == nil {
			t.Fatalf("a changed body passed")
		}
		if secret != "12345678" {
			Sign(0, ext, body, "RocketMQ", secret, time.Now())
			if secret != "" && c.Check(Request{Ext: ext, Body: body, RemoteAddr: "127.0.0.1:1"}) == nil {
				t.Fatalf("signed with secret %q, passed", secret)
			}
		}
	})
}

// TestACLContribExample: the shipped example parses and means what its
// comments say.
func TestACLContribExample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "contrib", "plain_acl.yml.example"))
	testutil.NoError(t, err)
	cfg, err := ParseConfig(data)
	testutil.NoError(t, err)
	testutil.True(t, cfg.Accounts["zonemqAdmin"].Admin, "zonemqAdmin is admin")
	app := cfg.Accounts["appUser01"]
	testutil.True(t, app.allows(Resource{Name: "orders", Perm: Pub}), "appUser01 may send to orders")
	testutil.True(t, !app.allows(Resource{Name: "other", Perm: Sub}), "appUser01 may not read other")
	testutil.True(t, app.allows(Resource{Name: "billing", Group: true, Perm: Sub}), "appUser01 group billing")
}

// TestACLBindsCodeAndTime: zonemq's signers bind the request code and a
// time into what the signature covers. A signature replayed as another
// code, or after BindWindow, is refused; an admin request needs a binding,
// so a stock (unbound) signature of a read cannot be replayed as a
// deletion; non-admin requests still take stock clients' signatures.
func TestACLBindsCodeAndTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	writeACL(t, path, "accounts:\n  - accessKey: adminKey01\n    secretKey: adminSecret01\n    admin: true\n")
	c, err := Load(path, nil)
	testutil.NoError(t, err)
	const statsCode, deleteCode = 202, 215 // GET_TOPIC_STATS_INFO, DELETE_TOPIC_IN_BROKER
	req := func(code int32, ext map[string]string, admin bool) Request {
		return Request{Code: code, Ext: ext, RemoteAddr: "127.0.0.1:1", Admin: admin}
	}
	bound := map[string]string{"topic": "T"}
	Sign(statsCode, bound, nil, "adminKey01", "adminSecret01", time.Now())
	testutil.NoError(t, c.Check(req(statsCode, bound, false)), "the read it was made for")
	err = c.Check(req(deleteCode, bound, true))
	testutil.True(t, errors.Is(err, ErrDenied) && strings.Contains(err.Error(), "made for request code 202, not 215"), err)

	stale := map[string]string{"topic": "T"}
	Sign(statsCode, stale, nil, "adminKey01", "adminSecret01", time.Now().Add(-BindWindow-time.Second))
	err = c.Check(req(statsCode, stale, false))
	testutil.True(t, errors.Is(err, ErrDenied) && strings.Contains(err.Error(), "outside the"), err)

	// A stock RocketMQ signature: the same content, no binding.
	stock := map[string]string{"topic": "T", ExtAccessKey: "adminKey01"}
	stock[ExtSignature] = signature(signedContent(stock, nil, ""), "adminSecret01")
	testutil.NoError(t, c.Check(req(statsCode, stock, false)), "a stock client's read")
	err = c.Check(req(deleteCode, stock, true))
	testutil.True(t, errors.Is(err, ErrDenied) && strings.Contains(err.Error(), "binds no request code"), err)
	boundDelete := map[string]string{"topic": "T"}
	Sign(deleteCode, boundDelete, nil, "adminKey01", "adminSecret01", time.Now())
	testutil.NoError(t, c.Check(req(deleteCode, boundDelete, true)), "a bound admin request")
}

// TestACLBindingCannotBeShifted: RocketMQ's signature lets characters move
// between neighbouring values; the binding's own framed MAC does not, so a
// request whose last field lost a "2" to the code is refused.
func TestACLBindingCannotBeShifted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	writeACL(t, path, "accounts:\n  - accessKey: adminKey01\n    secretKey: adminSecret01\n    admin: true\n")
	c, err := Load(path, nil)
	testutil.NoError(t, err)
	ext := map[string]string{"topic": "T", "zonemqA": "x2"} // sorts just before zonemqReqCode
	Sign(15, ext, nil, "adminKey01", "adminSecret01", time.Now())
	testutil.NoError(t, c.Check(Request{Code: 15, Ext: ext, RemoteAddr: "127.0.0.1:1"}))
	shifted := map[string]string{}
	for k, v := range ext {
		shifted[k] = v
	}
	shifted["zonemqA"], shifted[ExtRequestCode] = "x", "215"
	testutil.True(t, verifySignature(shifted, nil, "adminSecret01"), "RocketMQ's signature does not see the shift")
	err = c.Check(Request{Code: 215, Ext: shifted, RemoteAddr: "127.0.0.1:1", Admin: true})
	testutil.True(t, errors.Is(err, ErrDenied) && strings.Contains(err.Error(), "zonemqReqMAC"), err)
}
