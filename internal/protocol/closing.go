package protocol

// BrokerClosing is a broker's notice to a connected zonemq consumer that it
// is stopping cleanly (docs/protocol.md): the consumer stops pulling that
// broker's queues, lets their handlers finish, commits their offsets and
// only then answers, so a planned stop replays nothing. The broker sends it
// after leaving the routes and waits a bounded time for the answers. No ext
// fields, no body; stock clients never get it (they announce no heartbeat
// interval, see HeartbeatIntervalMillis).
const BrokerClosing RequestCode = 9303

func init() {
	requestNames[BrokerClosing] = "ZONEMQ_BROKER_CLOSING"
}
