package testutil

import (
	"bytes"
	"os"
	"testing"
)

// FlipAfter damages the file at path the way a bad disk would: it flips one
// bit (0x20) of needle's third byte at needle's first occurrence at or after
// from, in place, and returns where needle began. A letter changes case, so
// a damaged name is still a well-formed one and only a checksum can tell.
func FlipAfter(t testing.TB, path string, needle []byte, from int64) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	NoError(t, err)
	True(t, len(needle) >= 3 && from >= 0 && from <= int64(len(b)), "a needle of 3 bytes or more, within the file")
	at := bytes.Index(b[from:], needle)
	True(t, at >= 0, "the needle occurs: "+string(needle))
	pos := from + int64(at)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt([]byte{b[pos+2] ^ 0x20}, pos+2)
	NoError(t, err)
	return pos
}
