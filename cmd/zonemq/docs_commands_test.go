package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zonemq/zonemq/internal/devcluster"
	"github.com/zonemq/zonemq/internal/testutil"
)

// docCommand is one `./zonemq …` command line quoted in a document.
type docCommand struct {
	where string // file:line
	args  []string
}

// readmeSpan is a `./zonemq …` code span in README.md's prose.
var readmeSpan = regexp.MustCompile("`\\./zonemq ([^`]*)`")

// docCommands collects the commands a newcomer pastes: README.md's code
// spans and the ```sh blocks of docs/cli.md's walkthrough, in order.
func docCommands(t *testing.T) []docCommand {
	t.Helper()
	var cmds []docCommand
	add := func(where, line string) {
		line, _, _ = strings.Cut(line, "#")
		cmds = append(cmds, docCommand{where: where, args: strings.Fields(line)})
	}
	readme, err := os.ReadFile("../../README.md")
	testutil.NoError(t, err)
	for i, line := range strings.Split(string(readme), "\n") {
		for _, m := range readmeSpan.FindAllStringSubmatch(line, -1) {
			add(fmt.Sprintf("README.md:%d", i+1), m[1])
		}
	}
	f, err := os.Open("../../docs/cli.md")
	testutil.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	inTour, inSh := false, false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inTour = strings.Contains(line, "dev walkthrough")
		case inTour && line == "```sh":
			inSh = true
		case line == "```":
			inSh = false
		case inTour && inSh && strings.HasPrefix(line, "./zonemq "):
			add(fmt.Sprintf("docs/cli.md:%d", n), strings.TrimPrefix(line, "./zonemq "))
		}
	}
	testutil.NoError(t, sc.Err())
	return cmds
}

// TestDocsCommandsRun runs every command README.md and docs/cli.md's
// walkthrough tell a newcomer to paste, in their order, against `zonemq
// dev` on free ports: the documented addresses are mapped to the test
// cluster's, endless sends and consumers are bounded, and long runs (dev
// itself, drill, bench) are only parsed. Then, with all of idc1 stopped,
// README's client commands must still work: that is the scenario README
// sells, and commands naming only idc1's address server would fail it.
func TestDocsCommandsRun(t *testing.T) {
	cliClearEnv(t)
	cmds := docCommands(t)
	testutil.True(t, len(cmds) >= 10, "too few documented commands found", cmds)

	readyCh := make(chan struct {
		c   *devcluster.Cluster
		url string
	}, 1)
	devReadyHook = func(c *devcluster.Cluster, url string) {
		readyCh <- struct {
			c   *devcluster.Cluster
			url string
		}{c, url}
	}
	t.Cleanup(func() { devReadyHook = nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	errb := &cliBuffer{}
	go func() {
		done <- cliRunCtx(ctx, []string{"dev", "--idcs", "2", "--base-port", "0", "--log-level", "error"}, &cliBuffer{}, errb)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("dev did not stop")
		}
	})
	var rd struct {
		c   *devcluster.Cluster
		url string
	}
	select {
	case rd = <-readyCh:
	case code := <-done:
		t.Fatalf("dev exited with %d: %s", code, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not come up")
	}

	// localize maps a documented command onto the test cluster and bounds
	// it; ok is false for commands that are only parsed.
	localize := func(args []string) ([]string, bool) {
		out := make([]string, 0, len(args)+4)
		for i := 0; i < len(args); i++ {
			a := args[i]
			for n := 1; n <= 2; n++ {
				a = strings.ReplaceAll(a, fmt.Sprintf("http://127.0.%d.1:18080", n), rd.c.AddrsrvURL(n))
			}
			switch {
			case a == "--count" && i+1 < len(args) && args[i+1] == "0":
				out = append(out, "--count", "2")
				i++
				continue
			case a == "--interval" && i+1 < len(args):
				out = append(out, "--interval", "10ms")
				i++
				continue
			}
			out = append(out, a)
		}
		switch out[0] {
		case "dev", "drill", "bench":
			return out, false
		case "dev-ctl":
			out = append([]string{"dev-ctl", "--control", rd.url}, out[1:]...)
		case "consume":
			// Long enough to take its queues and commit on the way out,
			// so the group is known to the admin commands after it.
			out = append(out, "--duration", "3s")
		}
		return out, true
	}
	for _, dc := range cmds {
		args, runIt := localize(dc.args)
		if !runIt {
			_, known := commands[args[0]]
			testutil.True(t, known, dc.where, "names no zonemq command", dc.args)
			continue
		}
		testutil.Eventually(t, 20*time.Second, func() error {
			if r := cli(t, args...); r.code != 0 {
				return fmt.Errorf("%s: %s exited %d: %s", dc.where, strings.Join(dc.args, " "), r.code, r.stderr)
			}
			return nil
		})
	}

	// README's client commands with every server of idc1 down.
	r := cli(t, "dev-ctl", "--control", rd.url, "stop", "all", "idc1")
	testutil.Equal(t, r.code, 0, r.stderr)
	ran := 0
	for _, dc := range cmds {
		if !strings.HasPrefix(dc.where, "README.md") || (dc.args[0] != "send" && dc.args[0] != "consume" && dc.args[0] != "admin") {
			continue
		}
		args, _ := localize(dc.args)
		testutil.Eventually(t, 20*time.Second, func() error {
			if r := cli(t, args...); r.code != 0 {
				return fmt.Errorf("%s: %s exited %d: %s", dc.where, strings.Join(dc.args, " "), r.code, r.stderr)
			}
			return nil
		})
		ran++
	}
	testutil.True(t, ran >= 4, "README's client commands not found", ran)
}
