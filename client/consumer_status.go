package client

// TopicRouted reports whether the consumer has a route to topic with at
// least one readable queue: the topic exists. The consumer may still hold
// none of its queues (the group's other consumers may hold them all). A
// command-line tool uses it to tell a user who waits for messages that the
// topic does not exist yet.
func (pc *PushConsumer) TopicRouted(topic string) bool {
	r := pc.c.routes.cached(topic)
	return r != nil && len(r.readBrokers()) > 0
}
