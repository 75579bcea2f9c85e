//go:build linux && amd64

package store

// sysSyncfs is syncfs(2)'s system call number (package syscall lacks it).
const sysSyncfs = 306
