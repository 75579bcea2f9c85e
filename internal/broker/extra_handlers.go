package broker

// registerExtraHandlers is the seam for retry, dead-letter, delay,
// transaction and queue-lock support (CONSUMER_SEND_MSG_BACK,
// LOCK_BATCH_MQ, UNLOCK_BATCH_MQ, END_TRANSACTION, the schedule service…).
// New calls it last, when the store, the topic and group tables, the client
// registry and the core handlers are ready. Register handlers with s.handle,
// set s.schedule / s.prepareTransaction / s.beforeRetryStore, start work
// with s.addLoop and persist state with s.addCloser. This file belongs to
// the engineer who adds those features; the core leaves it empty.
func (s *Server) registerExtraHandlers() {}
