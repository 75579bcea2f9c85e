//go:build !race

package broker

// raceDetector is true in -race builds (see lock_race_test.go).
const raceDetector = false
