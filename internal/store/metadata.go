package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// metadataPath validates name and returns Dir/config/<name>.json.
func (s *Store) metadataPath(name string) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("store: metadata name %q is not a plain file name", name)
	}
	if name == "consumerOffset" {
		return "", fmt.Errorf("store: metadata name %q is reserved for consumer offsets", name)
	}
	return filepath.Join(s.configDir, name+".json"), nil
}

// SaveMetadata writes v as JSON to Dir/config/<name>.json atomically: temp
// file, fsync, rename, fsync of the directory. name is a plain file name
// (e.g. "topics", "subscriptionGroups"); "consumerOffset" is reserved.
func (s *Store) SaveMetadata(name string, v any) error {
	path, err := s.metadataPath(name)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("store: encode metadata %s: %w", name, err)
	}
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	if err := s.withReserve("metadata "+name, func() error { return writeFileAtomic(path, append(b, '\n')) }); err != nil {
		return fmt.Errorf("store: save metadata %s: %w", name, err)
	}
	return nil
}

// LoadMetadata decodes Dir/config/<name>.json into v. found is false (and
// v untouched) when the file does not exist.
func (s *Store) LoadMetadata(name string, v any) (found bool, err error) {
	path, err := s.metadataPath(name)
	if err != nil {
		return false, err
	}
	s.metaMu.Lock()
	b, err := os.ReadFile(path)
	s.metaMu.Unlock()
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: load metadata %s: %w", name, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return true, fmt.Errorf("store: metadata %s (%s) is not valid JSON: %w", name, path, err)
	}
	return true, nil
}
