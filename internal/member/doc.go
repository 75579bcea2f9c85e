// Package member authenticates cluster members to each other
// (docs/security.md §0). Every server of one zonemq cluster — name servers,
// brokers, controller voters — and the operator's admin tool hold one
// cluster secret. From it:
//
//   - a remoting request between members carries an HMAC-SHA256 over its
//     request code, a timestamp, every ext field and the body (Sign,
//     Verify); a request outside the time window or with a wrong MAC is
//     refused;
//   - the controller's Raft transport runs over mutual TLS 1.3 whose
//     certificates chain to a CA derived from the secret (TLSConfig), so
//     only a holder of the secret can open or accept a Raft connection.
//
// The package knows nothing of request codes: each role decides which of
// its codes are member codes. Standard library only.
package member
