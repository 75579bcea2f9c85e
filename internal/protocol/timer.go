package protocol

// Timer messages (RocketMQ 5): a message carrying one of these properties
// is held by the broker until its delivery time and then stored in its
// topic. TIMER_DELAY_SEC wins over TIMER_DELAY_MS, which wins over
// TIMER_DELIVER_MS, as in RocketMQ's broker.
// The delivery time itself, TIMER_DELIVER_MS (ms since the epoch), is
// PropertyTimerDeliverMS in properties.go.
const (
	// PropertyTimerDelaySec is a delay in seconds from the broker's receipt.
	PropertyTimerDelaySec = "TIMER_DELAY_SEC"
	// PropertyTimerDelayMS is a delay in milliseconds from the broker's receipt.
	PropertyTimerDelayMS = "TIMER_DELAY_MS"
	// PropertyTimerOutMS is the due time the broker settled on (ms since the
	// epoch), set on the held record and kept on the delivered message.
	PropertyTimerOutMS = "TIMER_OUT_MS"
	// TimerTopic holds timer messages until they are due (RocketMQ 5's
	// name), one queue.
	TimerTopic = "rmq_sys_wheel_timer"
)

// TraceTopic is where RocketMQ clients with message trace on (WithTrace)
// send their trace records (RocketMQ's RMQ_SYS_TRACE_TOPIC).
const TraceTopic = "RMQ_SYS_TRACE_TOPIC"
