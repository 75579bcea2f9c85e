package broker

import (
	"encoding/json"
	"fmt"

	"github.com/zonemq/zonemq/internal/protocol"
)

// topicJournalMinCompact is the fewest journal records that trigger a
// compaction. Compaction runs once the journal holds as many records as the
// last snapshot had topics (and at least this many), so its cost —
// rewriting topics.json, at most twice the snapshot's size — is spread over
// as many changes: creating a topic costs the same, amortised, with 100 or
// 100 000 topics.
const topicJournalMinCompact = 1024

// topicChange is one record of the topics journal (config/topics.journal):
// a topic's config set, or (Config nil) the topic deleted, with the data
// version after the change.
type topicChange struct {
	Topic       string                `json:"topic"`
	Config      *protocol.TopicConfig `json:"config,omitempty"`
	DataVersion protocol.DataVersion  `json:"dataVersion"`
}

// commitLocked bumps the data version and persists the change of topic:
// one fsynced journal record, and a rewrite of topics.json when the journal
// has grown as large as the table. Caller holds mu for writing.
func (t *topicTable) commitLocked(topic string) error {
	t.version.Counter++
	t.version.Timestamp = nowMillis()
	rec := topicChange{Topic: topic, DataVersion: t.version}
	if cfg, ok := t.configs[topic]; ok {
		rec.Config = &cfg
	}
	// The change goes to the journal even when a compaction follows: a
	// crash between the snapshot and emptying the journal then replays to
	// the snapshot's state.
	if err := t.store.AppendMetadataJournal(topicsMetadata, rec); err != nil {
		return fmt.Errorf("persisting the topic table: %w", err)
	}
	t.journaled++
	if t.journaled >= max(topicJournalMinCompact, t.snapshotTopics) {
		return t.compactLocked()
	}
	return nil
}

// compactLocked rewrites topics.json with the whole table and empties the
// journal. Caller holds mu for writing.
func (t *topicTable) compactLocked() error {
	if err := t.store.CompactMetadata(topicsMetadata, t.wrapperLocked()); err != nil {
		return fmt.Errorf("persisting the topic table: %w", err)
	}
	t.journaled, t.snapshotTopics = 0, len(t.configs)
	return nil
}

// replayJournal applies the journal over the loaded snapshot.
func (t *topicTable) replayJournal() error {
	n, err := t.store.LoadMetadataJournal(topicsMetadata, func(b []byte) error {
		var rec topicChange
		if err := json.Unmarshal(b, &rec); err != nil {
			return err
		}
		if rec.Config == nil {
			delete(t.configs, rec.Topic)
		} else {
			cfg := *rec.Config
			cfg.TopicName = rec.Topic
			t.configs[rec.Topic] = cfg
		}
		if rec.DataVersion.Counter > t.version.Counter {
			t.version = rec.DataVersion
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("replaying the topics journal: %w", err)
	}
	t.journaled = n
	return nil
}
