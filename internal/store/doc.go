// Package store is zonemq's durable message store, laid out the way RocketMQ
// lays out its own: one commit log of fixed-size segments holding every
// message in the stored-message format, a consume queue per topic/queue that
// indexes the commit log with fixed 20-byte entries, consumer offsets and
// broker metadata as JSON files, a checkpoint, and crash recovery that
// truncates only a torn tail and says what it dropped.
//
// A Store is safe for concurrent use. Appends are serialised by one mutex that
// owns the write position; reads run concurrently with appends and with each
// other. docs/storage.md describes the files, the recovery rules and the lock
// order.
package store
