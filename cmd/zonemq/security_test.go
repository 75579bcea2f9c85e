package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/addrsrv"
	"github.com/zonemq/zonemq/internal/broker"
	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/namesrv"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

const cliACL = `accounts:
  - accessKey: cliAdmin01
    secretKey: cliAdminSecret
    admin: true
  - accessKey: cliUser01
    secretKey: cliUserSecret
    topicPerms:
      - CliSecTopic=PUB|SUB
`

// TestCLIACLAndTLS: against a cluster that enforces TLS and an ACL, the
// client commands work with --tls/--tls-ca and credentials (flags or
// environment) and are refused without them. Free ports, in-process.
func TestCLIACLAndTLS(t *testing.T) {
	cliClearEnv(t)
	dir := t.TempDir()
	certFile, keyFile := testutil.SelfSignedCert(t, dir, "zonemq", "127.0.1.1")
	aclFile := filepath.Join(dir, "plain_acl.yml")
	testutil.NoError(t, os.WriteFile(aclFile, []byte(cliACL), 0o600))
	clientTLS, err := remoting.ClientTLSConfig(certFile, false)
	testutil.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := devcluster.Start(ctx, devcluster.Options{IDCs: 1, DataDir: t.TempDir(),
		Namesrv: func(_ int, o *namesrv.Options) {
			o.TLSMode, o.TLSCertFile, o.TLSKeyFile, o.ACLFile = remoting.TLSEnforcing, certFile, keyFile, aclFile
		},
		Broker: func(_ int, o *broker.Options) {
			o.TLSMode, o.TLSCertFile, o.TLSKeyFile, o.NamesrvTLS = remoting.TLSEnforcing, certFile, keyFile, clientTLS
			o.ACLFile, o.AccessKey, o.SecretKey = aclFile, "cliAdmin01", "cliAdminSecret"
		},
		Addrsrv:   func(_ int, o *addrsrv.Options) { o.ProbeTLS = clientTLS },
		AccessKey: "cliAdmin01", SecretKey: "cliAdminSecret", ClientTLS: clientTLS,
	})
	testutil.NoError(t, err, "devcluster.Start")
	t.Cleanup(func() { c.Close() })

	tlsArgs := []string{"--tls", "--tls-ca", certFile}
	r := cli(t, cliArgs(c, 1, []string{"admin", "topic", "create"}, append(tlsArgs,
		"--topic", "CliSecTopic", "--queues", "1", "--access-key", "cliAdmin01", "--secret-key", "cliAdminSecret")...)...)
	testutil.Equal(t, r.code, 0, r.stderr)

	t.Setenv(envAccessKey, "cliUser01")
	t.Setenv(envSecretKey, "cliUserSecret")
	r = cli(t, cliArgs(c, 1, []string{"send"}, append(tlsArgs, "--topic", "CliSecTopic", "--body", "hello")...)...)
	testutil.Equal(t, r.code, 0, r.stderr)

	// Without TLS the servers do not answer; without credentials they refuse.
	r = cli(t, cliArgs(c, 1, []string{"send"}, "--topic", "CliSecTopic", "--body", "plain")...)
	testutil.True(t, r.code != 0, "plain send succeeded: %s", r.stdout)
	t.Setenv(envAccessKey, "")
	t.Setenv(envSecretKey, "")
	r = cli(t, cliArgs(c, 1, []string{"send"}, append(tlsArgs, "--topic", "CliSecTopic", "--body", "anonymous")...)...)
	testutil.True(t, r.code != 0, "unsigned send succeeded: %s", r.stdout)
	// A user cannot create topics.
	r = cli(t, cliArgs(c, 1, []string{"admin", "topic", "create"}, append(tlsArgs,
		"--topic", "Other", "--access-key", "cliUser01", "--secret-key", "cliUserSecret")...)...)
	testutil.True(t, r.code != 0, "a user created a topic: %s", r.stdout)
}
