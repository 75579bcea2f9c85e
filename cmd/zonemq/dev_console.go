package main

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/zonemq/zonemq/internal/console"
	"github.com/zonemq/zonemq/internal/devcluster"
)

// devDefaultConsolePort is the web console's port offset from --base-port
// (10000 + 8088 = 18088).
const devDefaultConsolePort = 8088

// devConsoleListen resolves `zonemq dev --console`: "" means the default
// port of the scheme (a free one with --base-port 0), "off" none.
func devConsoleListen(flagValue string, basePort int) string {
	if flagValue != "" {
		return flagValue
	}
	port := 0
	if basePort > 0 {
		port = basePort + devDefaultConsolePort
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// startDevConsole serves the web console over every IDC's address server
// of c until the returned stop is called.
func startDevConsole(c *devcluster.Cluster, listen string, logger *slog.Logger) (url string, stop func(), err error) {
	urls := make([]string, 0, c.IDCs())
	for n := 1; n <= c.IDCs(); n++ {
		urls = append(urls, c.AddrsrvURL(n))
	}
	s, err := console.New(console.Options{AddrsrvURLs: urls, Listen: listen, Logger: logger})
	if err != nil {
		return "", nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(context.Background())
	}()
	return s.URL(), func() { s.Shutdown(); <-done }, nil
}
