package upgrade

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// A binary's signature is Ed25519 over the SHA-256 digest of the binary
// (the 32 bytes of the digest are the signed message), sent base64
// (standard alphabet) in ?signature=. Keys are base64 too: a public key is
// its 32 bytes; a private key its 32-byte seed or the 64-byte key.

// ParsePublicKey reads a base64 Ed25519 public key.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, errors.New("not an Ed25519 public key: want the base64 of its 32 bytes (svc upgrade keygen prints one)")
	}
	return ed25519.PublicKey(b), nil
}

// ParsePrivateKey reads a base64 Ed25519 private key (seed or whole key).
func ParsePrivateKey(s string) (ed25519.PrivateKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	switch {
	case err != nil:
	case len(b) == ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case len(b) == ed25519.PrivateKeySize:
		return ed25519.PrivateKey(b), nil
	}
	return nil, errors.New("not an Ed25519 private key: want the base64 of its 32-byte seed (svc upgrade keygen prints one)")
}

// GenerateKey makes a key pair, both base64.
func GenerateKey() (public, private string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", err
	}
	return base64.StdEncoding.EncodeToString(pub), base64.StdEncoding.EncodeToString(priv.Seed()), nil
}

// Sign signs a binary's SHA-256 digest; the answer is base64.
func Sign(priv ed25519.PrivateKey, digest [32]byte) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(priv, digest[:]))
}

// Signature problems, told apart for the refusal.
var (
	ErrNoSignature  = errors.New("the binary is not signed")
	ErrBadSignature = errors.New("the signature does not verify")
)

// Verify checks sig (base64) over digest with pub. A missing signature is
// ErrNoSignature; a malformed or wrong one ErrBadSignature.
func Verify(pub ed25519.PublicKey, digest [32]byte, sig string) error {
	if sig == "" {
		return ErrNoSignature
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(sig))
	if err != nil || len(b) != ed25519.SignatureSize {
		return fmt.Errorf("%w: it is not the base64 of a %d-byte Ed25519 signature", ErrBadSignature, ed25519.SignatureSize)
	}
	if !ed25519.Verify(pub, digest[:], b) {
		return fmt.Errorf("%w with the configured upgrade.signing_public_key", ErrBadSignature)
	}
	return nil
}
