//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package store

import (
	"errors"
	"os"
)

func flockExclusive(*os.File) error {
	return errors.New("data-directory locking is not supported on this platform")
}

func funlock(*os.File) error { return nil }
