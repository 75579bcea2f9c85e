package namesrv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
)

// KV config limits. A request over them gets INVALID_PARAMETER.
const (
	// MaxKVValueBytes is the largest KV value (64 KiB): values ride in a
	// header ext field and are rewritten to disk on every change.
	MaxKVValueBytes = 64 << 10
	// MaxKVNameBytes is the longest namespace or key.
	MaxKVNameBytes = 255
)

// validateKV reports why a namespace/key/value cannot be stored; value is
// checked only when checkValue is set.
func validateKV(namespace, key, value string, checkValue bool) error {
	switch {
	case namespace == "":
		return fmt.Errorf("the namespace is empty")
	case len(namespace) > MaxKVNameBytes:
		return fmt.Errorf("the namespace is %d bytes long; the limit is %d", len(namespace), MaxKVNameBytes)
	case key == "":
		return fmt.Errorf("the key is empty")
	case len(key) > MaxKVNameBytes:
		return fmt.Errorf("the key is %d bytes long; the limit is %d", len(key), MaxKVNameBytes)
	case checkValue && len(value) > MaxKVValueBytes:
		return fmt.Errorf("the value is %d bytes long; the limit is %d (64 KiB)", len(value), MaxKVValueBytes)
	}
	return nil
}

// errKVDirSync marks a write whose rename happened but whose directory
// fsync failed: the new file is in place (so memory must keep the change),
// but it may not survive a crash.
var errKVDirSync = errors.New("namesrv: syncing the KV config directory")

// kvFile is the on-disk form, RocketMQ's kvConfig.json layout, so a file
// from a Java name server can be reused.
type kvFile struct {
	ConfigTable map[string]map[string]string `json:"configTable"`
}

// kvStore is the namespace → key → value config, persisted to path (when
// not empty) on every change.
type kvStore struct {
	path string

	mu    sync.Mutex // held across the file write: changes reach disk in order
	table map[string]map[string]string
}

// openKVStore loads path if it exists. A file that cannot be parsed is an
// error, not an empty store: silently starting empty would lose the config
// at the next write.
func openKVStore(path string) (*kvStore, error) {
	kv := &kvStore{path: path, table: make(map[string]map[string]string)}
	if path == "" {
		return kv, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return kv, nil
	}
	if err != nil {
		return nil, fmt.Errorf("namesrv: KV config %s: %w", path, err)
	}
	var f kvFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("namesrv: KV config %s is not valid JSON (fix or remove it): %w", path, err)
	}
	for ns, kvs := range f.ConfigTable {
		if len(kvs) > 0 {
			kv.table[ns] = kvs
		}
	}
	return kv, nil
}

// count is the number of entries, for the start-up log.
func (kv *kvStore) count() int {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	n := 0
	for _, m := range kv.table {
		n += len(m)
	}
	return n
}

// put stores a value and persists; on a write failure the table is left as
// it was.
func (kv *kvStore) put(namespace, key, value string) error {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	m := kv.table[namespace]
	old, had := m[key]
	if had && old == value {
		return nil
	}
	if m == nil {
		m = make(map[string]string)
		kv.table[namespace] = m
	}
	m[key] = value
	if err := kv.persistLocked(); err != nil {
		if errors.Is(err, errKVDirSync) {
			return err
		}
		if had {
			m[key] = old
		} else {
			delete(m, key)
			if len(m) == 0 {
				delete(kv.table, namespace)
			}
		}
		return err
	}
	return nil
}

// get returns a value.
func (kv *kvStore) get(namespace, key string) (string, bool) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	v, ok := kv.table[namespace][key]
	return v, ok
}

// remove deletes a value and persists; deleting a missing key is not an
// error (RocketMQ's behaviour).
func (kv *kvStore) remove(namespace, key string) error {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	m := kv.table[namespace]
	old, had := m[key]
	if !had {
		return nil
	}
	delete(m, key)
	if len(m) == 0 {
		delete(kv.table, namespace)
	}
	if err := kv.persistLocked(); err != nil {
		if errors.Is(err, errKVDirSync) {
			return err
		}
		if len(m) == 0 {
			kv.table[namespace] = m
		}
		m[key] = old
		return err
	}
	return nil
}

// list returns a copy of a namespace's entries (nil when it has none).
func (kv *kvStore) list(namespace string) map[string]string {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if m := kv.table[namespace]; len(m) > 0 {
		return maps.Clone(m)
	}
	return nil
}

// persistLocked writes the table to kv.path: temp file → fsync → rename →
// fsync the directory, so a crash leaves either the old or the new file.
// Caller holds kv.mu.
func (kv *kvStore) persistLocked() error {
	if kv.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(kvFile{ConfigTable: kv.table}, "", "\t")
	if err != nil {
		return fmt.Errorf("namesrv: encoding the KV config: %w", err)
	}
	dir := filepath.Dir(kv.path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("namesrv: KV config directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(kv.path)+".tmp*")
	if err != nil {
		return fmt.Errorf("namesrv: writing the KV config: %w", err)
	}
	tmpName := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("namesrv: writing the KV config: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("namesrv: syncing the KV config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("namesrv: writing the KV config: %w", err)
	}
	if err := os.Rename(tmpName, kv.path); err != nil {
		return fmt.Errorf("namesrv: replacing the KV config: %w", err)
	}
	ok = true
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("%w: %w", errKVDirSync, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("%w: %w", errKVDirSync, err)
	}
	return nil
}
