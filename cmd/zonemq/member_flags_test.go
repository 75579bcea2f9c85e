package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/testutil"
)

// TestServersRefuseExposedListenWithoutSecret: a server on a non-loopback
// address with no cluster secret refuses to start (exit status 2, a line
// naming both ways out); --insecure starts it with a loud warning; a
// secret file starts it authenticated; loopback needs neither.
func TestServersRefuseExposedListenWithoutSecret(t *testing.T) {
	t.Setenv("ZONEMQ_CLUSTER_SECRET_FILE", "")
	dir := t.TempDir()
	secret := filepath.Join(dir, "cluster.secret")
	r := cli(t, "cluster-secret", "--out", secret)
	testutil.Equal(t, r.code, 0, r.stderr)
	testutil.True(t, strings.Contains(r.stdout, "wrote a new cluster secret"), r.stdout)
	st, err := os.Stat(secret)
	testutil.NoError(t, err)
	testutil.Equal(t, st.Mode().Perm(), os.FileMode(0o600))
	testutil.Equal(t, cli(t, "cluster-secret", "--out", secret).code, 1, "an existing file is not overwritten")

	parse := map[string]func(args []string, stderr *cliBuffer) (secretSet bool, err error){
		"broker": func(args []string, stderr *cliBuffer) (bool, error) {
			ba, err := parseBrokerArgs(append([]string{"--idc", "idc1", "--name", "b", "--data", dir, "--namesrv", "127.0.0.1:9876"}, args...), stderr)
			return err == nil && ba.opts.ClusterSecret != nil, err
		},
		"namesrv": func(args []string, stderr *cliBuffer) (bool, error) {
			o, _, _, err := parseNamesrvCommand(append([]string{"--idc", "idc1"}, args...), stderr)
			return o.ClusterSecret != nil, err
		},
		"controller": func(args []string, stderr *cliBuffer) (bool, error) {
			o, _, err := parseControllerArgs(append([]string{"--id", "c1", "--data", dir, "--raft-listen", "127.0.0.1:0"}, args...), stderr)
			return o.ClusterSecret != nil, err
		},
	}
	for role, p := range parse {
		var ue *usageError
		_, err := p([]string{"--listen", "0.0.0.0:0"}, &cliBuffer{})
		testutil.True(t, errors.As(err, &ue), role, "an exposed listen without a secret is a usage error", err)
		testutil.True(t, err != nil && strings.Contains(err.Error(), "--cluster-secret-file") && strings.Contains(err.Error(), "--insecure"), role, err)

		warn := &cliBuffer{}
		set, err := p([]string{"--listen", "0.0.0.0:0", "--insecure"}, warn)
		testutil.NoError(t, err, role, "--insecure")
		testutil.True(t, !set && strings.Contains(warn.String(), "WARNING") && strings.Contains(warn.String(), "NOT authenticated"), role, warn.String())

		set, err = p([]string{"--listen", "0.0.0.0:0", "--cluster-secret-file", secret}, &cliBuffer{})
		testutil.NoError(t, err, role, "with a secret")
		testutil.True(t, set, role, "the secret is loaded")

		set, err = p([]string{"--listen", "127.0.1.1:0"}, &cliBuffer{})
		testutil.NoError(t, err, role, "loopback")
		testutil.True(t, !set, role)
	}
}
