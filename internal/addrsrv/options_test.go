package addrsrv

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/testutil"
)

func validOptions() Options {
	o := NewOptions()
	o.Listen = "127.0.1.1:0"
	o.IDC = "idc1"
	o.Namesrvs = []Namesrv{{Addr: "127.0.1.1:9876", IDC: "idc1"}, {Addr: "127.0.2.1:9876", IDC: "idc2"}}
	return o
}

func TestAddrsrvOptionsDefaults(t *testing.T) {
	o := NewOptions()
	testutil.Equal(t, o.ProbeInterval, time.Second, "probe interval")
	testutil.Equal(t, o.DownAfter, 2, "down after")
	testutil.Equal(t, o.PingInterval, 100*time.Millisecond, "ping interval")
	testutil.Equal(t, o.SilentAfter, 600*time.Millisecond, "silent after")
	testutil.Equal(t, o.probeTimeout(), DefaultProbeTimeout, "derived probe timeout")
	o.ProbeInterval = 100 * time.Millisecond
	testutil.Equal(t, o.probeTimeout(), 100*time.Millisecond, "probe timeout follows a short interval")
	o.ProbeTimeout = 3 * time.Second
	testutil.Equal(t, o.probeTimeout(), 3*time.Second, "explicit probe timeout")
	v := validOptions()
	testutil.NoError(t, v.Validate(), "valid options")
}

func TestAddrsrvOptionsValidate(t *testing.T) {
	cases := []struct {
		name   string
		modify func(*Options)
		flag   string // the error must name it
	}{
		{"no listen", func(o *Options) { o.Listen = "" }, "--listen"},
		{"bad listen", func(o *Options) { o.Listen = "nowhere" }, "--listen"},
		{"no idc", func(o *Options) { o.IDC = "" }, "--idc"},
		{"bad idc", func(o *Options) { o.IDC = "a@b" }, "--idc"},
		{"no namesrv", func(o *Options) { o.Namesrvs = nil }, "--namesrv"},
		{"namesrv without port", func(o *Options) { o.Namesrvs[0].Addr = "127.0.1.1" }, "--namesrv"},
		{"namesrv bad port", func(o *Options) { o.Namesrvs[0].Addr = "127.0.1.1:99999" }, "--namesrv"},
		{"namesrv zero port", func(o *Options) { o.Namesrvs[0].Addr = "127.0.1.1:0" }, "--namesrv"},
		{"namesrv empty host", func(o *Options) { o.Namesrvs[0].Addr = ":9876" }, "--namesrv"},
		{"namesrv without idc", func(o *Options) { o.Namesrvs[1].IDC = "" }, "--namesrv"},
		{"namesrv twice", func(o *Options) { o.Namesrvs[1].Addr = o.Namesrvs[0].Addr }, "listed twice"},
		{"zero interval", func(o *Options) { o.ProbeInterval = 0 }, "--probe-interval"},
		{"negative timeout", func(o *Options) { o.ProbeTimeout = -time.Second }, "--probe-timeout"},
		{"zero down-after", func(o *Options) { o.DownAfter = 0 }, "--down-after"},
		{"negative ping interval", func(o *Options) { o.PingInterval = -time.Second }, "--ping-interval"},
		{"silent-after within two pings", func(o *Options) { o.SilentAfter = o.PingInterval }, "--silent-after"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := validOptions()
			c.modify(&o)
			err := o.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want an error naming %s", c.flag)
			}
			if !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("error %v does not wrap ErrInvalidOptions", err)
			}
			if !strings.Contains(err.Error(), c.flag) {
				t.Fatalf("error %q does not name %s", err, c.flag)
			}
			_, err = New(o)
			if !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("New: %v, want ErrInvalidOptions", err)
			}
		})
	}
}

func TestAddrsrvParseNamesrvs(t *testing.T) {
	got, err := ParseNamesrvs(" idc1=127.0.1.1:9876, idc1=127.0.1.2:9876 ,idc2=127.0.2.1:9876,idc3=[::1]:9876")
	testutil.NoError(t, err, "parse")
	want := []Namesrv{
		{Addr: "127.0.1.1:9876", IDC: "idc1"},
		{Addr: "127.0.1.2:9876", IDC: "idc1"},
		{Addr: "127.0.2.1:9876", IDC: "idc2"},
		{Addr: "[::1]:9876", IDC: "idc3"},
	}
	testutil.True(t, slices.Equal(got, want), "parsed", got)
	testutil.Equal(t, FormatNamesrvs(want), "idc1=127.0.1.1:9876,idc1=127.0.1.2:9876,idc2=127.0.2.1:9876,idc3=[::1]:9876", "format")

	for _, bad := range []string{
		"",
		"   ",
		"127.0.1.1:9876",                     // no IDC
		"idc1=127.0.1.1:9876;127.0.1.2:9876", // RocketMQ's ';' list is not this syntax
		"idc1=127.0.1.1:9876,",               // trailing comma
		"idc1=127.0.1.1:9876,,idc2=127.0.2.1:9876",
		"=127.0.1.1:9876",
		"idc1=",
		"idc1=127.0.1.1",
		"idc1=127.0.1.1:port",
		"id c1=127.0.1.1:9876",
	} {
		if _, err := ParseNamesrvs(bad); err == nil {
			t.Errorf("ParseNamesrvs(%q) = nil error, want one", bad)
		} else if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "--namesrv") {
			t.Errorf("ParseNamesrvs(%q) = %v, want an ErrInvalidOptions naming --namesrv", bad, err)
		}
	}
}
