package protocol

// QueryQueueLocks asks a broker which queues of a consumer group are locked
// for orderly consumption, and by whom: its lock table, as LOCK_BATCH_MQ
// judges it now (a lapsed lock, or one whose owner left the group, is not
// held). zonemq's own code (docs/protocol.md): RocketMQ has no request that
// shows the lock table, and a partition drill judges queue ownership from
// the brokers, not from what the clients believe. Ext: consumerGroup; the
// answer's body is QueueLocksBody.
const QueryQueueLocks RequestCode = 9301

func init() {
	requestNames[QueryQueueLocks] = "ZONEMQ_QUERY_QUEUE_LOCKS"
}

// QueueLock is one held lock: the queue and the client id of its owner.
type QueueLock struct {
	Queue    MessageQueue `json:"mq"`
	ClientID string       `json:"clientId"`
}

// QueueLocksBody is QUERY_QUEUE_LOCKS' answer: the group's held locks on
// the broker that answered, sorted by queue.
type QueueLocksBody struct {
	ConsumerGroup string `json:"consumerGroup"`
	// Master tells whether the broker that answered is its group's master
	// (a replica grants locks too, to the consumers that read from it while
	// they see no master).
	Master bool        `json:"master"`
	Locks  []QueueLock `json:"locks"`
}
