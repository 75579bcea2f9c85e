package idc

import "testing"

func TestIDCClientIDRoundTrip(t *testing.T) {
	cases := []struct {
		ip, instance, idc string
		want              string
	}{
		{"10.0.0.1", "12345", "idc1", "10.0.0.1@12345@idc=idc1"},
		{"10.0.0.1", "DEFAULT", "", "10.0.0.1@DEFAULT"},
		{"127.0.2.1", "p-7#3", "IDC-2.east_b", "127.0.2.1@p-7#3@idc=IDC-2.east_b"},
		{"::1", "", "idc1", "::1@@idc=idc1"},
	}
	for _, c := range cases {
		got := FormatClientID(c.ip, c.instance, c.idc)
		if got != c.want {
			t.Errorf("FormatClientID(%q, %q, %q) = %q, want %q", c.ip, c.instance, c.idc, got, c.want)
		}
		if back := IDCOfClientID(got); back != c.idc {
			t.Errorf("IDCOfClientID(%q) = %q, want %q", got, back, c.idc)
		}
	}
}

func TestIDCOfClientID(t *testing.T) {
	cases := []struct{ id, want string }{
		{"", ""},
		{"10.0.0.1@1234", ""},                       // stock Go / Java client
		{"10.0.0.1@DEFAULT@unitA", ""},              // stock client with a unit name
		{"10.0.0.1@idc=idc1", ""},                   // instance name that looks like a marker
		{"idc=idc1", ""},                            // not a client id at all
		{"10.0.0.1@1234@idc=idc2", "idc2"},          // zonemq SDK
		{"10.0.0.1@1234@idc=idc2@unitA", "idc2"},    // something appended later
		{"10.0.0.1@1234@idc=old@idc=new", "new"},    // last marker wins
		{"10.0.0.1@1234@IDC=idc2", ""},              // marker is case-sensitive
		{"10.0.0.1@1234@idc=", ""},                  // empty IDC is no IDC
		{"10.0.0.1@1234@10.0.0.2@idc=idc3", "idc3"}, // instance containing '@'
	}
	for _, c := range cases {
		if got := IDCOfClientID(c.id); got != c.want {
			t.Errorf("IDCOfClientID(%q) = %q, want %q", c.id, got, c.want)
		}
	}
}

func TestIDCSameAndCheckName(t *testing.T) {
	sames := []struct {
		a, b string
		want bool
	}{
		{"idc1", "idc1", true},
		{"IDC1", "idc1", true},
		{"idc1", "idc2", false},
		{"", "", false},
		{"", "idc1", false},
	}
	for _, c := range sames {
		if got := Same(c.a, c.b); got != c.want {
			t.Errorf("Same(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
	for _, ok := range []string{"idc1", "IDC-2", "cn.hz_a", "0"} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", ok, err)
		}
	}
	long := make([]byte, MaxNameLen+1)
	for i := range long {
		long[i] = 'a'
	}
	for _, bad := range []string{"", "idc@1", "a=b", "a,b", "a;b", "a b", "机房", string(long)} {
		if err := CheckName(bad); err == nil {
			t.Errorf("CheckName(%q) = nil, want an error", bad)
		}
	}
}
