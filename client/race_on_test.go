//go:build race

package client

// raceDetector is true in -race builds, whose instrumentation allocates on
// its own: allocation budgets are checked without it.
const raceDetector = true
