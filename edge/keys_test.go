package edge_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/svchost/svc/assertion"
	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

const issuer = "https://svc.example.test"

// clock is a settable clock, safe for concurrent use.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// fixture is one node's signing keys and signer over a store.
type fixture struct {
	store  *raftstore.Store
	ring   *keyring.Ring
	keys   *edge.SigningKeys
	signer *edge.JWTSigner
	clock  *clock
	kek    string // the KEK file
}

func tables() []raftstore.Def {
	return append([]raftstore.Def{keyring.Keys, audit.Entries}, edge.Tables()...)
}

func newRing(t testing.TB, store keyring.Store, kekPath string, now func() time.Time) *keyring.Ring {
	t.Helper()
	kek, err := keyring.LoadKEK(kekPath)
	if err != nil {
		t.Fatal(err)
	}
	return keyring.New(store, kek, now)
}

// newFixture opens a store and one node's keys and signer over it; nodeOn
// adds a node over a store and a KEK file.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	store := raftstoretest.Open(t, tables()...)
	return nodeOn(t, store, filepath.Join(t.TempDir(), "kek"), newClock())
}

func nodeOn(t testing.TB, store *raftstore.Store, kekPath string, c *clock) *fixture {
	t.Helper()
	ring := newRing(t, store, kekPath, c.now)
	keys, err := edge.NewSigningKeys(edge.KeysDeps{Store: store, Ring: ring, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	ring.OnRotate(keys)
	signer, err := edge.NewSigner(edge.SignerConfig{Keys: keys, Issuer: issuer, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{store: store, ring: ring, keys: keys, signer: signer, clock: c, kek: kekPath}
}

func alice(app string) edge.Claims {
	return edge.Claims{Subject: "usr_01JALICE000000000000000000", Email: "alice@example.test", EmailVerified: true, Name: "Alice", Groups: []string{"eng", "ops"}, Audience: app}
}

// decode returns an assertion's header and claims, unverified.
func decode(t testing.TB, tok string) (header, claims map[string]any) {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %q", tok)
	}
	for i, dst := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(dst); err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
	}
	return header, claims
}

func kidOf(t testing.TB, tok string) string {
	t.Helper()
	h, _ := decode(t, tok)
	return h["kid"].(string)
}

// jwksServer serves the keys' JWKS as the API does.
func jwksServer(t testing.TB, keys *edge.SigningKeys) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var fetches atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=60")
		_ = json.NewEncoder(w).Encode(keys.JWKS())
	}))
	t.Cleanup(ts.Close)
	return ts, &fetches
}

func TestAssertionVerifiesWithTheVerifierAndWithGoJose(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tok, err := f.signer.Assertion(ctx, alice("app_A"))
	if err != nil {
		t.Fatal(err)
	}
	h, c := decode(t, tok)
	if h["alg"] != "EdDSA" || h["typ"] != "JWT" || h["kid"] == "" || len(h) != 3 {
		t.Fatalf("header = %v", h)
	}
	iat, _ := c["iat"].(json.Number).Int64()
	exp, _ := c["exp"].(json.Number).Int64()
	if exp-iat != 120 || iat != f.clock.now().Unix() {
		t.Fatalf("iat %d exp %d (now %d): want exp = iat + 120", iat, exp, f.clock.now().Unix())
	}
	want := map[string]any{"sub": "usr_01JALICE000000000000000000", "email": "alice@example.test", "email_verified": true, "name": "Alice",
		"groups": []any{"eng", "ops"}, "aud": "app_A", "iss": issuer}
	for k, v := range want {
		if !reflect.DeepEqual(c[k], v) {
			t.Errorf("claim %s = %#v, want %#v", k, c[k], v)
		}
	}
	if len(c) != len(want)+2 {
		t.Errorf("claims = %v: want exactly sub, email, email_verified, name, groups, aud, iss, iat, exp", c)
	}

	ts, _ := jwksServer(t, f.keys)
	v, err := assertion.New(assertion.Options{JWKSURL: ts.URL, Issuer: issuer, Audience: "app_A", Now: f.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.Verify(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if got.Subject != "usr_01JALICE000000000000000000" || got.Email != "alice@example.test" || !got.EmailVerified || got.Name != "Alice" || !reflect.DeepEqual(got.Groups, []string{"eng", "ops"}) || got.Audience != "app_A" {
		t.Fatalf("verified claims = %+v", got)
	}

	// An independent JOSE implementation, with the JWKS as served.
	resp, err := http.Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	jws, err := jose.ParseSigned(tok, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	found := set.Key(jws.Signatures[0].Header.KeyID)
	if len(found) != 1 {
		t.Fatalf("go-jose finds %d keys for kid %s in %+v", len(found), jws.Signatures[0].Header.KeyID, set)
	}
	if _, ok := found[0].Key.(ed25519.PublicKey); !ok || found[0].Algorithm != "EdDSA" || found[0].Use != "sig" {
		t.Fatalf("go-jose read the JWK as %T alg %q use %q", found[0].Key, found[0].Algorithm, found[0].Use)
	}
	payload, err := jws.Verify(found[0].Key)
	if err != nil {
		t.Fatalf("go-jose refuses the signature: %v", err)
	}
	if !bytes.Contains(payload, []byte(`"aud":"app_A"`)) {
		t.Fatalf("payload %s: aud is not one string", payload)
	}
}

func TestTheJWKSPublishesOKPKeysOnly(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if got := f.keys.JWKS(); len(got.Keys) != 0 {
		t.Fatalf("JWKS before any key = %+v", got)
	}
	if _, err := f.keys.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	set := f.keys.JWKS()
	row, _, _ := edge.Keys.Get(f.store.Read(), set.Keys[0].KID)
	want := edge.JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(row.Public), KID: row.KID, Alg: "EdDSA", Use: "sig"}
	if len(set.Keys) != 1 || set.Keys[0] != want {
		t.Fatalf("JWKS = %+v, want [%+v]", set, want)
	}
	b, _ := json.Marshal(set)
	for _, private := range []string{"\"d\"", "sealed", "Sealed"} {
		if bytes.Contains(b, []byte(private)) {
			t.Fatalf("the JWKS %s carries %s", b, private)
		}
	}
}

func TestTheCacheHandsOutOneAssertionPerClaimsAndKey(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	first, err := f.signer.Assertion(ctx, alice("app_A"))
	if err != nil {
		t.Fatal(err)
	}
	f.clock.advance(edge.AssertionTTL/2 - time.Second)
	again, _ := f.signer.Assertion(ctx, alice("app_A"))
	if again != first {
		t.Fatal("the same claims within the first half of the assertion's life got a new assertion")
	}
	other := alice("app_A")
	other.Groups = []string{"eng"}
	if tok, _ := f.signer.Assertion(ctx, other); tok == first {
		t.Fatal("other groups got the same assertion")
	}
	if tok, _ := f.signer.Assertion(ctx, alice("app_B")); tok == first {
		t.Fatal("another app got the same assertion")
	}
	// The caller may reuse its slice: the cache keeps its own copy.
	mut := alice("app_C")
	c1, _ := f.signer.Assertion(ctx, mut)
	mut.Groups[0] = "admins"
	if c2, _ := f.signer.Assertion(ctx, mut); c2 == c1 {
		t.Fatal("changing the groups slice after a call changed the cached claims")
	}

	f.clock.advance(time.Second)
	late, _ := f.signer.Assertion(ctx, alice("app_A"))
	if late == first {
		t.Fatal("an assertion with half its life or less left was handed out again")
	}

	keys, err := f.keys.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rotated, _ := f.signer.Assertion(ctx, alice("app_A"))
	if rotated == late || kidOf(t, rotated) != keys[0].KID || !keys[0].Current {
		t.Fatalf("after a rotation: kid %s, want the new current key %+v", kidOf(t, rotated), keys[0])
	}
}

func TestTheCacheIsBounded(t *testing.T) {
	f := newFixture(t)
	small, err := edge.NewSigner(edge.SignerConfig{Keys: f.keys, Issuer: issuer, Now: f.clock.now, CacheSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, _ := small.Assertion(ctx, alice("app_0"))
	for i := range 5000 {
		c := alice("app_" + string(rune('A'+i%26)) + strings.Repeat("x", i/26))
		if _, err := small.Assertion(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	// Still correct after eviction: a fresh assertion or the cached one,
	// both valid.
	tok, _ := small.Assertion(ctx, alice("app_0"))
	if _, c := decode(t, tok); c["aud"] != "app_0" {
		t.Fatalf("after eviction: %v (first was %s)", c, first)
	}
}

func TestRefusesClaimsWithoutSubjectOrAudience(t *testing.T) {
	f := newFixture(t)
	for _, c := range []edge.Claims{{Audience: "app_A"}, {Subject: "usr_1"}} {
		if tok, err := f.signer.Assertion(context.Background(), c); err == nil || tok != "" {
			t.Fatalf("claims %+v signed: %q %v", c, tok, err)
		}
	}
}

func TestClaimsFieldsAreAllCached(t *testing.T) {
	// The signer's cache hashes and compares every field of Claims; a new
	// field must be added to both (edge/signer.go: hash, sameClaims).
	if n := reflect.TypeFor[edge.Claims]().NumField(); n != 6 {
		t.Fatalf("edge.Claims has %d fields: teach the signer's cache the new ones, then update this test", n)
	}
}

func TestRacingFirstUsesAgreeOnOneKey(t *testing.T) {
	store := raftstoretest.Open(t, tables()...)
	kek := filepath.Join(t.TempDir(), "kek")
	c := newClock()
	nodes := make([]*fixture, 6)
	for i := range nodes {
		nodes[i] = nodeOn(t, store, kek, c)
	}
	kids := make([]string, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := n.signer.Assertion(context.Background(), alice("app_A"))
			if err != nil {
				t.Error(err)
				return
			}
			kids[i] = kidOf(t, tok)
		}()
	}
	wg.Wait()
	if n := edge.Keys.Count(store.Read()); n != 1 {
		t.Fatalf("racing first uses made %d keys", n)
	}
	for _, k := range kids {
		if k != kids[0] {
			t.Fatalf("nodes sign with different keys: %v", kids)
		}
	}
}

func TestRotationKeepsPublishingUntilNoAssertionNeedsTheKey(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tok, _ := f.signer.Assertion(ctx, alice("app_A"))
	k1 := kidOf(t, tok)
	f.clock.advance(time.Hour)
	if _, err := f.keys.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	published := func() []string {
		var out []string
		for _, k := range f.keys.JWKS().Keys {
			out = append(out, k.KID)
		}
		return out
	}
	if p := published(); len(p) != 2 || p[1] != k1 {
		t.Fatalf("right after a rotation the JWKS holds %v; want the new key and %s", p, k1)
	}
	// Up to an assertion's life plus the margin, nothing is retired.
	f.clock.advance(edge.AssertionTTL + edge.KeyRetireMargin)
	if err := f.keys.Maintain(ctx, edge.KeyRotationInterval); err != nil {
		t.Fatal(err)
	}
	if p := published(); len(p) != 2 {
		t.Fatalf("retired too early: %v", p)
	}
	f.clock.advance(time.Second)
	if err := f.keys.Maintain(ctx, edge.KeyRotationInterval); err != nil {
		t.Fatal(err)
	}
	list := f.keys.List()
	if p := published(); len(p) != 1 || p[0] == k1 || len(list) != 2 || list[1].KID != k1 || list[1].RetiredAt == nil || list[1].Published || !list[0].Current {
		t.Fatalf("after the margin: published %v, list %+v", p, list)
	}
	// Thirty days on, the leader rotates on its own.
	f.clock.advance(edge.KeyRotationInterval)
	if err := f.keys.Maintain(ctx, edge.KeyRotationInterval); err != nil {
		t.Fatal(err)
	}
	if list := f.keys.List(); len(list) != 3 || list[0].CreatedAt != f.clock.now().Truncate(time.Millisecond) {
		t.Fatalf("no scheduled rotation: %+v", list)
	}
	actions := map[string]int{}
	items, _ := audit.Entries.List(f.store.Read(), raftstore.Query{})
	for _, it := range items {
		actions[it.Value.Action]++
		if it.Value.Action == "edge_key.rotate" && (it.Value.TargetKind == nil || *it.Value.TargetKind != "edge_key") {
			t.Errorf("rotation entry without its target: %+v", it.Value)
		}
	}
	if actions["edge_key.create"] != 1 || actions["edge_key.rotate"] != 2 || actions["edge_key.retire"] != 1 {
		t.Fatalf("audit actions = %v", actions)
	}
}

func TestTheTableRefusesWhatKeysMustNotDo(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.keys.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	r := f.store.Read()
	items, _ := edge.Keys.List(r, raftstore.Query{})
	k, m := items[0].Value, items[0].Meta
	at := f.clock.now()
	changed := k
	changed.Public = bytes.Repeat([]byte{7}, ed25519.PublicKeySize)
	retired := k
	retired.RetiredAt = &at
	for name, op := range map[string]raftstore.Op{
		"delete":             edge.Keys.Delete(k.KID),
		"change the public":  edge.Keys.PutIf(&changed, m.ModifyIndex),
		"retire the newest":  edge.Keys.PutIf(&retired, m.ModifyIndex),
		"insert retired":     edge.Keys.Insert(&edge.Key{KID: "ek_x", Public: k.Public, Sealed: k.Sealed, CreatedAt: at, RetiredAt: &at}),
		"insert without key": edge.Keys.Insert(&edge.Key{KID: "ek_y", CreatedAt: at}),
	} {
		if _, err := f.store.Apply(ctx, op); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// scan fails if any form of secret appears in b.
func scan(t *testing.T, where string, b []byte, secret []byte) {
	t.Helper()
	for name, form := range map[string]string{
		"raw": string(secret), "hex": hex.EncodeToString(secret), "base64": base64.StdEncoding.EncodeToString(secret),
		"base64url": base64.RawURLEncoding.EncodeToString(secret), "base64 unpadded": base64.RawStdEncoding.EncodeToString(secret),
	} {
		if bytes.Contains(b, []byte(form)) {
			t.Errorf("%s holds the private key (%s)", where, name)
		}
	}
}

func TestPrivateKeysAreSealedAtRest(t *testing.T) {
	dir := t.TempDir()
	store, err := raftstore.Open(raftstore.Config{NodeID: "n1", Dir: filepath.Join(dir, "raft"), Tables: tables()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	ctx := context.Background()
	if err := store.WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	f := nodeOn(t, store, filepath.Join(dir, "kek"), newClock())
	if _, err := f.keys.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ring.Rotate(ctx); err != nil { // re-seals: a second sealing of the same key
		t.Fatal(err)
	}
	row, _, _ := edge.Keys.Get(store.Read(), f.keys.List()[0].KID)
	seed, err := f.ring.Open(row.Sealed, []byte("edge-key/"+row.KID))
	if err != nil || len(seed) != ed25519.SeedSize {
		t.Fatalf("the sealed key does not open as a seed: %v", err)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	raw, _ := json.Marshal(row)
	scan(t, "the row's JSON", raw, seed)
	scan(t, "the row's JSON", raw, priv)
	if err := store.Snapshot(); err != nil {
		t.Fatal(err)
	}
	files := 0
	_ = filepath.WalkDir(filepath.Join(dir, "raft"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		scan(t, path, b, seed)
		scan(t, path, b, priv)
		return nil
	})
	if files < 2 {
		t.Fatalf("scanned %d files of the store: the scan proves nothing", files)
	}
	// The row names its purpose: moved to another kid, it does not open.
	if _, err := f.ring.Open(row.Sealed, []byte("edge-key/ek_other")); err == nil {
		t.Fatal("a sealed key opened for another kid")
	}
}

func TestANodeWithAnotherKEKFailsClosed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.signer.Assertion(ctx, alice("app_A")); err != nil {
		t.Fatal(err)
	}
	foreign := nodeOn(t, f.store, filepath.Join(t.TempDir(), "other-kek"), f.clock)
	tok, err := foreign.signer.Assertion(ctx, alice("app_A"))
	if tok != "" || errcode.CodeOf(err) != errcode.AdapterFailed {
		t.Fatalf("a node whose KEK did not wrap the keys signed: %q, %v", tok, err)
	}
	if e, _ := errcode.As(err); e == nil || !strings.Contains(e.Remedy, "key-encryption key") {
		t.Fatalf("no remedy: %v", err)
	}
	if strings.Contains(err.Error(), string(mustRow(t, f).Sealed)) {
		t.Fatal("the error shows sealed material")
	}
}

func mustRow(t *testing.T, f *fixture) edge.Key {
	t.Helper()
	items, _ := edge.Keys.List(f.store.Read(), raftstore.Query{Reverse: true, Limit: 1})
	if len(items) == 0 {
		t.Fatal("no key")
	}
	return items[0].Value
}

// unwritable is a store that reads but cannot write: no leader.
type unwritable struct{ *raftstore.Store }

func (unwritable) Update(context.Context, raftstore.Build) (uint64, error) {
	return 0, errcode.New(errcode.StoreUnavailable, "no leader")
}

var _ edge.KeyStore = unwritable{}

func TestNoKeyAndNoWayToWriteOneFailsClosed(t *testing.T) {
	store := raftstoretest.Open(t, tables()...)
	c := newClock()
	ring := newRing(t, store, filepath.Join(t.TempDir(), "kek"), c.now)
	keys, err := edge.NewSigningKeys(edge.KeysDeps{Store: unwritable{store}, Ring: ring, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := edge.NewSigner(edge.SignerConfig{Keys: keys, Issuer: issuer, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := signer.Assertion(context.Background(), alice("app_A"))
	if tok != "" || err == nil {
		t.Fatalf("signed without any key: %q %v", tok, err)
	}
	if _, err := edge.NewSigner(edge.SignerConfig{Keys: keys}); err == nil {
		t.Fatal("a signer without an issuer was made")
	}
	if _, err := edge.NewSigningKeys(edge.KeysDeps{Store: store}); err == nil {
		t.Fatal("signing keys without a keyring were made")
	}
}

func TestKeyringRotationResealsTheKeys(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tok, _ := f.signer.Assertion(ctx, alice("app_A"))
	if _, err := f.keys.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	// The keyring's newest data key is the one with the highest ID, minted
	// from the time: let the clock move on, as a real one does.
	f.clock.advance(time.Second)
	rot, err := f.ring.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rot.Resealed < 2 {
		t.Fatalf("the keyring rotation re-sealed %d values; want both signing keys", rot.Resealed)
	}
	items, _ := edge.Keys.List(f.store.Read(), raftstore.Query{})
	for _, it := range items {
		if keyring.KeyID(it.Value.Sealed) != rot.Key.ID {
			t.Errorf("key %s is sealed under %s, not the new data key %s", it.Value.KID, keyring.KeyID(it.Value.Sealed), rot.Key.ID)
		}
	}
	// Another node (same KEK) opens the re-sealed current key and signs.
	other := nodeOn(t, f.store, f.kek, f.clock)
	tok2, err := other.signer.Assertion(ctx, alice("app_A"))
	if err != nil || kidOf(t, tok2) == kidOf(t, tok) {
		t.Fatalf("after re-sealing: %v, kid %s (first %s)", err, kidOf(t, tok2), kidOf(t, tok))
	}
}

func TestAnotherNodeFollowsARotation(t *testing.T) {
	store := raftstoretest.Open(t, tables()...)
	kek := filepath.Join(t.TempDir(), "kek")
	c := newClock()
	a, b := nodeOn(t, store, kek, c), nodeOn(t, store, kek, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _ = b.keys.Watch(ctx) }()
	defer func() { cancel(); <-done }()
	first, err := b.signer.Assertion(ctx, alice("app_A"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := a.keys.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		tok, err := b.signer.Assertion(ctx, alice("app_A"))
		if err != nil {
			t.Fatal(err)
		}
		if kidOf(t, tok) == keys[0].KID {
			break
		}
		if kidOf(t, tok) != kidOf(t, first) || i == 2000 {
			t.Fatalf("node b signs with %s after %d tries; want %s", kidOf(t, tok), i, keys[0].KID)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestTheLeaderLoopMakesTheFirstKey(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.keys.Loop(edge.KeyRotationInterval, time.Hour)(ctx) }()
	for i := 0; edge.Keys.Count(f.store.Read()) == 0; i++ {
		if i == 2000 {
			t.Fatal("the leader loop made no key")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if list := f.keys.List(); len(list) != 1 || !list[0].Current {
		t.Fatalf("keys = %+v", list)
	}
}
