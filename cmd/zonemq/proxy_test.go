package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/testutil"
)

// The proxy command refuses incomplete flags with exit status 2 and a line
// naming the flag.
func TestProxyFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"proxy", "--idc", "idc1"}, "--addrsrv"},
		{[]string{"proxy", "--addrsrv", "http://127.0.1.1:1"}, "--idc is required"},
		{[]string{"proxy", "--addrsrv", "http://127.0.1.1:1", "--idc", "idc1", "--tls-cert", "x.pem"}, "--tls-cert and --tls-key go together"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		testutil.Equal(t, code, 2, tc.args, stderr.String())
		testutil.True(t, strings.Contains(stderr.String(), tc.want), tc.args, stderr.String())
	}
}
