//go:build !(linux || darwin || freebsd)

package broker

import "log/slog"

// warnFDLimit has no descriptor limit to compare with here.
func warnFDLimit(*slog.Logger, HardeningOptions) {}
