package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFlipAfterChangesOneLettersCaseAtTheOccurrenceAfterFrom(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	NoError(t, os.WriteFile(path, []byte("kiwi-key|kiwi-key"), 0o644))
	Equal(t, FlipAfter(t, path, []byte("kiwi-key"), 1), int64(9))
	b, err := os.ReadFile(path)
	NoError(t, err)
	Equal(t, string(b), "kiwi-key|kiWi-key")
}
