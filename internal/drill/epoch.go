package drill

import "github.com/zonemq/zonemq/client"

// sendEpoch is the replication epoch of the master that acknowledged a
// send (0 without replication: the ledger checker then does not check it
// for fencing).
func sendEpoch(res *client.SendResult) int64 { return res.Epoch }
