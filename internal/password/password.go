// Package password owns password hashing (Argon2id in the PHC string format),
// its verification in constant time, the password rules users must meet and
// the generator of random passwords.
//
// Hashing is deliberately slow and memory-hungry, so a Hasher bounds how many
// hash and verify operations run at once. Stored hashes are parsed strictly
// and their parameters bounded, so that a tampered hash can neither crash the
// server nor make it allocate without limit.
//
// This package must not touch storage or HTTP: callers load and store the
// encoded hashes and turn errors into answers.
package password

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Params are the Argon2id cost parameters.
type Params struct {
	Memory  uint32 // KiB
	Time    uint32 // passes over the memory
	Threads uint8  // lanes
	SaltLen uint32 // bytes
	KeyLen  uint32 // bytes
}

// DefaultParams is OWASP's recommended Argon2id configuration (19 MiB,
// 2 passes, 1 lane).
var DefaultParams = Params{Memory: 19456, Time: 2, Threads: 1, SaltLen: 16, KeyLen: 32}

// Limits on parameters: a hash outside them is refused, so that a tampered
// hash cannot make the server allocate or compute without bound.
const (
	MaxMemory  = 1 << 20 // KiB, i.e. 1 GiB
	MaxTime    = 100
	MaxThreads = 64
	MinLen     = 8    // bytes of salt or key
	MaxLen     = 1024 // bytes of salt or key
)

// ErrInvalidHash is wrapped by every error about an encoded hash that is
// malformed or whose parameters are outside the limits.
var ErrInvalidHash = errors.New("invalid password hash")

// Validate reports whether p is within the limits Verify accepts.
func (p Params) Validate() error {
	switch {
	case p.Time < 1 || p.Time > MaxTime:
		return fmt.Errorf("time %d outside [1, %d]", p.Time, MaxTime)
	case p.Threads < 1 || p.Threads > MaxThreads:
		return fmt.Errorf("threads %d outside [1, %d]", p.Threads, MaxThreads)
	case p.Memory < 8*uint32(p.Threads) || p.Memory > MaxMemory:
		return fmt.Errorf("memory %d KiB outside [8*threads, %d]", p.Memory, MaxMemory)
	case p.SaltLen < MinLen || p.SaltLen > MaxLen:
		return fmt.Errorf("salt length %d outside [%d, %d]", p.SaltLen, MinLen, MaxLen)
	case p.KeyLen < MinLen || p.KeyLen > MaxLen:
		return fmt.Errorf("key length %d outside [%d, %d]", p.KeyLen, MinLen, MaxLen)
	}
	return nil
}

// kdfFunc derives a key of p.KeyLen bytes; p.SaltLen is ignored.
type kdfFunc func(password, salt []byte, p Params) []byte

func argon2id(password, salt []byte, p Params) []byte {
	return argon2.IDKey(password, salt, p.Time, p.Memory, p.Threads, p.KeyLen)
}

// Hasher hashes and verifies passwords with fixed parameters, running at most
// a fixed number of operations at once. It is safe for concurrent use.
type Hasher struct {
	params Params
	sem    chan struct{}
	dummy  string  // an encoded hash with params, for Dummy
	kdf    kdfFunc // argon2id; replaced by tests
}

// NewHasher returns a Hasher using p that runs at most maxConcurrent hash or
// verify operations at once; further callers wait for a slot. It panics if p
// is outside the limits (see Params.Validate) or maxConcurrent < 1: both are
// configuration errors to catch at start-up.
func NewHasher(p Params, maxConcurrent int) *Hasher {
	if err := p.Validate(); err != nil {
		panic("password: invalid params: " + err.Error())
	}
	if maxConcurrent < 1 {
		panic("password: maxConcurrent must be at least 1")
	}
	// The dummy's salt and key are fixed and arbitrary: no password is
	// expected to match it, only the cost matters.
	salt := make([]byte, p.SaltLen)
	for i := range salt {
		salt[i] = byte(i)
	}
	return &Hasher{
		params: p,
		sem:    make(chan struct{}, maxConcurrent),
		dummy:  encode(p, salt, make([]byte, p.KeyLen)),
		kdf:    argon2id,
	}
}

// Params returns the parameters new hashes are made with.
func (h *Hasher) Params() Params { return h.params }

// acquire takes a slot, or returns the context's error once it is done.
func (h *Hasher) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("waiting for a hashing slot: %w", err)
	}
	select {
	case h.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for a hashing slot: %w", ctx.Err())
	}
}

func (h *Hasher) release() { <-h.sem }

// Hash returns the PHC string of password with a fresh random salt:
// $argon2id$v=19$m=<memory>,t=<time>,p=<threads>$<salt>$<key>, salt and key
// in standard base64 without padding.
func (h *Hasher) Hash(ctx context.Context, password string) (string, error) {
	salt := make([]byte, h.params.SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("reading salt: %w", err)
	}
	if err := h.acquire(ctx); err != nil {
		return "", err
	}
	defer h.release()
	key := h.kdf([]byte(password), salt, h.params)
	return encode(h.params, salt, key), nil
}

// Verify reports whether password matches the encoded hash, recomputing it
// with the parameters in the hash and comparing in constant time.
// needsRehash is true when the password matches but the hash was made with
// parameters other than the Hasher's: the caller should then store a fresh
// Hash of it. (It is never true for a wrong password, so that a caller cannot
// replace a hash with one of a wrong guess.) A malformed hash, or one whose
// parameters are outside the limits, is an error wrapping ErrInvalidHash.
func (h *Hasher) Verify(ctx context.Context, encoded, password string) (ok, needsRehash bool, err error) {
	p, salt, key, err := decode(encoded)
	if err != nil {
		return false, false, err
	}
	if err := h.acquire(ctx); err != nil {
		return false, false, err
	}
	defer h.release()
	got := h.kdf([]byte(password), salt, p)
	if subtle.ConstantTimeCompare(got, key) != 1 {
		return false, false, nil
	}
	return true, p != h.params, nil
}

// Dummy spends the time and memory of verifying password against a hash made
// with the Hasher's parameters, and discards the result. Sign-in calls it
// when the user is unknown, so that the answer takes as long as for a known
// user.
func (h *Hasher) Dummy(ctx context.Context, password string) {
	_, _, _ = h.Verify(ctx, h.dummy, password)
}

const (
	prefix  = "$argon2id$v=19$"
	b64Chrs = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
)

var b64 = base64.RawStdEncoding.Strict()

func encode(p Params, salt, key []byte) string {
	return fmt.Sprintf("%sm=%d,t=%d,p=%d$%s$%s", prefix, p.Memory, p.Time, p.Threads,
		b64.EncodeToString(salt), b64.EncodeToString(key))
}

// decode parses a PHC string strictly: only the canonical form encode
// produces is accepted.
func decode(s string) (p Params, salt, key []byte, err error) {
	fail := func(format string, args ...any) (Params, []byte, []byte, error) {
		return Params{}, nil, nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidHash}, args...)...)
	}
	rest, found := strings.CutPrefix(s, prefix)
	if !found {
		return fail("not an argon2id version 19 hash")
	}
	fields := strings.Split(rest, "$")
	if len(fields) != 3 {
		return fail("want 3 fields after the version, got %d", len(fields))
	}
	kvs := strings.Split(fields[0], ",")
	if len(kvs) != 3 {
		return fail("want parameters m, t and p")
	}
	var vals [3]uint64
	for i, name := range []string{"m", "t", "p"} {
		v, ok := strings.CutPrefix(kvs[i], name+"=")
		if !ok {
			return fail("want parameter %s in position %d", name, i+1)
		}
		n, err := parseDecimal(v)
		if err != nil {
			return fail("parameter %s: %v", name, err)
		}
		vals[i] = n
	}
	mem, tim, thr := vals[0], vals[1], vals[2]
	if mem > MaxMemory || tim > MaxTime || thr > MaxThreads {
		return fail("parameters m=%d,t=%d,p=%d above the limits", mem, tim, thr)
	}
	salt, err = decodeB64(fields[1])
	if err != nil {
		return fail("salt: %v", err)
	}
	key, err = decodeB64(fields[2])
	if err != nil {
		return fail("key: %v", err)
	}
	p = Params{Memory: uint32(mem), Time: uint32(tim), Threads: uint8(thr),
		SaltLen: uint32(len(salt)), KeyLen: uint32(len(key))}
	if err := p.Validate(); err != nil {
		return fail("%v", err)
	}
	return p, salt, key, nil
}

// parseDecimal parses a canonical decimal: digits only, no sign, no leading
// zero, at most 10 digits.
func parseDecimal(s string) (uint64, error) {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q is not a canonical decimal", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a canonical decimal", s)
		}
	}
	return strconv.ParseUint(s, 10, 64)
}

// decodeB64 decodes unpadded standard base64 of at most MaxLen bytes,
// refusing anything outside the alphabet (the decoder would skip newlines).
func decodeB64(s string) ([]byte, error) {
	if len(s) > b64.EncodedLen(MaxLen) {
		return nil, errors.New("too long")
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(b64Chrs, s[i]) < 0 {
			return nil, fmt.Errorf("invalid base64 character at offset %d", i)
		}
	}
	b, err := b64.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("invalid base64: %w", err)
	}
	return b, nil
}
