package member

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// The ext fields a member request carries.
const (
	// ExtTime is the signer's clock, Unix milliseconds.
	ExtTime = "zonemqMemberTime"
	// ExtMAC is base64(HMAC-SHA256) over the code, ExtTime, every other
	// ext field and the body.
	ExtMAC = "zonemqMemberMAC"
)

// Window is how far a request's ExtTime may lie from the verifier's clock
// either way. Members' clocks must agree within it (NTP does far better).
const Window = 2 * time.Minute

// ErrNotMember wraps every refusal Verify returns; roles answer it with
// NO_PERMISSION (16) and the error's text as the remark.
var ErrNotMember = errors.New("not an authenticated cluster member")

// unsigned are the ext fields a member MAC leaves out: its own, and those
// the ACL signer adds after it (RocketMQ ACL 1.0 signs every field, the
// member MAC included, so the two layers nest).
var unsigned = map[string]bool{ExtMAC: true, "Signature": true, "AccessKey": true, "SecurityToken": true,
	// internal/acl's binding of code and time, also added after the MAC.
	"zonemqReqCode": true, "zonemqReqTime": true, "zonemqReqMAC": true}

// Sign adds ExtTime and ExtMAC to ext (not nil) for a request of code with
// body. Call it after every other field and the body are final, and before
// any ACL signature. A nil s does nothing.
func (s *Secret) Sign(code int32, ext map[string]string, body []byte, now time.Time) {
	if s == nil {
		return
	}
	ext[ExtTime] = strconv.FormatInt(now.UnixMilli(), 10)
	ext[ExtMAC] = base64.StdEncoding.EncodeToString(s.mac(code, ext, body))
}

// Verify checks a member request. A nil s (member authentication off)
// accepts everything.
func (s *Secret) Verify(code int32, ext map[string]string, body []byte, now time.Time) error {
	if s == nil {
		return nil
	}
	got, ok := ext[ExtMAC]
	if !ok {
		return fmt.Errorf("%w: request code %d carries no %s; this cluster requires the cluster secret (--cluster-secret-file)", ErrNotMember, code, ExtMAC)
	}
	ms, err := strconv.ParseInt(ext[ExtTime], 10, 64)
	if err != nil {
		return fmt.Errorf("%w: request code %d: bad %s %q", ErrNotMember, code, ExtTime, ext[ExtTime])
	}
	if skew := now.Sub(time.UnixMilli(ms)); skew > Window || skew < -Window {
		return fmt.Errorf("%w: request code %d was signed %v from this server's clock, outside the %v window (a replay, or clocks out of step)", ErrNotMember, code, skew.Round(time.Millisecond), Window)
	}
	want := s.mac(code, ext, body)
	raw, err := base64.StdEncoding.DecodeString(got)
	if err != nil || !hmac.Equal(raw, want) {
		return fmt.Errorf("%w: request code %d: the member MAC does not match this server's cluster secret (%s)", ErrNotMember, code, s.id)
	}
	return nil
}

// mac is the member MAC of a request (FramedMAC with the request key).
func (s *Secret) mac(code int32, ext map[string]string, body []byte) []byte {
	return FramedMAC(s.requestKey, code, ext, unsigned, body)
}

// FramedMAC is HMAC-SHA256 with key over a framing that cannot be shifted
// between its parts: the code, then each ext field not in skip as
// length-prefixed key and value in sorted key order, then the body's length
// and bytes. The ACL's binding of code and time uses it too.
func FramedMAC(key []byte, code int32, ext map[string]string, skip map[string]bool, body []byte) []byte {
	keys := make([]string, 0, len(ext))
	for k := range ext {
		if !skip[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	m := hmac.New(sha256.New, key)
	var n [8]byte
	binary.BigEndian.PutUint32(n[:4], uint32(code))
	m.Write(n[:4])
	put := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		m.Write(n[:])
		m.Write(b)
	}
	for _, k := range keys {
		put([]byte(k))
		put([]byte(ext[k]))
	}
	put(body)
	return m.Sum(nil)
}
