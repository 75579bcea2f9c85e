//go:build !race

package client

// raceDetector is true in -race builds (see race_on_test.go).
const raceDetector = false
