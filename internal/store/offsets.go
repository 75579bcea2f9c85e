package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// offsetTable holds consumer offsets in memory and persists them to
// Dir/config/consumerOffset.json in RocketMQ's layout
// ({"offsetTable":{"topic@group":{"0":12}}}).
type offsetTable struct {
	path string

	mu    sync.Mutex
	table map[string]map[string]map[int32]int64 // group → topic → queue → offset
	dirty bool

	persistMu sync.Mutex // one writer of the file at a time
}

type offsetFile struct {
	OffsetTable map[string]map[int32]int64 `json:"offsetTable"`
}

func loadOffsetTable(configDir string) (*offsetTable, error) {
	t := &offsetTable{path: filepath.Join(configDir, "consumerOffset.json"), table: map[string]map[string]map[int32]int64{}}
	b, err := os.ReadFile(t.path)
	if errors.Is(err, os.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: read consumer offsets: %w", err)
	}
	var f offsetFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: %s is not valid JSON: %v", ErrCorrupt, t.path, err)
	}
	for key, queues := range f.OffsetTable {
		// Neither topics nor groups may contain '@'.
		topic, group, ok := strings.Cut(key, "@")
		if !ok {
			continue
		}
		for q, off := range queues {
			t.setLocked(group, topic, q, off)
		}
	}
	return t, nil
}

func (t *offsetTable) setLocked(group, topic string, queueID int32, off int64) {
	topics := t.table[group]
	if topics == nil {
		topics = map[string]map[int32]int64{}
		t.table[group] = topics
	}
	queues := topics[topic]
	if queues == nil {
		queues = map[int32]int64{}
		topics[topic] = queues
	}
	queues[queueID] = off
}

func (t *offsetTable) commit(group, topic string, queueID int32, off int64) {
	t.mu.Lock()
	t.setLocked(group, topic, queueID, off)
	t.dirty = true
	t.mu.Unlock()
}

func (t *offsetTable) query(group, topic string, queueID int32) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	off, ok := t.table[group][topic][queueID]
	return off, ok
}

func (t *offsetTable) group(group string) map[string]map[int32]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]map[int32]int64, len(t.table[group]))
	for topic, queues := range t.table[group] {
		cp := make(map[int32]int64, len(queues))
		for q, off := range queues {
			cp[q] = off
		}
		out[topic] = cp
	}
	return out
}

func (t *offsetTable) deleteGroup(group string) {
	t.mu.Lock()
	if _, ok := t.table[group]; ok {
		delete(t.table, group)
		t.dirty = true
	}
	t.mu.Unlock()
}

func (t *offsetTable) deleteTopic(topic string) {
	t.mu.Lock()
	for _, topics := range t.table {
		if _, ok := topics[topic]; ok {
			delete(topics, topic)
			t.dirty = true
		}
	}
	t.mu.Unlock()
}

// persist writes the table if it changed (or always, with force).
func (t *offsetTable) persist(force bool) error {
	t.persistMu.Lock()
	defer t.persistMu.Unlock()
	t.mu.Lock()
	if !t.dirty && !force {
		t.mu.Unlock()
		return nil
	}
	f := offsetFile{OffsetTable: map[string]map[int32]int64{}}
	for group, topics := range t.table {
		for topic, queues := range topics {
			cp := make(map[int32]int64, len(queues))
			for q, off := range queues {
				cp[q] = off
			}
			f.OffsetTable[topic+"@"+group] = cp
		}
	}
	t.dirty = false
	t.mu.Unlock()
	b, err := json.MarshalIndent(f, "", "  ")
	if err == nil {
		err = writeFileAtomic(t.path, append(b, '\n'))
	}
	if err != nil {
		t.mu.Lock()
		t.dirty = true
		t.mu.Unlock()
		return fmt.Errorf("store: persist consumer offsets: %w", err)
	}
	return nil
}

// CommitOffset records group's consumer offset for topic/queueID. It is kept
// in memory and written to Dir/config/consumerOffset.json every 200 ms
// when it changed, and at Close.
func (s *Store) CommitOffset(group, topic string, queueID int32, offset int64) {
	s.offsets.commit(group, topic, queueID, offset)
}

// QueryOffset returns group's committed offset for topic/queueID.
func (s *Store) QueryOffset(group, topic string, queueID int32) (int64, bool) {
	return s.offsets.query(group, topic, queueID)
}

// GroupOffsets returns a copy of group's offsets: topic → queue → offset.
func (s *Store) GroupOffsets(group string) map[string]map[int32]int64 {
	return s.offsets.group(group)
}

// DeleteGroupOffsets forgets every offset of group.
func (s *Store) DeleteGroupOffsets(group string) {
	s.offsets.deleteGroup(group)
}
