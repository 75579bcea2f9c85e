package protocol_test

import (
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/testutil"
)

func TestValidateTopicAndGroup(t *testing.T) {
	for _, tc := range []struct {
		name      string
		topicOK   bool
		groupOK   bool
		errSubstr string
	}{
		{"TopicTest", true, true, ""},
		{"a", true, true, ""},
		{"with-dash_and_underscore", true, true, ""},
		{"%RETRY%group", true, true, ""},
		{"%DLQ%group", true, true, ""},
		{"ns%topic", true, true, ""},
		{"a|b", true, true, ""},
		{"0123456789", true, true, ""},
		{"TBW102", true, true, ""}, // a system topic is a valid name; senders refuse it
		{strings.Repeat("g", 120), true, true, ""},
		{strings.Repeat("g", 121), true, false, "limit is 120"},
		{strings.Repeat("t", 127), true, false, ""},
		{strings.Repeat("t", 128), false, false, "limit is 127"},
		{"", false, false, "empty"},
		{"has space", false, false, "outside"},
		{"dot.topic", false, false, "outside"},
		{"slash/topic", false, false, "outside"},
		{"colon:topic", false, false, "outside"},
		{"tab\t", false, false, "outside"},
		{"ünïcode", false, false, "outside"},
		{"emoji😀", false, false, "outside"},
	} {
		topicErr := protocol.ValidateTopic(tc.name)
		groupErr := protocol.ValidateGroup(tc.name)
		testutil.Equal(t, topicErr == nil, tc.topicOK, "topic "+tc.name, topicErr)
		testutil.Equal(t, groupErr == nil, tc.groupOK, "group "+tc.name, groupErr)
		if tc.errSubstr != "" {
			err := topicErr
			if err == nil {
				err = groupErr
			}
			testutil.True(t, strings.Contains(err.Error(), tc.errSubstr), err.Error())
		}
	}
}

func TestValidateLimits(t *testing.T) {
	testutil.Equal(t, protocol.MaxTopicLength, 127)
	testutil.Equal(t, protocol.MaxGroupLength, 120)
	testutil.Equal(t, protocol.MaxPropertiesLength, 32767)
	testutil.Equal(t, protocol.DefaultMaxMessageSize, 4<<20)
	// The retry topic of the longest group is still a valid topic.
	testutil.NoError(t, protocol.ValidateTopic(protocol.RetryTopic(strings.Repeat("g", protocol.MaxGroupLength))))
}

func TestValidateSystemTopics(t *testing.T) {
	testutil.Equal(t, protocol.RetryTopic("g"), "%RETRY%g")
	testutil.Equal(t, protocol.DLQTopic("g"), "%DLQ%g")
	for topic, want := range map[string]bool{
		"TBW102": true, "SCHEDULE_TOPIC_XXXX": true, "RMQ_SYS_TRACE_TOPIC": true,
		"RMQ_SYS_": false, "TopicTest": false, "%RETRY%g": false, "tbw102": false,
	} {
		testutil.Equal(t, protocol.IsSystemTopic(topic), want, topic)
	}
}
