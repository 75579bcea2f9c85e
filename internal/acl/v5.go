package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
)

// V5Auth is the credential a RocketMQ 5 client sends in its gRPC
// "authorization" metadata, signed over its x-mq-date-time:
//
//	MQv2-HMAC-SHA1 Credential=AK[/…], SignedHeaders=x-mq-date-time, Signature=HEX
//
// The Go client writes Credential=AK//Rocketmq and lowercase hex, the Java
// client Credential=AK and uppercase hex; both are read.
type V5Auth struct {
	AccessKey string
	DateTime  string // the x-mq-date-time value the signature covers
	Signature []byte
}

// ParseV5Authorization reads an authorization value; dateTime is the
// call's x-mq-date-time.
func ParseV5Authorization(header, dateTime string) (V5Auth, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(header), "MQv2-HMAC-SHA1")
	if !ok {
		return V5Auth{}, fmt.Errorf("%w: the authorization is not MQv2-HMAC-SHA1", ErrDenied)
	}
	a := V5Auth{DateTime: dateTime}
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch strings.TrimSpace(k) {
		case "Credential":
			a.AccessKey, _, _ = strings.Cut(strings.TrimSpace(v), "/")
		case "SignedHeaders":
			if !strings.EqualFold(strings.TrimSpace(v), "x-mq-date-time") {
				return V5Auth{}, fmt.Errorf("%w: SignedHeaders %q: only x-mq-date-time is understood", ErrDenied, v)
			}
		case "Signature":
			sig, err := hex.DecodeString(strings.TrimSpace(v))
			if err != nil {
				return V5Auth{}, fmt.Errorf("%w: the signature is not hex", ErrDenied)
			}
			a.Signature = sig
		}
	}
	if a.AccessKey == "" || a.Signature == nil || a.DateTime == "" {
		return V5Auth{}, fmt.Errorf("%w: the authorization needs Credential, Signature and an x-mq-date-time", ErrDenied)
	}
	return a, nil
}

// CheckV5 decides a RocketMQ 5 call from remote ("ip:port") needing
// resources: a (nil when the call carried no authorization) must name an
// account whose secret key signed its date-time, unless an address is
// white-listed. The signature covers the date-time only (the RocketMQ 5
// clients' design), so it authenticates the account but binds no request.
func (c *Checker) CheckV5(a *V5Auth, remote, what string, resources []Resource) error {
	ak := ""
	if a != nil {
		ak = a.AccessKey
	}
	acct, pass, err := c.account(ak, remote, what)
	if acct == nil || pass {
		return err
	}
	mac := hmac.New(sha1.New, []byte(acct.SecretKey))
	mac.Write([]byte(a.DateTime))
	if !hmac.Equal(mac.Sum(nil), a.Signature) {
		return fmt.Errorf("%w: the signature of %s does not match accessKey %q's secret key", ErrDenied, what, ak)
	}
	return resourcesAllowed(acct, ak, resources)
}
