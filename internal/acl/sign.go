package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"slices"
)

// The ext fields RocketMQ ACL 1.0 clients add to every request
// (rocketmq-client-go's primitive.Credentials, the Java AclClientRPCHook).
const (
	ExtAccessKey     = "AccessKey"
	ExtSignature     = "Signature"
	ExtSecurityToken = "SecurityToken"
)

// signedContent is what a signature covers: the values of every ext field
// but Signature, in the order of their sorted keys, then the body. skip
// names one more field to leave out ("" for none).
func signedContent(ext map[string]string, body []byte, skip string) []byte {
	keys := make([]string, 0, len(ext))
	size := len(body)
	for k, v := range ext {
		if k == ExtSignature || k == skip {
			continue
		}
		keys = append(keys, k)
		size += len(v)
	}
	slices.Sort(keys)
	buf := make([]byte, 0, size)
	for _, k := range keys {
		buf = append(buf, ext[k]...)
	}
	return append(buf, body...)
}

// signature is base64(HMAC-SHA1(secret, content)).
func signature(content []byte, secretKey string) string {
	mac := hmac.New(sha1.New, []byte(secretKey))
	mac.Write(content)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Sign adds AccessKey and Signature to a request's ext fields (ext must not
// be nil), as RocketMQ clients do: call it last, after every other field
// and the body are final. It does nothing when either key is empty.
func Sign(ext map[string]string, body []byte, accessKey, secretKey string) {
	if accessKey == "" || secretKey == "" {
		return
	}
	delete(ext, ExtSignature)
	ext[ExtAccessKey] = accessKey
	ext[ExtSignature] = signature(signedContent(ext, body, ""), secretKey)
}

// verifySignature checks ext's Signature with secretKey. A Java client
// signs SecurityToken with the rest, rocketmq-client-go sends it unsigned,
// so a request carrying one is accepted either way.
func verifySignature(ext map[string]string, body []byte, secretKey string) bool {
	got := ext[ExtSignature]
	if got == "" {
		return false
	}
	if hmac.Equal([]byte(got), []byte(signature(signedContent(ext, body, ""), secretKey))) {
		return true
	}
	if _, ok := ext[ExtSecurityToken]; ok {
		return hmac.Equal([]byte(got), []byte(signature(signedContent(ext, body, ExtSecurityToken), secretKey)))
	}
	return false
}
