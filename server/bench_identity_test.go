package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/password"
)

// newProductionHasherHarness is a harness whose identity service hashes with
// the production parameters (password.DefaultParams) and concurrency, as
// svc serve builds it.
func newProductionHasherHarness(b *testing.B) *harness {
	b.Helper()
	return newHarnessWith(b, harnessOptions{
		hasher:        password.NewHasher(password.DefaultParams, 2*runtime.GOMAXPROCS(0)),
		adminPassword: adminPassword,
		discardLogs:   true,
	})
}

// BenchmarkSignIn is POST /sessions end to end: bind, an Argon2id
// verification with the production parameters, and the replicated write of
// the session with its audit entry and event.
func BenchmarkSignIn(b *testing.B) {
	h := newProductionHasherHarness(b)
	const pw = "benchmark-password-1"
	if _, _, err := h.ident.CreateUser(context.Background(), identity.NewUser{Username: "bench", Password: pw}); err != nil {
		b.Fatal(err)
	}
	body := `{"username":"bench","password":"` + pw + `"}`
	b.ReportAllocs()
	for b.Loop() {
		serveWant(b, h, http.StatusOK, "POST", api+"/sessions", body, "Content-Type", "application/json")
	}
}

// BenchmarkTokenRequest is a read authenticated by a bearer token: the
// token's hash lookup, the authorization facts and the answer.
func BenchmarkTokenRequest(b *testing.B) {
	h := newHarnessWith(b, harnessOptions{adminPassword: adminPassword, discardLogs: true})
	for _, path := range []string{"/me", "/users"} {
		name := path[1:]
		path := api + path
		b.Run(name, func(b *testing.B) {
			serveWant(b, h, http.StatusOK, "GET", path, "", "Authorization", "Bearer "+h.token) // the first use records last_used_at
			b.ReportAllocs()
			for b.Loop() {
				serveWant(b, h, http.StatusOK, "GET", path, "", "Authorization", "Bearer "+h.token)
			}
		})
	}
}

// serveWant is serveOnce wanting one status: a benchmark of refusals
// measures nothing.
func serveWant(b *testing.B, h *harness, status int, method, path, body string, header ...string) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != status {
		b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
	}
}
