//go:build !(linux && (amd64 || arm64))

package store

import "errors"

// canSyncfs reports whether syncfs is available to batch queue syncs.
const canSyncfs = false

func syncfs(string) error { return errors.New("store: syncfs is not available") }
