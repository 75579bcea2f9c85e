package member

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"time"
)

// ServerName is the name every member certificate carries and every member
// dials: members are told apart by address, not by certificate name.
const ServerName = "zonemq-member"

// caValidity is fixed so that every holder of the secret makes the same CA
// certificate, byte for byte (ed25519 signatures are deterministic).
var (
	caNotBefore = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	caNotAfter  = time.Date(2120, 1, 1, 0, 0, 0, 0, time.UTC)
)

// TLSConfig returns a mutual-TLS configuration for member-only links (the
// controller's Raft transport): TLS 1.3, a fresh leaf key signed by the CA
// derived from the secret, and both sides required to present such a
// certificate. Use the same config to listen and to dial.
func (s *Secret) TLSConfig() (*tls.Config, error) {
	caKey := ed25519.NewKeyFromSeed(s.caSeed[:ed25519.SeedSize])
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "zonemq cluster member CA " + s.id},
		NotBefore:             caNotBefore,
		NotAfter:              caNotAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("member CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("member CA: %w", err)
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("member key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, fmt.Errorf("member certificate: %w", err)
	}
	now := time.Now()
	leafTmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: ServerName},
		DNSNames:     []string{ServerName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, pub, caKey)
	if err != nil {
		return nil, fmt.Errorf("member certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: key}},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ServerName:   ServerName,
	}, nil
}
