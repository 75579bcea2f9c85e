package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// journalPath returns Dir/config/<name>.journal for a valid metadata name.
func (s *Store) journalPath(name string) (string, error) {
	path, err := s.metadataPath(name)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(path, ".json") + ".journal", nil
}

// AppendMetadataJournal appends v as one JSON line to
// Dir/config/<name>.journal and fsyncs it. A journal lets a large table
// (topics) record one change in a few hundred bytes instead of rewriting the
// whole file; the owner replays it over the last snapshot
// (LoadMetadataJournal) and compacts it now and then (CompactMetadata).
func (s *Store) AppendMetadataJournal(name string, v any) error {
	path, err := s.journalPath(name)
	if err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("store: encode journal record of %s: %w", name, err)
	}
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	created := !fileExists(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("store: open journal of %s: %w", name, err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = datasync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && created {
		err = syncDir(s.configDir)
	}
	if err != nil {
		return fmt.Errorf("store: append to journal of %s: %w", name, err)
	}
	return nil
}

// LoadMetadataJournal calls fn with each record of name's journal, oldest
// first, and returns how many there were. A last line without its newline
// (a torn append that was never acknowledged) is ignored and cut off; a
// damaged line before the end fails with ErrCorrupt.
func (s *Store) LoadMetadataJournal(name string, fn func(record []byte) error) (int, error) {
	path, err := s.journalPath(name)
	if err != nil {
		return 0, err
	}
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: read journal of %s: %w", name, err)
	}
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		s.log.Warn("metadata journal ends with a torn record; cutting it off", "journal", path, "bytes", len(b)-(i+1))
		if err := os.Truncate(path, int64(i+1)); err != nil {
			return 0, fmt.Errorf("store: truncate journal of %s: %w", name, err)
		}
		b = b[:i+1]
	}
	n := 0
	for line := range bytes.Lines(b) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		if !json.Valid(line) {
			return n, fmt.Errorf("%w: record %d of %s is not valid JSON", ErrCorrupt, n+1, path)
		}
		if err := fn(line); err != nil {
			return n, fmt.Errorf("store: journal %s record %d: %w", path, n+1, err)
		}
		n++
	}
	return n, nil
}

// CompactMetadata saves v as name's snapshot (SaveMetadata) and then
// empties its journal. A crash between the two leaves a journal whose
// records all precede the snapshot; replaying them in order over it ends in
// the snapshot's state again, so the owner's replay must set, not merge.
func (s *Store) CompactMetadata(name string, v any) error {
	if err := s.SaveMetadata(name, v); err != nil {
		return err
	}
	path, err := s.journalPath(name)
	if err != nil {
		return err
	}
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	if err := os.Truncate(path, 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("store: empty journal of %s: %w", name, err)
	}
	return nil
}
