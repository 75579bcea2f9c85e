package main

import (
	"fmt"
	"io"
)

// printMetricsAddr announces a role's metrics endpoint on stdout, so scripts
// (and the dev cluster) can find a port picked with --metrics-listen :0.
func printMetricsAddr(stdout io.Writer, role, addr string) {
	if addr != "" {
		fmt.Fprintf(stdout, "%s metrics on http://%s/metrics\n", role, addr)
	}
}
