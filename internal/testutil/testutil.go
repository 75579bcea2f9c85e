// Package testutil holds the small helpers zonemq's tests share: require-style
// assertions and a poller that waits on a condition with a deadline. It is
// imported by tests only.
package testutil

import (
	"errors"
	"testing"
	"time"
)

// Eventually polls fn every 10 ms until it returns nil or the deadline passes,
// then fails the test with fn's last error.
func Eventually(t testing.TB, deadline time.Duration, fn func() error) {
	t.Helper()
	end := time.Now().Add(deadline)
	var err error
	for {
		if err = fn(); err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("condition not met within %v: %v", deadline, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// NoError fails the test at once if err is not nil.
func NoError(t testing.TB, err error, what ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%v: unexpected error: %v", what, err)
	}
}

// Equal fails the test at once if got != want.
func Equal[T comparable](t testing.TB, got, want T, what ...any) {
	t.Helper()
	if got != want {
		t.Fatalf("%v: got %v, want %v", what, got, want)
	}
}

// True fails the test at once if cond is false.
func True(t testing.TB, cond bool, what ...any) {
	t.Helper()
	if !cond {
		t.Fatalf("expected true: %v", what)
	}
}

// ErrorIs fails the test at once if err does not match target.
func ErrorIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
}
