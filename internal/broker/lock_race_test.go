//go:build race

package broker

// raceDetector is true in -race builds. rocketmq-client-go's orderly push
// consumer has a data race of its own (processQueue.takeMessages reads the
// message tree that pullMessage writes without a lock), which fails any test
// running it under the race detector.
const raceDetector = true
