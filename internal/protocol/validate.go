package protocol

import (
	"fmt"
	"sort"
)

// Limits. Every one is also documented in docs/protocol.md.
const (
	// MaxTopicLength is the longest topic name (so the v1 stored format's
	// one-byte length always fits, for Go and Java readers alike).
	MaxTopicLength = 127
	// MaxGroupLength is the longest group name (%RETRY%+group stays ≤ 127).
	MaxGroupLength = 120
	// MaxPropertiesLength is the longest properties string (int16 length).
	MaxPropertiesLength = 32767
	// DefaultMaxMessageSize is the default body limit (RocketMQ's 4 MiB).
	DefaultMaxMessageSize = 4 << 20
)

// Well-known topic names and prefixes.
const (
	AutoCreateTopicKey = "TBW102"
	RetryGroupPrefix   = "%RETRY%"
	DLQGroupPrefix     = "%DLQ%"
	ScheduleTopic      = "SCHEDULE_TOPIC_XXXX"
	DefaultCluster     = "DefaultCluster"
)

// RetryTopic returns the retry topic of a consumer group.
func RetryTopic(group string) string { return RetryGroupPrefix + group }

// DLQTopic returns the dead-letter topic of a consumer group.
func DLQTopic(group string) string { return DLQGroupPrefix + group }

func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '%', c == '|', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// ValidateTopic applies RocketMQ's topic rules: 1–127 characters from
// [%|a-zA-Z0-9_-]. It does not reject system topics; senders check those.
func ValidateTopic(topic string) error {
	switch {
	case topic == "":
		return fmt.Errorf("the topic name is empty")
	case len(topic) > MaxTopicLength:
		return fmt.Errorf("the topic name is %d characters long; the limit is %d", len(topic), MaxTopicLength)
	case !validName(topic):
		return fmt.Errorf("the topic name %q contains characters outside [%%|a-zA-Z0-9_-]", topic)
	}
	return nil
}

// ValidateGroup applies RocketMQ's group rules: 1–120 characters from
// [%|a-zA-Z0-9_-].
func ValidateGroup(group string) error {
	switch {
	case group == "":
		return fmt.Errorf("the group name is empty")
	case len(group) > MaxGroupLength:
		return fmt.Errorf("the group name is %d characters long; the limit is %d", len(group), MaxGroupLength)
	case !validName(group):
		return fmt.Errorf("the group name %q contains characters outside [%%|a-zA-Z0-9_-]", group)
	}
	return nil
}

// IsSystemTopic reports whether topic belongs to the broker (TBW102, the
// schedule topic, RMQ_SYS_ topics) and must not be sent to by applications.
func IsSystemTopic(topic string) bool {
	return topic == AutoCreateTopicKey || topic == ScheduleTopic || topic == TimerTopic || len(topic) > 8 && topic[:8] == "RMQ_SYS_"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
