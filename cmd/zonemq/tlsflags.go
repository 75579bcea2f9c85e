package main

import (
	"crypto/tls"
	"flag"

	"github.com/zonemq/zonemq/internal/remoting"
)

// serverTLSFlags are the TLS flags of every role that serves the remoting
// protocol (broker, namesrv).
type serverTLSFlags struct {
	mode, cert, key string
}

func addServerTLSFlags(fs *flag.FlagSet) *serverTLSFlags {
	f := &serverTLSFlags{}
	fs.StringVar(&f.mode, "tls-mode", "disabled",
		"`mode` of TLS on --listen: disabled, permissive (TLS and plain on the same port, for a migration)\n"+
			"or enforcing (TLS only); see docs/security.md")
	fs.StringVar(&f.cert, "tls-cert", "", "TLS certificate `file` (PEM, re-read when it changes)")
	fs.StringVar(&f.key, "tls-key", "", "TLS private key `file` (PEM, re-read when it changes)")
	return f
}

// parse returns the mode, checking that a certificate comes with it.
func (f *serverTLSFlags) parse() (remoting.TLSMode, error) {
	mode, err := remoting.ParseTLSMode(f.mode)
	if err != nil {
		return 0, usagef("--tls-mode: %v", err)
	}
	if mode != remoting.TLSDisabled && (f.cert == "" || f.key == "") {
		return 0, usagef("--tls-mode %s needs --tls-cert and --tls-key", mode)
	}
	return mode, nil
}

// clientTLSFlags are the flags of a TLS client (the SDK commands, the
// broker towards name servers).
type clientTLSFlags struct {
	enabled  bool
	caFile   string
	insecure bool
}

func addClientTLSFlags(fs *flag.FlagSet, name, what string) *clientTLSFlags {
	f := &clientTLSFlags{}
	fs.BoolVar(&f.enabled, name, false, "connect to "+what+" with TLS")
	fs.StringVar(&f.caFile, "tls-ca", "", "CA certificate `file` (PEM) that verifies the servers' TLS certificates\n"+
		"(default: the system's roots)")
	fs.BoolVar(&f.insecure, "tls-insecure-skip-verify", false,
		"accept any TLS certificate (what rocketmq-client-go's WithTls does); tests and migrations only")
	return f
}

// config returns nil when TLS is off.
func (f *clientTLSFlags) config() (*tls.Config, error) {
	if !f.enabled {
		if f.caFile != "" || f.insecure {
			return nil, usagef("--tls-ca and --tls-insecure-skip-verify need TLS turned on")
		}
		return nil, nil
	}
	cfg, err := remoting.ClientTLSConfig(f.caFile, f.insecure)
	if err != nil {
		return nil, usagef("--tls-ca: %v", err)
	}
	return cfg, nil
}
