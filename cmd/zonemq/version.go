package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

func init() {
	register(command{
		name:    "version",
		summary: "print the module version and the VCS revision this binary was built from",
		run:     runVersion,
	})
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "", stderr)
	if err := parseFlags(fs, args, nil); err != nil {
		return err
	}
	fmt.Fprintln(stdout, versionLine())
	return nil
}

// versionLine describes the build from its embedded build information:
// module version (“(devel)” for a build from a work tree), VCS revision and
// time, whether the tree had uncommitted changes, and the Go version.
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "zonemq (no build information)"
	}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	line := "zonemq " + bi.Main.Version
	switch {
	case rev != "":
		line += " revision " + rev + modified
		if at != "" {
			line += " " + at
		}
	case bi.Main.Version == "(devel)":
		// go run and go test build without VCS stamping, as does a build
		// outside a git checkout or with -buildvcs=false.
		line += " (no revision recorded: built by go run or go test, outside a git checkout, or with -buildvcs=false; " +
			"go build -o zonemq ./cmd/zonemq in the checkout records it)"
	}
	return line + " " + bi.GoVersion
}
