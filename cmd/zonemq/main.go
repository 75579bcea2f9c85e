// Command zonemq is the one zonemq binary: every server role, the dev
// cluster, the disaster drill and the client tools are subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand. run gets the arguments after the subcommand's
// name and a context cancelled on SIGINT/SIGTERM.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

// exitError carries an exit status other than 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) == 2 && args[0] == "help" {
			// `zonemq help send` is `zonemq send --help`.
			if _, ok := commands[args[1]]; ok {
				return run([]string{args[1], "--help"}, stdout, stderr)
			}
		}
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = []string{"version"}
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "zonemq: unknown command %q (run 'zonemq help')\n", args[0])
		return 2
	}
	setGCTarget()
	defer startCPUProfile(stderr)()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := c.run(ctx, args[1:], stdout, stderr)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	// Packages prefix their errors with their own name; do not say it twice.
	fmt.Fprintf(stderr, "zonemq %s: %s\n", c.name, strings.TrimPrefix(err.Error(), c.name+": "))
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "zonemq: RocketMQ-compatible messaging that survives the loss of a whole IDC.")
	fmt.Fprintln(w, "\nUsage: zonemq <command> [flags]   (zonemq help <command> for its flags)")
	fmt.Fprintln(w, "\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, commands[n].summary)
	}
}
