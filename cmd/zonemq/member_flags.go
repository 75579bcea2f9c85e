package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"github.com/zonemq/zonemq/internal/member"
)

func init() {
	register(command{
		name:    "cluster-secret",
		summary: "write a new cluster secret to a file (mode 0600) for --cluster-secret-file",
		run:     runClusterSecret,
	})
}

// runClusterSecret serves `zonemq cluster-secret --out FILE`.
func runClusterSecret(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("cluster-secret", "--out FILE", stderr)
	out := fs.String("out", "", "the `file` to write (it must not exist); mode 0600 (required)")
	if err := parseFlags(fs, args, nil); err != nil {
		return err
	}
	if *out == "" {
		return usagef("cluster-secret: --out is required, e.g. zonemq cluster-secret --out /etc/zonemq/cluster.secret")
	}
	s, err := member.WriteSecretFile(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote a new cluster secret (id %s) to %s; give every name server, broker, controller voter\n"+
		"and operator's admin command --cluster-secret-file %s (copy it with its 0600 mode)\n", s.ID(), *out, *out)
	return nil
}

// memberFlags are --cluster-secret-file and --insecure, which every server
// command takes (docs/security.md).
type memberFlags struct {
	file     string
	insecure bool
}

func addMemberFlags(fs *flag.FlagSet) *memberFlags {
	f := &memberFlags{}
	fs.StringVar(&f.file, "cluster-secret-file", os.Getenv(member.EnvSecretFile),
		"the cluster secret's `file` (zonemq cluster-secret --out FILE makes one; mode 0600): every request between\n"+
			"cluster members is authenticated with it (default $"+member.EnvSecretFile+")")
	fs.BoolVar(&f.insecure, "insecure", false,
		"run without a cluster secret on a non-loopback address: anyone who reaches it can register\n"+
			"brokers, replicate, promote and vote (never in production)")
	return f
}

// load returns the cluster secret, or nil when member authentication is
// off. Off is allowed only when every address the server listens on is
// loopback, or with --insecure, said loudly on stderr.
func (f *memberFlags) load(role string, listens []string, stderr io.Writer) (*member.Secret, error) {
	if f.file != "" {
		if f.insecure {
			return nil, usagef("%s: --insecure and --cluster-secret-file exclude each other", role)
		}
		s, err := member.LoadSecret(f.file)
		if err != nil {
			return nil, usagef("%s: --cluster-secret-file: %v", role, err)
		}
		return s, nil
	}
	var exposed []string
	for _, l := range listens {
		if l != "" && !loopbackListen(l) {
			exposed = append(exposed, l)
		}
	}
	switch {
	case len(exposed) == 0:
		return nil, nil
	case !f.insecure:
		return nil, usagef("%s listens on %s, which is not loopback, without a cluster secret: give --cluster-secret-file FILE "+
			"(zonemq cluster-secret --out FILE makes one; every member needs the same), or --insecure to run unauthenticated",
			role, strings.Join(exposed, ", "))
	}
	fmt.Fprintf(stderr, "WARNING: %s runs with --insecure on %s: cluster-member requests (registration, replication,\n"+
		"promotion, controller votes) are NOT authenticated; anyone who reaches these ports can take over broker\n"+
		"groups and lose acknowledged messages. Use --cluster-secret-file in production.\n", role, strings.Join(exposed, ", "))
	return nil, nil
}

// loopbackListen reports whether a listen address binds loopback only.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
