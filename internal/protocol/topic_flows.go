package protocol

// GetTopicFlows (zonemq) asks a broker for its per-topic message counters
// since it started: messages and bytes stored per topic, and returned to
// pulls per topic and consumer group. An admin reads them twice and divides
// by the time between to get each topic's and group's TPS in and out
// (`zonemq admin topic stats`, mqadmin statsAll's InTPS/OutTPS). Optional
// ext "topic" keeps one topic. Answer: body JSON TopicFlows. They are the
// same counters as the broker's zonemq_broker_messages_in_total and
// zonemq_broker_messages_out_total metrics.
const GetTopicFlows RequestCode = 9302

func init() {
	requestNames[GetTopicFlows] = "ZONEMQ_GET_TOPIC_FLOWS"
}

// TopicFlows is GET_TOPIC_FLOWS's answer.
type TopicFlows struct {
	// AtMillis is the broker's clock when it read the counters.
	AtMillis int64 `json:"atMillis"`
	// StartMillis is when the broker started (the counters' zero).
	StartMillis int64 `json:"startMillis"`
	// In is one entry per topic stored to; Out one per topic and group
	// pulled from.
	In  []TopicFlow `json:"in"`
	Out []TopicFlow `json:"out"`
}

// TopicFlow is one counter pair.
type TopicFlow struct {
	Topic    string `json:"topic"`
	Group    string `json:"group,omitempty"`
	Messages int64  `json:"messages"`
	Bytes    int64  `json:"bytes"`
}
