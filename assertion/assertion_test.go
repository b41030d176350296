package assertion_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/svchost/svc/assertion"
)

const (
	app    = "app_01JAPP00000000000000000000"
	issuer = "https://svc.example.test"
)

// issuerKeys are an svc's signing keys as the tests hold them, and the
// JWKS server that publishes them.
type issuerKeys struct {
	mu      sync.Mutex
	keys    map[string]ed25519.PrivateKey
	fetches atomic.Int64
	status  atomic.Int64 // answer with this status when not 0
	ts      *httptest.Server
	now     func() time.Time
	maxAge  string
}

func newIssuer(t testing.TB) *issuerKeys {
	t.Helper()
	k := &issuerKeys{keys: map[string]ed25519.PrivateKey{}, now: time.Now, maxAge: "public, max-age=60"}
	k.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.fetches.Add(1)
		if s := k.status.Load(); s != 0 {
			w.WriteHeader(int(s))
			return
		}
		k.mu.Lock()
		var set struct {
			Keys []map[string]string `json:"keys"`
		}
		for kid, priv := range k.keys {
			set.Keys = append(set.Keys, map[string]string{"kty": "OKP", "crv": "Ed25519", "kid": kid, "alg": "EdDSA", "use": "sig",
				"x": base64.RawURLEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))})
		}
		k.mu.Unlock()
		w.Header().Set("Cache-Control", k.maxAge)
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(k.ts.Close)
	return k
}

// add makes and publishes a key.
func (k *issuerKeys) add(kid string) ed25519.PrivateKey {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	k.mu.Lock()
	k.keys[kid] = priv
	k.mu.Unlock()
	return priv
}

func (k *issuerKeys) url() string { return k.ts.URL + "/.well-known/jwks.json" }

// claims are an assertion's claims, as svc makes them, for the tests to
// vary.
func claims(now time.Time) jwt.MapClaims {
	return jwt.MapClaims{"sub": "usr_01JALICE000000000000000000", "email": "alice@example.test", "email_verified": true, "name": "Alice",
		"groups": []string{"eng"}, "aud": app, "iss": issuer, "iat": now.Unix(), "exp": now.Add(120 * time.Second).Unix()}
}

func sign(t testing.TB, method jwt.SigningMethod, key any, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newVerifier(t testing.TB, k *issuerKeys, mod ...func(*assertion.Options)) *assertion.Verifier {
	t.Helper()
	o := assertion.Options{JWKSURL: k.url(), Issuer: issuer, Audience: app, Now: k.now}
	for _, m := range mod {
		m(&o)
	}
	v, err := assertion.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestVerifyAcceptsAnAssertionAndReturnsItsClaims(t *testing.T) {
	k := newIssuer(t)
	priv := k.add("ek_1")
	v := newVerifier(t, k)
	now := time.Now()
	c, err := v.Verify(context.Background(), sign(t, jwt.SigningMethodEdDSA, priv, "ek_1", claims(now)))
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "usr_01JALICE000000000000000000" || c.Email != "alice@example.test" || !c.EmailVerified || c.Name != "Alice" ||
		len(c.Groups) != 1 || c.Groups[0] != "eng" || c.Audience != app || c.Issuer != issuer ||
		c.IssuedAt.Unix() != now.Unix() || c.ExpiresAt.Unix() != now.Unix()+120 {
		t.Fatalf("claims = %+v", c)
	}
	// An assertion from before email_verified existed, or with it false:
	// the address is not vouched for.
	for _, verified := range []any{nil, false} {
		cl := claims(now)
		if verified == nil {
			delete(cl, "email_verified")
		} else {
			cl["email_verified"] = verified
		}
		c, err := v.Verify(context.Background(), sign(t, jwt.SigningMethodEdDSA, priv, "ek_1", cl))
		if err != nil || c.Email != "alice@example.test" || c.EmailVerified {
			t.Errorf("email_verified %v: claims %+v, %v; want the email, not verified", verified, c, err)
		}
	}
}

// unsigned builds a token with any header and claims and a given signature.
func unsigned(header map[string]any, c jwt.MapClaims, sig []byte) string {
	h, _ := json.Marshal(header)
	p, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p) + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func TestVerifyRefusesAttacks(t *testing.T) {
	k := newIssuer(t)
	priv := k.add("ek_1")
	pub := priv.Public().(ed25519.PublicKey)
	now := time.Now()
	good := sign(t, jwt.SigningMethodEdDSA, priv, "ek_1", claims(now))
	with := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		c := claims(now)
		mod(c)
		return c
	}
	_, stranger, _ := ed25519.GenerateKey(rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	noneTok, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims(now)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"usr_01JMALLORY0000000000000000","aud":"`+app+`","iss":"`+issuer+`","iat":`+fmt.Sprint(now.Unix())+`,"exp":`+fmt.Sprint(now.Unix()+120)+`}`)) + "." + parts[2]

	cases := []struct {
		name  string
		token string
		want  error
	}{
		{"alg none", noneTok, assertion.ErrAlgorithm},
		{"alg none with the kid", unsigned(map[string]any{"alg": "none", "kid": "ek_1"}, claims(now), nil), assertion.ErrAlgorithm},
		{"alg none, signature kept", unsigned(map[string]any{"alg": "none", "kid": "ek_1"}, claims(now), []byte(parts[2])), assertion.ErrAlgorithm},
		{"HS256 keyed with the raw public key", sign(t, jwt.SigningMethodHS256, []byte(pub), "ek_1", claims(now)), assertion.ErrAlgorithm},
		{"HS256 keyed with the JWK's x", sign(t, jwt.SigningMethodHS256, []byte(base64.RawURLEncoding.EncodeToString(pub)), "ek_1", claims(now)), assertion.ErrAlgorithm},
		{"HS512 keyed with the public key", sign(t, jwt.SigningMethodHS512, []byte(pub), "ek_1", claims(now)), assertion.ErrAlgorithm},
		{"RS256", sign(t, jwt.SigningMethodRS256, rsaKey, "ek_1", claims(now)), assertion.ErrAlgorithm},
		{"ES256", sign(t, jwt.SigningMethodES256, ecKey, "ek_1", claims(now)), assertion.ErrAlgorithm},
		{"another key under a published kid", sign(t, jwt.SigningMethodEdDSA, stranger, "ek_1", claims(now)), assertion.ErrSignature},
		{"tampered claims", tampered, assertion.ErrSignature},
		{"an unknown kid", sign(t, jwt.SigningMethodEdDSA, stranger, "ek_unknown", claims(now)), assertion.ErrUnknownKey},
		{"no kid", sign(t, jwt.SigningMethodEdDSA, priv, "", claims(now)), assertion.ErrUnknownKey},
		{"for another app", sign(t, jwt.SigningMethodEdDSA, priv, "ek_1", with(func(c jwt.MapClaims) { c["aud"] = "app_01JOTHER000000000000000000" })), assertion.ErrAudience},
		{"without aud", sign(t, jwt.SigningMethodEdDSA, priv, "ek_1", with(func(c jwt.MapClaims) { delete(c, "aud") })), assertion.ErrAudience},
		{"aud as a list", sign(t, jwt.SigningMethodEdDSA, priv, "ek_1", with(func(c jwt.MapClaims) { c["aud"] = []string{app} })), assertion.ErrInvalid},
		{"expired", sign(t, jwt.SigningMethodEdDSA, priv, "ek_1", with(func(c jwt.MapClaims) {
			c["iat"], c["exp"] = now.Add(-200*time.Second).Unix(), now.Add(-80*time.Second).Unix()
		})), assertion.ErrExpired},
		{"issued in the future", sign(t, jwt.SigningMethodEdDSA, priv, "ek_1", with(func(c jwt.MapClaims) {
			c["iat"], c["exp"] = now.Add(time.Hour).Unix(), now.Add(time.Hour+120*time.Second).Unix()
		})), assertion.ErrExpired},
		{"without exp", sign(t, jwt.SigningMethodEdDSA, priv, "ek_1", with(func(c jwt.MapClaims) { delete(c, "exp") })), assertion.ErrExpired},
		{"without iat", sign(t, jwt.SigningMethodEdDSA, priv, "ek_1", with(func(c jwt.MapClaims) { delete(c, "iat") })), assertion.ErrInvalid},
		{"without sub", sign(t, jwt.SigningMethodEdDSA, priv, "ek_1", with(func(c jwt.MapClaims) { delete(c, "sub") })), assertion.ErrInvalid},
		{"another issuer", sign(t, jwt.SigningMethodEdDSA, priv, "ek_1", with(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" })), assertion.ErrIssuer},
		{"empty", "", assertion.ErrMissing},
		{"garbage", "not.a.token", assertion.ErrInvalid},
		{"huge", strings.Repeat("a", 1<<20), assertion.ErrInvalid},
	}
	v := newVerifier(t, k, func(o *assertion.Options) { o.RefetchInterval = time.Nanosecond })
	if _, err := v.Verify(context.Background(), good); err != nil {
		t.Fatalf("the good token: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := v.Verify(context.Background(), tc.token)
			if err == nil {
				t.Fatalf("accepted: %+v", c)
			}
			if !errors.Is(err, assertion.ErrInvalid) || !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if c.Subject != "" {
				t.Fatalf("a refusal returned claims %+v", c)
			}
		})
	}
	// The unknown kid was looked for again at svc before the refusal.
	before := k.fetches.Load()
	if _, err := v.Verify(context.Background(), sign(t, jwt.SigningMethodEdDSA, stranger, "ek_unknown2", claims(now))); !errors.Is(err, assertion.ErrUnknownKey) {
		t.Fatal(err)
	}
	if k.fetches.Load() != before+1 {
		t.Fatalf("an unknown kid fetched the JWKS %d times, want once", k.fetches.Load()-before)
	}
}

func TestWithoutIssuerOptionAnyIssuerPasses(t *testing.T) {
	k := newIssuer(t)
	priv := k.add("ek_1")
	v := newVerifier(t, k, func(o *assertion.Options) { o.Issuer = "" })
	c := claims(time.Now())
	c["iss"] = "http://localhost:8080"
	if _, err := v.Verify(context.Background(), sign(t, jwt.SigningMethodEdDSA, priv, "ek_1", c)); err != nil {
		t.Fatal(err)
	}
}

func TestANewKeyIsFetchedAndUnknownKidsAreRateLimited(t *testing.T) {
	k := newIssuer(t)
	priv1 := k.add("ek_1")
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	k.now = func() time.Time { return time.Unix(0, now.Load()) }
	v := newVerifier(t, k)
	ctx := context.Background()
	if _, err := v.Verify(ctx, sign(t, jwt.SigningMethodEdDSA, priv1, "ek_1", claims(k.now()))); err != nil {
		t.Fatal(err)
	}
	// A rotation: the new kid is unknown, so the set is fetched again.
	priv2 := k.add("ek_2")
	now.Add(int64(assertion.DefaultRefetchInterval))
	if _, err := v.Verify(ctx, sign(t, jwt.SigningMethodEdDSA, priv2, "ek_2", claims(k.now()))); err != nil {
		t.Fatalf("after a rotation: %v", err)
	}
	if got := k.fetches.Load(); got != 2 {
		t.Fatalf("fetches = %d, want 2", got)
	}
	// A burst of made-up kids, concurrently: at most one fetch.
	_, stranger, _ := ed25519.GenerateKey(rand.Reader)
	now.Add(int64(assertion.DefaultRefetchInterval))
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := v.Verify(ctx, sign(t, jwt.SigningMethodEdDSA, stranger, fmt.Sprintf("ek_fake%d", i), claims(k.now()))); !errors.Is(err, assertion.ErrUnknownKey) {
				t.Errorf("fake kid %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if got := k.fetches.Load(); got != 3 {
		t.Fatalf("64 made-up kids made %d fetches, want 1", got-2)
	}
	// Known keys keep verifying meanwhile, without fetching.
	if _, err := v.Verify(ctx, sign(t, jwt.SigningMethodEdDSA, priv1, "ek_1", claims(k.now()))); err != nil || k.fetches.Load() != 3 {
		t.Fatalf("a known key: %v, fetches %d", err, k.fetches.Load())
	}
}

func TestTheKeySetIsKeptForItsMaxAge(t *testing.T) {
	k := newIssuer(t)
	priv := k.add("ek_1")
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	k.now = func() time.Time { return time.Unix(0, now.Load()) }
	k.maxAge = "public, max-age=60"
	v := newVerifier(t, k)
	ctx := context.Background()
	verify := func() error {
		c := claims(k.now())
		return func() error { _, err := v.Verify(ctx, sign(t, jwt.SigningMethodEdDSA, priv, "ek_1", c)); return err }()
	}
	for range 3 {
		if err := verify(); err != nil {
			t.Fatal(err)
		}
	}
	now.Add(int64(59 * time.Second))
	if err := verify(); err != nil || k.fetches.Load() != 1 {
		t.Fatalf("within max-age: %v, %d fetches", err, k.fetches.Load())
	}
	now.Add(int64(2 * time.Second))
	if err := verify(); err != nil || k.fetches.Load() != 2 {
		t.Fatalf("past max-age: %v, %d fetches, want 2", err, k.fetches.Load())
	}
	// svc down past max-age: the keys held keep verifying (tried again
	// once per refetch interval).
	k.status.Store(http.StatusServiceUnavailable)
	now.Add(int64(61 * time.Second))
	for range 3 {
		if err := verify(); err != nil {
			t.Fatalf("with svc unreachable: %v", err)
		}
	}
	if k.fetches.Load() != 3 {
		t.Fatalf("fetches = %d, want 3", k.fetches.Load())
	}
	// A key removed from the set (retired) is refused once fetched again.
	k.status.Store(0)
	k.mu.Lock()
	delete(k.keys, "ek_1")
	k.mu.Unlock()
	now.Add(int64(time.Minute))
	if err := verify(); !errors.Is(err, assertion.ErrUnknownKey) {
		t.Fatalf("a key no longer published: %v", err)
	}
}

func TestAFailedFirstFetchIsReportedAndRateLimited(t *testing.T) {
	k := newIssuer(t)
	priv := k.add("ek_1")
	k.status.Store(http.StatusInternalServerError)
	v := newVerifier(t, k)
	tok := sign(t, jwt.SigningMethodEdDSA, priv, "ek_1", claims(time.Now()))
	for range 5 {
		if _, err := v.Verify(context.Background(), tok); !errors.Is(err, assertion.ErrJWKS) {
			t.Fatalf("err = %v, want ErrJWKS", err)
		}
	}
	if k.fetches.Load() != 1 {
		t.Fatalf("a failing JWKS was fetched %d times within the refetch interval", k.fetches.Load())
	}
}

func TestNewRefusesIncompleteOptions(t *testing.T) {
	for _, o := range []assertion.Options{{Audience: app}, {JWKSURL: "http://x/.well-known/jwks.json"}} {
		if _, err := assertion.New(o); err == nil {
			t.Fatalf("New(%+v) succeeded", o)
		}
	}
}

func TestMiddleware(t *testing.T) {
	k := newIssuer(t)
	priv := k.add("ek_1")
	v := newVerifier(t, k)
	h := v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := assertion.FromContext(r.Context())
		if !ok {
			t.Error("no claims in the context")
		}
		fmt.Fprint(w, c.Subject)
	}))
	for _, tc := range []struct {
		name   string
		header string
		status int
		body   string
	}{
		{"valid", sign(t, jwt.SigningMethodEdDSA, priv, "ek_1", claims(time.Now())), 200, "usr_01JALICE000000000000000000"},
		{"missing", "", 401, ""},
		{"invalid", sign(t, jwt.SigningMethodHS256, []byte(priv.Public().(ed25519.PublicKey)), "ek_1", claims(time.Now())), 401, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/", nil)
			if tc.header != "" {
				req.Header.Set(assertion.Header, tc.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status || (tc.body != "" && rec.Body.String() != tc.body) {
				t.Fatalf("%d %q", rec.Code, rec.Body.String())
			}
		})
	}
	if _, ok := assertion.FromContext(context.Background()); ok {
		t.Fatal("claims in an empty context")
	}
}

func BenchmarkVerify(b *testing.B) {
	k := newIssuer(b)
	priv := k.add("ek_1")
	v := newVerifier(b, k)
	tok := sign(b, jwt.SigningMethodEdDSA, priv, "ek_1", claims(time.Now()))
	ctx := context.Background()
	if _, err := v.Verify(ctx, tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := v.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}
