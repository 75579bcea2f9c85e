package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/zonemq/zonemq/internal/member"
)

// The ext fields RocketMQ ACL 1.0 clients add to every request
// (rocketmq-client-go's primitive.Credentials, the Java AclClientRPCHook).
const (
	ExtAccessKey     = "AccessKey"
	ExtSignature     = "Signature"
	ExtSecurityToken = "SecurityToken"
)

// The ext fields zonemq's own signers add before signing, so that the
// signature, which covers every ext field, binds the request code and a
// time: a signature cannot be replayed as another request (RocketMQ's does
// not cover the code: an admin-signed stats read replayed as
// DELETE_TOPIC_IN_BROKER deleted the topic), nor later than BindWindow.
//
// RocketMQ's signature concatenates the values with no separator, so
// characters could shift between a neighbouring value and the code ("…2" +
// "15" signs like "…" + "215"): ExtRequestMAC is a MAC of its own over a
// framing that cannot shift, the code, every field as length-prefixed key
// and value, and the body.
const (
	ExtRequestCode = "zonemqReqCode"
	ExtRequestTime = "zonemqReqTime" // Unix milliseconds
	ExtRequestMAC  = "zonemqReqMAC"  // base64(HMAC-SHA256(secretKey, framing))
)

// BindWindow is how far a bound request's time may lie from the checker's
// clock either way.
const BindWindow = 2 * time.Minute

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

// Sign adds AccessKey and Signature to the ext fields (not nil) of a
// request of code, as RocketMQ clients do, after binding the code and now
// into them (ExtRequestCode, ExtRequestTime): call it last, after every
// other field and the body are final. It does nothing when either key is
// empty. RocketMQ servers check such a signature as any other.
func Sign(code int32, ext map[string]string, body []byte, accessKey, secretKey string, now time.Time) {
	if accessKey == "" || secretKey == "" {
		return
	}
	delete(ext, ExtSignature)
	ext[ExtRequestCode] = strconv.Itoa(int(code))
	ext[ExtRequestTime] = strconv.FormatInt(now.UnixMilli(), 10)
	ext[ExtAccessKey] = accessKey
	ext[ExtRequestMAC] = base64.StdEncoding.EncodeToString(bindMAC(code, ext, body, secretKey))
	ext[ExtSignature] = signature(signedContent(ext, body, ""), secretKey)
}

// bindMAC is ExtRequestMAC: member.FramedMAC with the account's secret over
// the code, every ext field but Signature, SecurityToken and ExtRequestMAC,
// and the body.
func bindMAC(code int32, ext map[string]string, body []byte, secretKey string) []byte {
	return member.FramedMAC([]byte(secretKey), code, ext, bindSkips, body)
}

// bindSkips are the fields bindMAC leaves out.
var bindSkips = map[string]bool{ExtSignature: true, ExtSecurityToken: true, ExtRequestMAC: true}

// checkBinding checks the code and time a zonemq signer bound into a
// request. A request with neither (a stock RocketMQ client) is unbound:
// bound reports false, and the caller decides whether that is enough.
func checkBinding(code int32, ext map[string]string, body []byte, secretKey string, now time.Time) (bound bool, err error) {
	c, hasCode := ext[ExtRequestCode]
	t, hasTime := ext[ExtRequestTime]
	mac, hasMAC := ext[ExtRequestMAC]
	if !hasCode && !hasTime && !hasMAC {
		return false, nil
	}
	if !hasCode || !hasTime || !hasMAC {
		return false, fmt.Errorf("%w: request code %d binds only some of %s, %s and %s", ErrDenied, code, ExtRequestCode, ExtRequestTime, ExtRequestMAC)
	}
	if c != strconv.Itoa(int(code)) {
		return false, fmt.Errorf("%w: the signature was made for request code %s, not %d (a replayed signature?)", ErrDenied, c, code)
	}
	ms, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return false, fmt.Errorf("%w: request code %d: bad %s %q", ErrDenied, code, ExtRequestTime, t)
	}
	if skew := now.Sub(time.UnixMilli(ms)); skew > BindWindow || skew < -BindWindow {
		return false, fmt.Errorf("%w: request code %d was signed %v from this server's clock, outside the %v window (a replay, or clocks out of step)",
			ErrDenied, code, skew.Round(time.Millisecond), BindWindow)
	}
	raw, err := base64.StdEncoding.DecodeString(mac)
	if err != nil || !hmac.Equal(raw, bindMAC(code, ext, body, secretKey)) {
		return false, fmt.Errorf("%w: request code %d: %s does not match its fields and body (altered, or shifted between fields)",
			ErrDenied, code, ExtRequestMAC)
	}
	return true, nil
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
