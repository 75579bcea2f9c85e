package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"
)

// usageError is a bad command line; it exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("zonemq "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: zonemq %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs and then, if the flag set has a "config"
// flag naming a file, fills every flag not given on the command line from
// that file. Precedence: explicit flag > config file > default.
//
// The config file holds key=value lines; '#' starts a comment. A key is a
// flag name, or a RocketMQ broker.conf name that aliases maps to one.
func parseFlags(fs *flag.FlagSet, args []string, aliases map[string]string) error {
	// Parse silently: a bad flag gets one line (from main), not the whole
	// flag list; --help still prints the list.
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	if err != nil {
		if err == flag.ErrHelp {
			usage()
			return err
		}
		return usagef("%v%s (%s --help lists the flags)", err, durationHint(fs, err), fs.Name())
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (%s --help lists the flags)", fs.Arg(0), fs.Name())
	}
	cf := fs.Lookup("config")
	if cf == nil || cf.Value.String() == "" {
		return nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	values, err := readConfigFile(cf.Value.String())
	if err != nil {
		return err
	}
	for _, kv := range values {
		name := kv[0]
		if a, ok := aliases[name]; ok {
			name = a
		}
		f := fs.Lookup(name)
		if f == nil {
			return usagef("config %s: unknown key %q", cf.Value.String(), kv[0])
		}
		if set[name] {
			continue
		}
		if err := f.Value.Set(kv[1]); err != nil {
			return usagef("config %s: %s=%q: %v", cf.Value.String(), kv[0], kv[1], err)
		}
	}
	return nil
}

// readConfigFile reads key=value pairs in file order.
func readConfigFile(path string) ([][2]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	var out [][2]string
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, usagef("config %s:%d: expected key=value, got %q", path, line, s)
		}
		out = append(out, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
	}
	return out, sc.Err()
}

// newLogger returns the text logger servers write to stderr.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level: %v", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// durationHint explains a duration flag's parse error: `--interval 500`
// lacks a unit, which the flag package only calls a "parse error".
func durationHint(fs *flag.FlagSet, err error) string {
	_, rest, ok := strings.Cut(err.Error(), " for flag -")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, ":")
	f := fs.Lookup(strings.TrimPrefix(name, "-"))
	if f == nil {
		return ""
	}
	if g, ok := f.Value.(flag.Getter); ok {
		if _, isDuration := g.Get().(time.Duration); isDuration {
			return " (a duration needs a unit, e.g. 500ms, 2s, 1m)"
		}
	}
	return ""
}
