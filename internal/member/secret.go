package member

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// MinSecretLen is the shortest cluster secret accepted, in bytes of text.
// NewSecretText makes 64 hex characters (256 bits).
const MinSecretLen = 32

// EnvSecretFile names the environment variable the CLI reads a secret
// file's path from when --cluster-secret-file is not given.
const EnvSecretFile = "ZONEMQ_CLUSTER_SECRET_FILE"

// Secret is a loaded cluster secret. Its zero value is not usable; a nil
// *Secret means member authentication is off (loopback only, or
// --insecure). Methods are safe for concurrent use.
type Secret struct {
	requestKey []byte // HMAC key for remoting requests
	caSeed     []byte // ed25519 seed of the derived member CA
	id         string // a short public fingerprint, for logs
}

// ParseSecret makes a Secret of text (surrounding white space is ignored).
func ParseSecret(text string) (*Secret, error) {
	text = strings.TrimSpace(text)
	if len(text) < MinSecretLen {
		return nil, fmt.Errorf("cluster secret: %d characters; at least %d are needed (zonemq cluster-secret --out FILE makes one)", len(text), MinSecretLen)
	}
	if strings.ContainsAny(text, "\r\n") {
		return nil, errors.New("cluster secret: more than one line")
	}
	return &Secret{
		requestKey: derive(text, "zonemq member request v1"),
		caSeed:     derive(text, "zonemq member ca v1"),
		id:         hex.EncodeToString(derive(text, "zonemq member id v1")[:4]),
	}, nil
}

// LoadSecret reads a secret file: one line of at least MinSecretLen
// characters. The file should be readable by its owner only; a file others
// may read is refused, as ssh refuses a private key.
func LoadSecret(path string) (*Secret, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("cluster secret: %s is readable by others (mode %v); chmod 600 it", path, st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	s, err := ParseSecret(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// NewSecretText returns a fresh random secret: 64 hex characters.
func NewSecretText() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("member: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// WriteSecretFile writes a fresh secret to path with mode 0600 (it must not
// exist) and returns it loaded.
func WriteSecretFile(path string) (*Secret, error) {
	text := NewSecretText()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	if _, err := f.WriteString(text + "\n"); err != nil {
		f.Close()
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	return ParseSecret(text)
}

// ID is a public fingerprint of the secret (8 hex characters), so logs can
// show that two servers hold different secrets without showing either.
func (s *Secret) ID() string { return s.id }

// derive is HMAC-SHA256(secret, label): one independent key per use.
func derive(secret, label string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(label))
	return m.Sum(nil)
}
