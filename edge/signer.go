package edge

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWTSigner makes the assertions: compact JWTs signed with the current
// signing key (EdDSA, header {alg, typ, kid}), claims sub, email, name,
// groups, aud (the app's ID, a string), iss, iat and exp = iat + 120 s.
//
// It keeps each assertion it signed and hands it out again for the same
// claims while more than half of its life is left and its key is still
// current, so the proxy's hot path neither signs nor allocates per
// request. The cache is sharded and bounded; a rotation makes every cached
// assertion stale at once, since entries are kept per (claims, kid).
type JWTSigner struct {
	keys   *SigningKeys
	issuer string
	now    func() time.Time

	seed     maphash.Seed
	shards   [signerShards]signerShard
	perShard int
}

var _ Signer = (*JWTSigner)(nil)

const (
	signerShards = 32
	// DefaultAssertionCache is how many assertions a signer keeps by
	// default.
	DefaultAssertionCache = 16384
)

// SignerConfig configures a JWTSigner.
type SignerConfig struct {
	Keys *SigningKeys
	// Issuer is the iss claim: the configuration's server.issuer.
	Issuer string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// CacheSize bounds the assertions kept (DefaultAssertionCache when 0).
	CacheSize int
}

// NewSigner returns a signer over the signing keys.
func NewSigner(c SignerConfig) (*JWTSigner, error) {
	if c.Keys == nil || c.Issuer == "" {
		return nil, errors.New("edge: a signer needs the signing keys and an issuer")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.CacheSize <= 0 {
		c.CacheSize = DefaultAssertionCache
	}
	s := &JWTSigner{keys: c.Keys, issuer: c.Issuer, now: c.Now, seed: maphash.MakeSeed(), perShard: max(1, c.CacheSize/signerShards)}
	for i := range s.shards {
		s.shards[i].m = map[uint64]*signed{}
	}
	return s, nil
}

// signerShard is one part of the cache.
type signerShard struct {
	mu sync.RWMutex
	m  map[uint64]*signed
}

// signed is a cached assertion; never modified once made.
type signed struct {
	claims    Claims // Groups is the signer's own copy
	kid       string
	token     string
	refreshAt time.Time // past it, less than half the assertion's life is left
}

// Assertion returns the signed assertion for c: a cached one while it is
// fresh and its key current, else a new one. It fails, and returns no
// token, when no key can sign.
func (s *JWTSigner) Assertion(ctx context.Context, c Claims) (string, error) {
	if c.Subject == "" || c.Audience == "" {
		return "", errors.New("edge: an assertion needs a subject and an audience")
	}
	key, err := s.keys.current(ctx)
	if err != nil {
		return "", err
	}
	now := s.now()
	h := s.hash(&c)
	sh := &s.shards[h%signerShards]
	sh.mu.RLock()
	e := sh.m[h]
	sh.mu.RUnlock()
	if e != nil && e.kid == key.kid && now.Before(e.refreshAt) && sameClaims(&e.claims, &c) {
		return e.token, nil
	}
	e, err = s.sign(key, c, now)
	if err != nil {
		return "", err
	}
	sh.mu.Lock()
	if len(sh.m) >= s.perShard {
		sh.evictLocked(now, s.perShard)
	}
	sh.m[h] = e
	sh.mu.Unlock()
	return e.token, nil
}

// wireClaims are an assertion's claims on the wire. aud is one string.
type wireClaims struct {
	Subject       string   `json:"sub"`
	Email         string   `json:"email"`
	EmailVerified bool     `json:"email_verified"`
	Name          string   `json:"name"`
	Groups        []string `json:"groups"`
	Audience      string   `json:"aud"`
	Issuer        string   `json:"iss"`
	IssuedAt      int64    `json:"iat"`
	ExpiresAt     int64    `json:"exp"`
}

// The jwt.Claims methods; only signing uses this type.
func (w *wireClaims) GetExpirationTime() (*jwt.NumericDate, error) {
	return jwt.NewNumericDate(time.Unix(w.ExpiresAt, 0)), nil
}
func (w *wireClaims) GetIssuedAt() (*jwt.NumericDate, error) {
	return jwt.NewNumericDate(time.Unix(w.IssuedAt, 0)), nil
}
func (w *wireClaims) GetNotBefore() (*jwt.NumericDate, error) { return nil, nil }
func (w *wireClaims) GetIssuer() (string, error)              { return w.Issuer, nil }
func (w *wireClaims) GetSubject() (string, error)             { return w.Subject, nil }
func (w *wireClaims) GetAudience() (jwt.ClaimStrings, error) {
	return jwt.ClaimStrings{w.Audience}, nil
}

var _ jwt.Claims = (*wireClaims)(nil)

func (s *JWTSigner) sign(key *signingKey, c Claims, now time.Time) (*signed, error) {
	iat := now.Unix()
	groups := slices.Clone(c.Groups)
	if groups == nil {
		groups = []string{}
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, &wireClaims{
		Subject: c.Subject, Email: c.Email, EmailVerified: c.EmailVerified, Name: c.Name, Groups: groups, Audience: c.Audience,
		Issuer: s.issuer, IssuedAt: iat, ExpiresAt: iat + int64(AssertionTTL/time.Second),
	})
	tok.Header["kid"] = key.kid
	str, err := tok.SignedString(key.priv)
	if err != nil {
		return nil, fmt.Errorf("edge: sign an assertion: %w", err)
	}
	c.Groups = groups
	return &signed{claims: c, kid: key.kid, token: str, refreshAt: time.Unix(iat, 0).Add(AssertionTTL / 2)}, nil
}

// hash keys the cache by the claims; a collision is told apart by
// sameClaims.
func (s *JWTSigner) hash(c *Claims) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	for _, f := range [...]string{c.Subject, c.Email, c.Name, c.Audience} {
		_, _ = h.WriteString(f)
		_ = h.WriteByte(0)
	}
	if c.EmailVerified {
		_ = h.WriteByte(2)
	}
	for _, g := range c.Groups {
		_, _ = h.WriteString(g)
		_ = h.WriteByte(1)
	}
	return h.Sum64()
}

func sameClaims(a, b *Claims) bool {
	return a.Subject == b.Subject && a.Email == b.Email && a.EmailVerified == b.EmailVerified && a.Name == b.Name && a.Audience == b.Audience &&
		slices.Equal(a.Groups, b.Groups)
}

// evictLocked makes room in a full shard: first the assertions too old to
// hand out, then, if that was not enough, an eighth of the shard
// (whichever entries the map yields first).
func (sh *signerShard) evictLocked(now time.Time, limit int) {
	for h, e := range sh.m {
		if !now.Before(e.refreshAt) {
			delete(sh.m, h)
		}
	}
	drop := len(sh.m) - limit + max(1, limit/8)
	for h := range sh.m {
		if drop <= 0 {
			break
		}
		delete(sh.m, h)
		drop--
	}
}
