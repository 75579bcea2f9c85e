package main

import (
	"flag"
	"os"

	"github.com/zonemq/zonemq/internal/controller"
	"github.com/zonemq/zonemq/internal/member"
)

// controllerClientFlags are how an admin command reaches voters that run
// with an ACL or TLS: the same credentials and TLS flags as the client
// commands.
type controllerClientFlags struct {
	accessKey, secretKey string
	tls                  *clientTLSFlags
	secretFile           string
}

func addControllerClientFlags(fs *flag.FlagSet) *controllerClientFlags {
	f := &controllerClientFlags{}
	fs.StringVar(&f.accessKey, "access-key", os.Getenv(envAccessKey),
		"ACL access `key` signing the requests (elections need an admin account; default $"+envAccessKey+")")
	fs.StringVar(&f.secretKey, "secret-key", os.Getenv(envSecretKey),
		"ACL secret `key` of --access-key; prefer $"+envSecretKey+" (the command line shows in ps)")
	f.tls = addClientTLSFlags(fs, "tls", "the voters")
	fs.StringVar(&f.secretFile, "cluster-secret-file", os.Getenv(member.EnvSecretFile),
		"the cluster secret's `file`: elections are cluster-member requests (default $"+member.EnvSecretFile+")")
	return f
}

// options returns the controller client's options.
func (f *controllerClientFlags) options() (controller.ClientOptions, error) {
	if (f.accessKey == "") != (f.secretKey == "") {
		return controller.ClientOptions{}, usagef("--access-key and --secret-key go together (or $%s and $%s)", envAccessKey, envSecretKey)
	}
	cfg, err := f.tls.config()
	if err != nil {
		return controller.ClientOptions{}, err
	}
	opts := controller.ClientOptions{AccessKey: f.accessKey, SecretKey: f.secretKey, TLS: cfg}
	if f.secretFile != "" {
		if opts.ClusterSecret, err = member.LoadSecret(f.secretFile); err != nil {
			return opts, usagef("--cluster-secret-file: %v", err)
		}
	}
	return opts, nil
}
