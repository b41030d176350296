// Package assertion verifies, for an app hosted on svc, the signed identity
// assertion the svc proxy attaches to every request it forwards: the
// X-Svc-Assertion header, an Ed25519 JWT that is the only statement about
// the caller an app may trust (the other X-Svc-* headers are a convenience,
// not a proof).
//
// A Verifier fetches svc's JSON Web Key Set, keeps it as long as its
// Cache-Control max-age allows, and fetches it again when a token names a
// key it does not know (a rotation), at most once per RefetchInterval. It
// accepts only EdDSA signatures by an Ed25519 key of that set, an unexpired
// assertion made for this app (aud is the app's ID), and, when an issuer is
// configured, from that issuer. Everything else is refused: alg "none",
// HMAC (including HS256 keyed with the public key), a token for another
// app, an expired one, an unknown key.
//
//	v, err := assertion.New(assertion.Options{
//		JWKSURL:  "http://svc.example.com:8080/.well-known/jwks.json",
//		Issuer:   "http://svc.example.com:8080",
//		Audience: "app_01J…", // this app's ID
//	})
//	…
//	http.ListenAndServe(":8080", v.Middleware(mux))
//
// and in a handler, assertion.FromContext(r.Context()) returns the caller.
//
// It must not import anything of svc: programs outside the module use it,
// like the API client (package api).
package assertion

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Header is the request header that carries the assertion.
const Header = "X-Svc-Assertion"

// Defaults of Options.
const (
	DefaultLeeway          = 10 * time.Second
	DefaultRefetchInterval = time.Second
	// DefaultMaxAge is how long a key set is kept when its answer says
	// nothing; any max-age is held between MinMaxAge and MaxMaxAge.
	DefaultMaxAge = 5 * time.Minute
	MinMaxAge     = time.Second
	MaxMaxAge     = time.Hour
	// maxTokenBytes and maxJWKSBytes bound what is parsed.
	maxTokenBytes = 16 << 10
	maxJWKSBytes  = 1 << 20
)

// Errors of Verify. Every refusal wraps ErrInvalid, and the more precise
// of these where one applies.
var (
	ErrInvalid    = errors.New("assertion: invalid")
	ErrMissing    = errors.New("assertion: no assertion")
	ErrAlgorithm  = errors.New("assertion: not an EdDSA signature")
	ErrUnknownKey = errors.New("assertion: signed by a key the JWKS does not publish")
	ErrSignature  = errors.New("assertion: bad signature")
	ErrExpired    = errors.New("assertion: expired or not yet valid")
	ErrAudience   = errors.New("assertion: made for another app")
	ErrIssuer     = errors.New("assertion: from another issuer")
	// ErrJWKS is a key set that could not be fetched or read.
	ErrJWKS = errors.New("assertion: key set unavailable")
)

// Claims describe the caller.
type Claims struct {
	// Subject is the caller's stable ID: a user's usr_… ID (unchanged by a
	// new email or identity provider), a service token's tok_… ID, or
	// "anonymous" for a visitor the app is shared with as everyone. It is
	// the key to store the caller's data under.
	Subject string
	// Email is the user's address as svc has it, possibly empty. Rely on
	// it only when EmailVerified is true: a person may set their own
	// address to anything no other account has (as OpenID Connect's email
	// and email_verified claims work).
	Email string
	// EmailVerified says svc vouches for Email: an administrator set it
	// (or an identity provider verified it).
	EmailVerified bool
	Name          string
	// Groups are the names of the user's groups.
	Groups []string
	// Audience is the app's ID the assertion was made for.
	Audience  string
	Issuer    string
	IssuedAt  time.Time
	ExpiresAt time.Time
}

// Options configure a Verifier.
type Options struct {
	// JWKSURL is svc's key set: <svc base URL>/.well-known/jwks.json.
	JWKSURL string
	// Issuer, when set, must equal the assertion's iss (svc's
	// server.issuer: by default its base URL).
	Issuer string
	// Audience is this app's ID (app_…); required.
	Audience string
	// HTTPClient fetches the key set (a client with a 10 s timeout when
	// nil).
	HTTPClient *http.Client
	// Leeway tolerates clocks that disagree on exp and iat
	// (DefaultLeeway when 0; negative: none).
	Leeway time.Duration
	// RefetchInterval is the least time between two fetches of the key set
	// caused by tokens naming an unknown key (DefaultRefetchInterval when
	// 0), so that made-up key IDs cannot make the app hammer svc.
	RefetchInterval time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Verifier verifies assertions. It is safe for concurrent use.
type Verifier struct {
	o      Options
	parser *jwt.Parser

	set atomic.Pointer[keySet]
	mu  sync.Mutex
	// fetching is the fetch under way, shared by everyone waiting for it.
	fetching *fetch
}

// keySet is a fetched JWKS.
type keySet struct {
	keys    map[string]ed25519.PublicKey
	started time.Time // when the fetch that made it began
	fetched time.Time // when it was last fetched, or the fetch failed
	expires time.Time // past it, fetch again before use
	err     error     // why the last fetch failed; the keys are older
}

type fetch struct {
	done chan struct{}
	set  *keySet
}

// New returns a verifier; it fetches nothing until the first Verify.
func New(o Options) (*Verifier, error) {
	if o.JWKSURL == "" || o.Audience == "" {
		return nil, errors.New("assertion: Options need JWKSURL and Audience")
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	switch {
	case o.Leeway == 0:
		o.Leeway = DefaultLeeway
	case o.Leeway < 0:
		o.Leeway = 0
	}
	if o.RefetchInterval <= 0 {
		o.RefetchInterval = DefaultRefetchInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithAudience(o.Audience),
		jwt.WithLeeway(o.Leeway),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(o.Now),
		jwt.WithStrictDecoding(),
	}
	if o.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(o.Issuer))
	}
	return &Verifier{o: o, parser: jwt.NewParser(opts...)}, nil
}

// claims are the assertion's claims as the JWT library checks them.
type claims struct {
	Subject       string           `json:"sub"`
	Email         string           `json:"email"`
	EmailVerified bool             `json:"email_verified"`
	Name          string           `json:"name"`
	Groups        []string         `json:"groups"`
	Audience      string           `json:"aud"`
	Issuer        string           `json:"iss"`
	IssuedAt      *jwt.NumericDate `json:"iat"`
	ExpiresAt     *jwt.NumericDate `json:"exp"`
}

func (c *claims) GetExpirationTime() (*jwt.NumericDate, error) { return c.ExpiresAt, nil }
func (c *claims) GetIssuedAt() (*jwt.NumericDate, error)       { return c.IssuedAt, nil }
func (c *claims) GetNotBefore() (*jwt.NumericDate, error)      { return nil, nil }
func (c *claims) GetIssuer() (string, error)                   { return c.Issuer, nil }
func (c *claims) GetSubject() (string, error)                  { return c.Subject, nil }
func (c *claims) GetAudience() (jwt.ClaimStrings, error)       { return jwt.ClaimStrings{c.Audience}, nil }

var _ jwt.Claims = (*claims)(nil)

// Verify checks an assertion and returns its claims. A refusal wraps
// ErrInvalid.
func (v *Verifier) Verify(ctx context.Context, token string) (Claims, error) {
	if token == "" {
		return Claims{}, fmt.Errorf("%w: %w", ErrInvalid, ErrMissing)
	}
	if len(token) > maxTokenBytes {
		return Claims{}, fmt.Errorf("%w: the token is too long", ErrInvalid)
	}
	var c claims
	var keyErr error
	keyAsked := false
	_, err := v.parser.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		keyAsked = true
		if t.Method != jwt.SigningMethodEdDSA {
			keyErr = ErrAlgorithm
			return nil, keyErr
		}
		kid, _ := t.Header["kid"].(string)
		key, err := v.key(ctx, kid)
		keyErr = err
		return key, err
	})
	if err != nil {
		return Claims{}, classify(err, keyErr, keyAsked, &c)
	}
	if c.Subject == "" || c.IssuedAt == nil {
		return Claims{}, fmt.Errorf("%w: sub and iat are required", ErrInvalid)
	}
	return Claims{Subject: c.Subject, Email: c.Email, EmailVerified: c.EmailVerified, Name: c.Name, Groups: c.Groups, Audience: c.Audience, Issuer: c.Issuer,
		IssuedAt: c.IssuedAt.Time, ExpiresAt: c.ExpiresAt.Time}, nil
}

// classify turns the JWT library's error into ours. The library refuses
// an algorithm other than EdDSA before it asks for the key.
func classify(err, keyErr error, keyAsked bool, c *claims) error {
	var why error
	switch {
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && c.Audience == "":
		why = ErrAudience
	case keyErr != nil:
		why = keyErr
	case errors.Is(err, jwt.ErrTokenSignatureInvalid) && !keyAsked:
		why = ErrAlgorithm
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		why = ErrSignature
	case errors.Is(err, jwt.ErrTokenExpired), errors.Is(err, jwt.ErrTokenUsedBeforeIssued), errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		why = ErrExpired
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		why = ErrAudience
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		why = ErrIssuer
	default:
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return fmt.Errorf("%w: %w (%w)", ErrInvalid, why, err)
}

// key returns the public key named kid: from the key set while it is
// fresh, else after fetching it again. A kid the fresh set lacks fetches
// again only if the last fetch is older than RefetchInterval.
func (v *Verifier) key(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	if kid == "" {
		return nil, fmt.Errorf("%w: the token names no key (kid)", ErrUnknownKey)
	}
	now := v.o.Now()
	set := v.set.Load()
	if set == nil || !now.Before(set.expires) || (set.keys[kid] == nil && now.Sub(set.fetched) >= v.o.RefetchInterval) {
		var err error
		if set, err = v.refresh(ctx, set); set == nil {
			return nil, err
		}
		// The set may come from a fetch that began before this token's
		// key was published (one in flight, or another caller's): fetch
		// once more. Concurrent callers share that fetch, so a flood of
		// unknown kids still costs at most two fetches per interval.
		if set.keys[kid] == nil && set.started.Before(now) {
			if set, err = v.refresh(ctx, set); set == nil {
				return nil, err
			}
		}
	}
	if k, ok := set.keys[kid]; ok {
		return k, nil
	}
	if set.err != nil {
		return nil, fmt.Errorf("%w (%w)", ErrUnknownKey, set.err)
	}
	return nil, ErrUnknownKey
}

// refresh fetches the key set, unless it changed since seen (someone else
// fetched it), sharing one fetch among concurrent callers. It returns nil
// only when ctx ends before any key set was fetched.
func (v *Verifier) refresh(ctx context.Context, seen *keySet) (*keySet, error) {
	v.mu.Lock()
	if cur := v.set.Load(); cur != seen {
		v.mu.Unlock()
		return cur, nil
	}
	f := v.fetching
	if f == nil {
		f = &fetch{done: make(chan struct{})}
		v.fetching = f
		go v.run(f, seen)
	}
	v.mu.Unlock()
	select {
	case <-f.done:
		return f.set, nil
	case <-ctx.Done():
		return seen, ctx.Err()
	}
}

// run performs one fetch. It does not depend on any caller's context, so
// that one caller giving up does not fail the others. A failed fetch keeps
// the keys held (none, the first time) and is tried again after
// RefetchInterval.
func (v *Verifier) run(f *fetch, prev *keySet) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	started := v.o.Now()
	keys, maxAge, err := v.fetch(ctx)
	now := v.o.Now()
	if err == nil {
		f.set = &keySet{keys: keys, started: started, fetched: now, expires: now.Add(maxAge)}
	} else {
		f.set = &keySet{started: started, fetched: now, expires: now.Add(v.o.RefetchInterval), err: err}
		if prev != nil {
			f.set.keys = prev.keys
		}
	}
	v.mu.Lock()
	v.set.Store(f.set)
	v.fetching = nil
	v.mu.Unlock()
	close(f.done)
}

// jwk is one key of the set; keys other than Ed25519 signing keys are
// ignored.
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	KID string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

func (v *Verifier) fetch(ctx context.Context) (map[string]ed25519.PublicKey, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.o.JWKSURL, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrJWKS, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.o.HTTPClient.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrJWKS, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxJWKSBytes))
		return nil, 0, fmt.Errorf("%w: %s answered %s", ErrJWKS, v.o.JWKSURL, resp.Status)
	}
	var doc struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJWKSBytes)).Decode(&doc); err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %w", ErrJWKS, v.o.JWKSURL, err)
	}
	keys := make(map[string]ed25519.PublicKey, len(doc.Keys))
	for _, k := range doc.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" || k.KID == "" || (k.Alg != "" && k.Alg != "EdDSA") || (k.Use != "" && k.Use != "sig") {
			continue
		}
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			continue
		}
		keys[k.KID] = ed25519.PublicKey(x)
	}
	return keys, maxAge(resp.Header.Get("Cache-Control")), nil
}

// maxAge reads max-age from a Cache-Control value, held between MinMaxAge
// and MaxMaxAge; no-store and no-cache mean MinMaxAge.
func maxAge(cc string) time.Duration {
	for d := range strings.SplitSeq(cc, ",") {
		d = strings.ToLower(strings.TrimSpace(d))
		if d == "no-store" || d == "no-cache" {
			return MinMaxAge
		}
		if v, ok := strings.CutPrefix(d, "max-age="); ok {
			n, err := strconv.Atoi(strings.Trim(v, `"`))
			if err != nil || n < 0 {
				continue
			}
			return min(max(time.Duration(n)*time.Second, MinMaxAge), MaxMaxAge)
		}
	}
	return DefaultMaxAge
}

type ctxKey struct{}

// FromContext returns the claims Middleware verified for the request.
func FromContext(ctx context.Context) (Claims, bool) {
	c, ok := ctx.Value(ctxKey{}).(Claims)
	return c, ok
}

// NewContext returns ctx carrying c (what Middleware does; for tests of
// handlers).
func NewContext(ctx context.Context, c Claims) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// Middleware verifies the X-Svc-Assertion header of every request and
// passes it on with the claims in its context (FromContext); a request
// without a valid assertion is answered 401 and goes no further.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := v.Verify(r.Context(), r.Header.Get(Header))
		if err != nil {
			http.Error(w, "unauthorized: no valid "+Header, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), c)))
	})
}
