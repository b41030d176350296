package vaultsecrets_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/vaultsecrets"
)

// These tests need no Vault: an httptest server answers as Vault would, so
// the error translation, the configuration and the AppRole re-login are
// tested everywhere.

const (
	fakeToken    = "hvs.FAKE-token-must-never-show"
	fakeSecretID = "secret-id-must-never-show"
	fakeValue    = "value-must-never-show-3f9a"
)

var ref = secrets.Ref{AppID: "app_01JTESTTESTTESTTESTTESTTE", Key: "API_KEY"}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// route answers one request, or returns false to leave it to the defaults.
type route func(w http.ResponseWriter, r *http.Request, body []byte) bool

// fakeVault answers like a healthy Vault with a KV v2 mount at secret/:
// lookup-self and the mount preflight succeed; everything else is 404
// unless route answers it.
func fakeVault(t *testing.T, rt route) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(fakeHandler(rt))
	t.Cleanup(srv.Close)
	return srv
}

func fakeHandler(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if rt != nil && rt(w, r, body) {
			return
		}
		switch r.URL.Path {
		case "/v1/auth/token/lookup-self":
			writeJSON(w, 200, map[string]any{"data": map[string]any{"ttl": 0, "renewable": false}})
		case "/v1/sys/internal/ui/mounts/secret":
			writeJSON(w, 200, map[string]any{"data": map[string]any{"type": "kv", "path": "secret/", "options": map[string]any{"version": "2"}}})
		default:
			writeJSON(w, 404, map[string]any{"errors": []string{}})
		}
	})
}

// echo answers with a status and a body that repeats the request, its
// token included, as a careless server or proxy might.
func echo(w http.ResponseWriter, r *http.Request, body []byte, status int) {
	writeJSON(w, status, map[string]any{"errors": []string{
		"echo of " + string(body) + " token " + r.Header.Get("X-Vault-Token"),
	}})
}

func fakeConfig(srv *httptest.Server) vaultsecrets.VaultConfig {
	return vaultsecrets.VaultConfig{Address: srv.URL, Token: fakeToken, MaxRetries: -1, Timeout: 5 * time.Second}
}

func newFakeAdapter(t *testing.T, cfg vaultsecrets.VaultConfig) *vaultsecrets.Vault {
	t.Helper()
	v, err := vaultsecrets.NewVault(context.Background(), cfg)
	if err != nil {
		t.Fatalf("NewVault: %v", err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// wantCoded checks an error's code and that nothing secret shows in any
// of its text: message, remedy, details or the wrapped cause.
func wantCoded(t *testing.T, err error, code errcode.Code, secretsNotShown ...string) *errcode.Error {
	t.Helper()
	e, ok := errcode.As(err)
	if !ok {
		t.Fatalf("got %v (%T), want a coded %s error", err, err, code)
	}
	if e.Code != code {
		t.Fatalf("got code %s (%v), want %s", e.Code, err, code)
	}
	if e.Remedy == "" {
		t.Errorf("error %q has no remedy", e.Message)
	}
	all := fmt.Sprintf("%s | %s | %s | %v | %+v", err.Error(), e.Message, e.Remedy, e.Details, e)
	for _, s := range secretsNotShown {
		if strings.Contains(all, s) {
			t.Fatalf("error text shows a secret (%q): %s", s, all)
		}
	}
	if strings.Contains(all, "echo of") {
		t.Fatalf("error text copies vault's response body: %s", all)
	}
	if e.Message != strings.ToLower(e.Message[:1])+e.Message[1:] {
		t.Errorf("message %q is not lowercase", e.Message)
	}
	return e
}

func TestVaultTranslatesErrorStatuses(t *testing.T) {
	tests := []struct {
		status int
		op     string // put, get, delete, list
		want   errcode.Code
	}{
		{400, "put", errcode.AdapterFailed},
		{401, "put", errcode.AdapterFailed},
		{403, "put", errcode.AdapterFailed},
		{403, "get", errcode.AdapterFailed},
		{403, "list", errcode.AdapterFailed},
		{403, "delete", errcode.AdapterFailed},
		{404, "put", errcode.AdapterFailed},
		{404, "get", errcode.NotFound},
		{412, "put", errcode.AdapterFailed},
		{429, "put", errcode.AdapterFailed},
		{500, "put", errcode.AdapterFailed},
		{500, "get", errcode.AdapterFailed},
		{500, "delete", errcode.AdapterFailed},
		{502, "list", errcode.AdapterFailed},
		{503, "put", errcode.AdapterUnavailable},
		{503, "get", errcode.AdapterUnavailable},
		{503, "list", errcode.AdapterUnavailable},
		{503, "delete", errcode.AdapterUnavailable},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %d", tt.op, tt.status), func(t *testing.T) {
			srv := fakeVault(t, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
				if strings.HasPrefix(r.URL.Path, "/v1/secret/data/") || strings.HasPrefix(r.URL.Path, "/v1/secret/metadata/") {
					echo(w, r, body, tt.status)
					return true
				}
				return false
			})
			v := newFakeAdapter(t, fakeConfig(srv))
			var err error
			switch tt.op {
			case "put":
				_, err = v.Put(context.Background(), ref, fakeValue)
			case "get":
				_, err = v.Get(context.Background(), ref, secrets.Stored{})
			case "delete":
				err = v.Delete(context.Background(), ref)
			case "list":
				_, err = v.List(context.Background(), ref.AppID)
			}
			e := wantCoded(t, err, tt.want, fakeToken, fakeValue)
			if tt.want != errcode.NotFound && !strings.Contains(e.Message, fmt.Sprintf("HTTP %d", tt.status)) {
				t.Errorf("message %q does not name the status", e.Message)
			}
			if tt.op != "list" && !strings.Contains(e.Message, ref.Key) {
				t.Errorf("message %q does not name the secret", e.Message)
			}
		})
	}
}

func TestVaultRefusalNamesThePolicyPath(t *testing.T) {
	srv := fakeVault(t, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if strings.HasPrefix(r.URL.Path, "/v1/secret/data/") {
			echo(w, r, body, 403)
			return true
		}
		return false
	})
	v := newFakeAdapter(t, fakeConfig(srv))
	_, err := v.Put(context.Background(), ref, fakeValue)
	e := wantCoded(t, err, errcode.AdapterFailed, fakeToken, fakeValue)
	if got, want := e.Message, "vault refused writing secret API_KEY (HTTP 403)"; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	if !strings.Contains(e.Remedy, "create and update on secret/data/svc/apps/*") {
		t.Errorf("remedy %q does not name the capabilities and path the policy must allow", e.Remedy)
	}
}

func TestVaultDeleteOfAMissingSecretIsNoError(t *testing.T) {
	srv := fakeVault(t, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if r.Method == http.MethodDelete {
			writeJSON(w, 404, map[string]any{"errors": []string{}})
			return true
		}
		return false
	})
	v := newFakeAdapter(t, fakeConfig(srv))
	if err := v.Delete(context.Background(), ref); err != nil {
		t.Fatalf("Delete of a missing secret: %v", err)
	}
}

func TestVaultReadOfADeletedVersionIsNotFound(t *testing.T) {
	srv := fakeVault(t, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if strings.HasPrefix(r.URL.Path, "/v1/secret/data/") {
			// KV v2 answers a soft-deleted latest version with 404 and its
			// metadata.
			writeJSON(w, 404, map[string]any{"data": map[string]any{"data": nil,
				"metadata": map[string]any{"version": 3, "deletion_time": "2025-01-01T00:00:00Z"}}})
			return true
		}
		return false
	})
	v := newFakeAdapter(t, fakeConfig(srv))
	_, err := v.Get(context.Background(), ref, secrets.Stored{})
	wantCoded(t, err, errcode.NotFound)
}

func TestVaultUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()

	slow := fakeVault(t, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		select {
		case <-r.Context().Done():
			panic(http.ErrAbortHandler) // no answer, not a late one
		case <-time.After(5 * time.Second):
		}
		return false
	})

	tests := []struct {
		name    string
		address string
		timeout time.Duration
	}{
		{"connection refused", closed, 0},
		{"host name does not resolve", "http://vault.invalid:8200", 0},
		{"no answer in time", slow.URL, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := vaultsecrets.NewVault(context.Background(), vaultsecrets.VaultConfig{
				Address: tt.address, Token: fakeToken, MaxRetries: -1, Timeout: tt.timeout})
			e := wantCoded(t, err, errcode.AdapterUnavailable, fakeToken)
			if !strings.Contains(e.Message, "vault at ") {
				t.Errorf("message %q does not name vault's address", e.Message)
			}
		})
	}
}

func TestVaultTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(fakeHandler(nil))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	srv.StartTLS()
	t.Cleanup(srv.Close)

	t.Run("an untrusted certificate fails", func(t *testing.T) {
		_, err := vaultsecrets.NewVault(context.Background(), vaultsecrets.VaultConfig{Address: srv.URL, Token: fakeToken, MaxRetries: -1})
		e := wantCoded(t, err, errcode.AdapterFailed, fakeToken)
		if !strings.Contains(e.Remedy, "ca_cert") {
			t.Errorf("remedy %q does not mention ca_cert", e.Remedy)
		}
	})
	t.Run("VAULT_SKIP_VERIFY in the environment does not turn verification off", func(t *testing.T) {
		t.Setenv("VAULT_SKIP_VERIFY", "true")
		_, err := vaultsecrets.NewVault(context.Background(), vaultsecrets.VaultConfig{Address: srv.URL, Token: fakeToken, MaxRetries: -1})
		e := wantCoded(t, err, errcode.AdapterFailed, fakeToken)
		if !strings.Contains(e.Message, "certificate") {
			t.Errorf("message = %q, want the untrusted certificate", e.Message)
		}
	})
	t.Run("the configured CA is trusted", func(t *testing.T) {
		ca := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		newFakeAdapter(t, vaultsecrets.VaultConfig{Address: srv.URL, Token: fakeToken, CACert: ca, MaxRetries: -1})
	})
	t.Run("skipping verification works", func(t *testing.T) {
		newFakeAdapter(t, vaultsecrets.VaultConfig{Address: srv.URL, Token: fakeToken, TLSSkipVerify: true, MaxRetries: -1})
	})
	t.Run("a missing CA file is a configuration error", func(t *testing.T) {
		_, err := vaultsecrets.NewVault(context.Background(), vaultsecrets.VaultConfig{Address: srv.URL, Token: fakeToken,
			CACert: filepath.Join(t.TempDir(), "missing.pem")})
		wantCoded(t, err, errcode.ValidInvalid, fakeToken)
	})
}

func TestVaultConfigIsValidated(t *testing.T) {
	tests := []struct {
		name  string
		cfg   vaultsecrets.VaultConfig
		field string
	}{
		{"no address", vaultsecrets.VaultConfig{Token: fakeToken}, "address"},
		{"not a URL", vaultsecrets.VaultConfig{Address: "vault:8200", Token: fakeToken}, "address"},
		{"no credentials", vaultsecrets.VaultConfig{Address: "http://127.0.0.1:8200"}, "token"},
		{"token and AppRole", vaultsecrets.VaultConfig{Address: "http://127.0.0.1:8200", Token: fakeToken, RoleID: "r", SecretID: fakeSecretID}, "token"},
		{"role without secret", vaultsecrets.VaultConfig{Address: "http://127.0.0.1:8200", RoleID: "r"}, "secret_id"},
		{"secret without role", vaultsecrets.VaultConfig{Address: "http://127.0.0.1:8200", SecretID: fakeSecretID}, "secret_id"},
		{"mount escapes", vaultsecrets.VaultConfig{Address: "http://127.0.0.1:8200", Token: fakeToken, Mount: "secret/../sys"}, "mount"},
		{"prefix with spaces", vaultsecrets.VaultConfig{Address: "http://127.0.0.1:8200", Token: fakeToken, Prefix: "my apps"}, "prefix"},
		{"empty segment", vaultsecrets.VaultConfig{Address: "http://127.0.0.1:8200", Token: fakeToken, Prefix: "a//b"}, "prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := vaultsecrets.NewVault(context.Background(), tt.cfg)
			e, ok := errcode.As(err)
			if !ok || e.Code != errcode.ValidInvalid || e.Details["field"] != tt.field {
				t.Fatalf("got %v, want VALID_INVALID about %s", err, tt.field)
			}
			if strings.Contains(err.Error(), fakeToken) || strings.Contains(err.Error(), fakeSecretID) {
				t.Fatalf("error shows a credential: %v", err)
			}
		})
	}
}

func TestVaultRefusesReferencesOutsideTheirApp(t *testing.T) {
	srv := fakeVault(t, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if strings.Contains(r.URL.Path, "/data/") || strings.Contains(r.URL.Path, "/metadata/") {
			t.Errorf("a bad reference reached vault: %s %s", r.Method, r.URL.Path)
		}
		return false
	})
	v := newFakeAdapter(t, fakeConfig(srv))
	for _, r := range []secrets.Ref{{AppID: "../other", Key: "K"}, {AppID: "app_x", Key: "../K"}, {AppID: "", Key: "K"}, {AppID: "a/b", Key: "K"}} {
		if _, err := v.Put(context.Background(), r, "v"); errcode.CodeOf(err) != errcode.ValidInvalid {
			t.Errorf("Put %+v: got %v, want VALID_INVALID", r, err)
		}
	}
	if _, err := v.List(context.Background(), "../x"); errcode.CodeOf(err) != errcode.ValidInvalid {
		t.Errorf("List ../x: got %v, want VALID_INVALID", err)
	}
}

func TestVaultIgnoresVaultEnvironmentVariables(t *testing.T) {
	t.Setenv("VAULT_TOKEN", "env-token")
	t.Setenv("VAULT_ADDR", "http://127.0.0.1:1")
	t.Setenv("VAULT_AGENT_ADDR", "http://127.0.0.1:1")
	t.Setenv("VAULT_NAMESPACE", "env-namespace")
	t.Setenv("VAULT_MAX_RETRIES", "9")
	var mu sync.Mutex
	var bad []string
	srv := fakeVault(t, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		if got := r.Header.Get("X-Vault-Token"); got != fakeToken {
			bad = append(bad, r.URL.Path+": token "+got)
		}
		if got := r.Header.Get("X-Vault-Namespace"); got != "" {
			bad = append(bad, r.URL.Path+": namespace "+got)
		}
		if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/secret/data/") {
			writeJSON(w, 200, map[string]any{"data": map[string]any{"version": 1}})
			return true
		}
		return false
	})
	v := newFakeAdapter(t, fakeConfig(srv))
	if _, err := v.Put(context.Background(), ref, "v"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("requests used the environment's settings:\n%s", strings.Join(bad, "\n"))
	}
}

func TestVaultSendsTheNamespace(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := fakeVault(t, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		mu.Lock()
		got = append(got, r.Header.Get("X-Vault-Namespace"))
		mu.Unlock()
		return false
	})
	cfg := fakeConfig(srv)
	cfg.Namespace = "admin/team-a"
	v := newFakeAdapter(t, cfg)
	if c := v.Capabilities(); c["namespace"] != "admin/team-a" {
		t.Errorf("capabilities = %v", c)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, ns := range got {
		if strings.Trim(ns, "/") != "admin/team-a" {
			t.Fatalf("namespace header %q, want admin/team-a", ns)
		}
	}
}

func TestVaultRefusesAMountThatIsNotKVVersion2(t *testing.T) {
	tests := []struct {
		name  string
		data  map[string]any
		found bool
	}{
		{"KV version 1", map[string]any{"type": "kv", "options": map[string]any{"version": "1"}}, true},
		{"another engine", map[string]any{"type": "transit", "options": nil}, true},
		{"no mount", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeVault(t, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
				if r.URL.Path == "/v1/sys/internal/ui/mounts/secret" {
					if !tt.found {
						writeJSON(w, 404, map[string]any{"errors": []string{}})
					} else {
						writeJSON(w, 200, map[string]any{"data": tt.data})
					}
					return true
				}
				return false
			})
			_, err := vaultsecrets.NewVault(context.Background(), fakeConfig(srv))
			e := wantCoded(t, err, errcode.AdapterFailed, fakeToken)
			if !strings.Contains(e.Message, "secret") {
				t.Errorf("message %q does not name the mount", e.Message)
			}
		})
	}
}

func TestVaultCheckReportsARevokedToken(t *testing.T) {
	var revoked sync.Once
	dead := make(chan struct{})
	srv := fakeVault(t, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		select {
		case <-dead:
			echo(w, r, body, 403)
			return true
		default:
			return false
		}
	})
	v := newFakeAdapter(t, fakeConfig(srv))
	if err := v.Check(context.Background()); err != nil {
		t.Fatalf("Check of a healthy adapter: %v", err)
	}
	revoked.Do(func() { close(dead) })
	e := wantCoded(t, v.Check(context.Background()), errcode.AdapterFailed, fakeToken)
	if !strings.Contains(e.Remedy, "new token") {
		t.Errorf("remedy %q does not say to configure a new token", e.Remedy)
	}
}

// appRoleFake is a Vault whose AppRole login hands out tokens t1, t2, …;
// a token listed in dead is refused everywhere, as an expired one is.
type appRoleFake struct {
	mu     sync.Mutex
	logins int
	dead   map[string]bool
	denied bool // the policy refuses writes for every token
}

func (f *appRoleFake) route(w http.ResponseWriter, r *http.Request, body []byte) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path == "/v1/auth/approle/login" {
		var in map[string]string
		_ = json.Unmarshal(body, &in)
		if in["role_id"] != "role-1" || in["secret_id"] != fakeSecretID {
			echo(w, r, body, 400)
			return true
		}
		f.logins++
		writeJSON(w, 200, map[string]any{"auth": map[string]any{
			"client_token": fmt.Sprintf("t%d", f.logins), "renewable": false, "lease_duration": 3600}})
		return true
	}
	if f.dead[r.Header.Get("X-Vault-Token")] {
		echo(w, r, body, 403)
		return true
	}
	if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/secret/data/") {
		if f.denied {
			echo(w, r, body, 403)
			return true
		}
		writeJSON(w, 200, map[string]any{"data": map[string]any{"version": 7}})
		return true
	}
	return false
}

func TestVaultAppRoleLogsInAgainWhenItsTokenDies(t *testing.T) {
	f := &appRoleFake{dead: map[string]bool{}}
	srv := fakeVault(t, f.route)
	cfg := vaultsecrets.VaultConfig{Address: srv.URL, RoleID: "role-1", SecretID: fakeSecretID, MaxRetries: -1}
	v := newFakeAdapter(t, cfg)
	if got := v.Capabilities()["auth"]; got != "approle" {
		t.Fatalf("auth = %v", got)
	}

	f.mu.Lock()
	f.dead["t1"] = true // expired while the host slept, say
	f.mu.Unlock()
	st, err := v.Put(context.Background(), ref, fakeValue)
	if err != nil {
		t.Fatalf("Put after the token died: %v", err)
	}
	if st.Version != 7 {
		t.Fatalf("version = %d", st.Version)
	}
	f.mu.Lock()
	logins := f.logins
	f.denied = true
	f.mu.Unlock()
	if logins != 2 {
		t.Fatalf("%d logins, want 2 (start, and once the token died)", logins)
	}

	// A refusal with a live token is the policy's: no new login.
	_, err = v.Put(context.Background(), ref, fakeValue)
	wantCoded(t, err, errcode.AdapterFailed, fakeSecretID, fakeValue, "t2")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.logins != 2 {
		t.Fatalf("%d logins after a policy refusal, want still 2", f.logins)
	}
}

func TestVaultAppRoleLoginRefused(t *testing.T) {
	f := &appRoleFake{dead: map[string]bool{}}
	srv := fakeVault(t, f.route)
	_, err := vaultsecrets.NewVault(context.Background(), vaultsecrets.VaultConfig{
		Address: srv.URL, RoleID: "role-1", SecretID: "wrong-" + fakeSecretID, MaxRetries: -1})
	e := wantCoded(t, err, errcode.AdapterFailed, fakeSecretID)
	if !strings.Contains(e.Message, "AppRole") || !strings.Contains(e.Remedy, "secret_id") {
		t.Fatalf("message %q, remedy %q: want them to name the AppRole login and the secret_id", e.Message, e.Remedy)
	}
}

func TestVaultCancelledRequest(t *testing.T) {
	srv := fakeVault(t, func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if strings.HasPrefix(r.URL.Path, "/v1/secret/data/") {
			<-r.Context().Done()
			panic(http.ErrAbortHandler) // no answer, not a late 200
		}
		return false
	})
	v := newFakeAdapter(t, fakeConfig(srv))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := v.Put(ctx, ref, fakeValue)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want it to wrap context.Canceled", err)
	}
	wantCoded(t, err, errcode.AdapterUnavailable, fakeToken, fakeValue)
}

func TestVaultPolicyCoversThePrefix(t *testing.T) {
	p := vaultsecrets.VaultPolicy("", "teams/a")
	for _, want := range []string{`path "secret/data/teams/a/apps/*"`, `path "secret/metadata/teams/a/apps/*"`, `"delete"`, `"list"`} {
		if !strings.Contains(p, want) {
			t.Errorf("policy lacks %s:\n%s", want, p)
		}
	}
}
