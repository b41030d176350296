package server

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/svchost/svc/assertion"
	"github.com/svchost/svc/edge"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/raftstore"
)

// wireEdgeKeys builds the assertion signing keys as cmd/svc does (without
// the leader loop: tests rotate by hand).
func wireEdgeKeys(t testing.TB, store *raftstore.Store, ring *keyring.Ring) *edge.SigningKeys {
	t.Helper()
	keys, err := edge.NewSigningKeys(edge.KeysDeps{Store: store, Ring: ring})
	if err != nil {
		t.Fatal(err)
	}
	ring.OnRotate(keys)
	return keys
}

// edgeSigner is a signer over the harness's keys with its issuer.
func (h *harness) edgeSigner(t testing.TB) (*edge.SigningKeys, *edge.JWTSigner) {
	t.Helper()
	keys := h.srv.d.EdgeKeys.(*edge.SigningKeys)
	s, err := edge.NewSigner(edge.SignerConfig{Keys: keys, Issuer: h.srv.d.Config.Server.Issuer})
	if err != nil {
		t.Fatal(err)
	}
	return keys, s
}

func TestJWKSIsPublicAndCacheable(t *testing.T) {
	h := newHarness(t)
	a := h.send("GET", "/.well-known/jwks.json", "", "Authorization", "")
	if a.status != http.StatusOK || a.header.Get("Cache-Control") != "public, max-age=60" || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
		t.Fatalf("JWKS: %d %v %s", a.status, a.header, a.body)
	}
	if set := decodeAs[edge.JWKS](t, a); set.Keys == nil || len(set.Keys) != 0 {
		t.Fatalf("JWKS before any key = %s", a.body)
	}
	rot := h.send("POST", api+"/edge/keys/rotate", "")
	if rot.status != http.StatusOK {
		t.Fatalf("rotate: %d %s", rot.status, rot.body)
	}
	// A bad credential does not fail a public route.
	a = h.send("GET", "/.well-known/jwks.json", "", "Authorization", "Bearer tok_nonsense.x")
	var raw struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(a.body, &raw); err != nil || len(raw.Keys) != 1 {
		t.Fatalf("JWKS after a rotation: %d %s", a.status, a.body)
	}
	k := raw.Keys[0]
	if k["kty"] != "OKP" || k["crv"] != "Ed25519" || k["alg"] != "EdDSA" || k["use"] != "sig" || k["kid"] == "" || len(k) != 6 {
		t.Fatalf("JWK = %v", k)
	}
	if x, err := base64.RawURLEncoding.DecodeString(k["x"].(string)); err != nil || len(x) != ed25519.PublicKeySize {
		t.Fatalf("x = %v (%v)", k["x"], err)
	}
}

func TestEdgeKeysListAndRotate(t *testing.T) {
	h := newHarness(t)
	viewer := h.holder(t, authz.InstallView)
	first := decodeAs[edgeKeysDTO](t, h.send("POST", api+"/edge/keys/rotate", ""))
	second := h.send("POST", api+"/edge/keys/rotate", "")
	if second.status != http.StatusOK {
		t.Fatalf("rotate: %d %s", second.status, second.body)
	}
	got := decodeAs[edgeKeysDTO](t, second)
	if len(first.Items) != 1 || len(got.Items) != 2 || !got.Items[0].Current || got.Items[1].Current ||
		got.Items[1].KID != first.Items[0].KID || !got.Items[1].Published || got.Items[1].RetiredAt != nil {
		t.Fatalf("after two rotations: %s", second.body)
	}
	list := h.send("GET", api+"/edge/keys", "", viewer.bearer()...)
	if list.status != http.StatusOK || string(list.body) != string(second.body) {
		t.Fatalf("list as a viewer: %d %s\nwant %s", list.status, list.body, second.body)
	}
	wantError(t, "rotate as a viewer", h.send("POST", api+"/edge/keys/rotate", "", viewer.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
	wantError(t, "list signed out", h.send("GET", api+"/edge/keys", "", "Authorization", ""), http.StatusUnauthorized, errcode.AuthRequired)

	var rotations int
	for _, e := range h.auditEntries(t) {
		if e.Action == "edge_key.rotate" {
			rotations++
			if e.PrincipalID != tokenIDOf(h.token) || e.RequestID == "" || e.TargetKind == nil || *e.TargetKind != "edge_key" {
				t.Errorf("rotation entry %+v", e)
			}
		}
	}
	if rotations != 2 {
		t.Fatalf("%d edge_key.rotate entries, want 2", rotations)
	}

	// No private material in any answer, in any encoding.
	for _, it := range got.Items {
		row, _, _ := edge.Keys.Get(h.store.Read(), it.KID)
		seed, err := h.srv.d.Keyring.(*keyring.Ring).Open(row.Sealed, []byte("edge-key/"+row.KID))
		if err != nil {
			t.Fatal(err)
		}
		priv := ed25519.NewKeyFromSeed(seed)
		for _, body := range [][]byte{second.body, list.body, h.send("GET", "/.well-known/jwks.json", "").body} {
			for _, secret := range [][]byte{seed, priv} {
				for _, form := range []string{string(secret), hex.EncodeToString(secret), base64.StdEncoding.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret)} {
					if strings.Contains(string(body), form) {
						t.Fatalf("an answer holds private material of %s", it.KID)
					}
				}
			}
		}
	}
}

// Assertions signed while keys rotate verify, every one, against the JWKS
// the real endpoint serves: with the app-side verifier, and with an
// independent JOSE library.
func TestAssertionsVerifyAgainstTheServedJWKSWhileKeysRotate(t *testing.T) {
	h := newHarness(t)
	ts := httptest.NewServer(h.srv.Handler())
	t.Cleanup(ts.Close)
	_, signer := h.edgeSigner(t)
	jwksURL := ts.URL + "/.well-known/jwks.json"
	apps := []string{"app_01JAPPA0000000000000000000", "app_01JAPPB0000000000000000000"}
	verifiers := map[string]*assertion.Verifier{}
	for _, app := range apps {
		// Rotations here come far faster than any real one: let every
		// unknown kid fetch the set again.
		v, err := assertion.New(assertion.Options{JWKSURL: jwksURL, Issuer: h.srv.d.Config.Server.Issuer, Audience: app, RefetchInterval: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		verifiers[app] = v
	}

	const (
		workers   = 8
		perWorker = 250
		rotations = 6
		stride    = workers * perWorker / (rotations + 1)
	)
	var (
		done     atomic.Int64
		failures atomic.Int64
		rotated  atomic.Int64
		wg       sync.WaitGroup
		kidsMu   sync.Mutex
		kids     = map[string]int{}
	)
	ctx := context.Background()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				app := apps[(w+i)%len(apps)]
				c := edge.Claims{Subject: fmt.Sprintf("usr_%02d", (w*7+i)%5), Email: "u@example.test", Name: "U", Groups: []string{"g"}, Audience: app}
				tok, err := signer.Assertion(ctx, c)
				if err == nil {
					var got assertion.Claims
					got, err = verifiers[app].Verify(ctx, tok)
					if err == nil && (got.Subject != c.Subject || got.Audience != app) {
						err = fmt.Errorf("verified claims %+v for %+v", got, c)
					}
					if err == nil {
						head, _, _ := strings.Cut(tok, ".")
						kidsMu.Lock()
						kids[head]++
						kidsMu.Unlock()
					}
				}
				if err != nil {
					if failures.Add(1) <= 5 {
						t.Errorf("worker %d, request %d: %v", w, i, err)
					}
				}
				// Every stride-th request rotates the keys through the API,
				// while the other workers go on.
				if n := done.Add(1); n%stride == 0 && rotated.Add(1) <= rotations {
					if a := h.send("POST", api+"/edge/keys/rotate", ""); a.status != http.StatusOK {
						t.Errorf("rotate: %d %s", a.status, a.body)
					}
				}
			}
		}()
	}
	wg.Wait()
	if f := failures.Load(); f != 0 {
		t.Fatalf("%d of %d assertions failed to verify", f, workers*perWorker)
	}
	list := decodeAs[edgeKeysDTO](t, h.send("GET", api+"/edge/keys", ""))
	if len(list.Items) != rotations+1 || len(kids) < rotations {
		t.Fatalf("%d keys, %d distinct headers signed with; want %d keys used", len(list.Items), len(kids), rotations+1)
	}

	// The same, checked by go-jose against the set as served.
	tok, err := signer.Assertion(ctx, edge.Claims{Subject: "usr_jose", Audience: apps[0]})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(jwksURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != rotations+1 {
		t.Fatalf("the JWKS publishes %d keys; every key is still within its margin, want %d", len(set.Keys), rotations+1)
	}
	jws, err := jose.ParseSigned(tok, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	keys := set.Key(jws.Signatures[0].Header.KeyID)
	if len(keys) != 1 || keys[0].KeyID != list.Items[0].KID {
		t.Fatalf("go-jose finds %v for the current kid %s", keys, list.Items[0].KID)
	}
	if _, err := jws.Verify(keys[0].Key); err != nil {
		t.Fatalf("go-jose: %v", err)
	}
}
