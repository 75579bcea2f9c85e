// Package acl is zonemq's access control, compatible with RocketMQ ACL 1.0
// as clients send it: every request carries AccessKey and Signature ext
// fields, the signature being base64(HMAC-SHA1(secretKey, the values of the
// other ext fields in sorted key order followed by the body)). A Checker
// holds a plain_acl.yml file (accounts with a secret key, an admin flag,
// default and per-topic/per-group DENY|PUB|SUB|PUB|SUB permissions, white
// remote addresses) and re-reads it when it changes. Sign is the client
// side. The roles decide which permission each request code needs; this
// package knows nothing of request codes or the wire.
//
// See docs/security.md for what is protected and how to configure it.
package acl
