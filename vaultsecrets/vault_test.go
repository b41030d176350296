package vaultsecrets_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/internal/secrets/secretstest"
	"github.com/svchost/svc/internal/vaulttest"
	"github.com/svchost/svc/vaultsecrets"
)

// These tests run a real `vault server -dev` (internal/vaulttest); they
// skip without a vault binary, and say how to get one.

// devVault is a dev server and a root client of it, for setting things up
// and for reading what the adapter wrote.
type devVault struct {
	srv  *vaulttest.Server
	root *api.Client
}

func startVault(t testing.TB) *devVault {
	t.Helper()
	srv := vaulttest.Start(t)
	c, err := api.NewClient(&api.Config{Address: srv.Addr})
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(srv.RootToken)
	c.ClearNamespace()
	return &devVault{srv: srv, root: c}
}

var policies atomic.Int64

// policyToken writes the adapter's policy for a prefix and returns a new
// token holding it; opts add to the token's creation (ttl, renewable, …).
func (d *devVault) policyToken(t testing.TB, prefix string, opts map[string]any) string {
	t.Helper()
	name := d.policy(t, prefix)
	body := map[string]any{"policies": []string{name}}
	for k, v := range opts {
		body[k] = v
	}
	sec, err := d.root.Logical().Write("auth/token/create", body)
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	return sec.Auth.ClientToken
}

// policy writes the adapter's policy for a prefix and returns its name.
func (d *devVault) policy(t testing.TB, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("svc-%d", policies.Add(1))
	if err := d.root.Sys().PutPolicy(name, vaultsecrets.VaultPolicy("", prefix)); err != nil {
		t.Fatalf("write policy: %v", err)
	}
	return name
}

// adapter opens the adapter against the dev server and closes it at the
// test's end.
func (d *devVault) adapter(t testing.TB, cfg vaultsecrets.VaultConfig) *vaultsecrets.Vault {
	t.Helper()
	cfg.Address = d.srv.Addr
	v, err := vaultsecrets.NewVault(context.Background(), cfg)
	if err != nil {
		t.Fatalf("NewVault: %v", err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// appRole enables AppRole (once), creates a role whose tokens hold the
// adapter's policy for prefix, and returns its role_id and a secret_id.
func (d *devVault) appRole(t testing.TB, prefix string, role map[string]any) (roleID, secretID string) {
	t.Helper()
	auths, err := d.root.Sys().ListAuth()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := auths["approle/"]; !ok {
		if err := d.root.Sys().EnableAuthWithOptions("approle", &api.EnableAuthOptions{Type: "approle"}); err != nil {
			t.Fatalf("enable approle: %v", err)
		}
	}
	name := d.policy(t, prefix)
	body := map[string]any{"token_policies": []string{name}}
	for k, v := range role {
		body[k] = v
	}
	if _, err := d.root.Logical().Write("auth/approle/role/"+name, body); err != nil {
		t.Fatalf("create role: %v", err)
	}
	sec, err := d.root.Logical().Read("auth/approle/role/" + name + "/role-id")
	if err != nil {
		t.Fatalf("read role-id: %v", err)
	}
	roleID, _ = sec.Data["role_id"].(string)
	sec, err = d.root.Logical().Write("auth/approle/role/"+name+"/secret-id", nil)
	if err != nil {
		t.Fatalf("create secret-id: %v", err)
	}
	secretID, _ = sec.Data["secret_id"].(string)
	if roleID == "" || secretID == "" {
		t.Fatal("approle answered no role_id or secret_id")
	}
	return roleID, secretID
}

// tokenAccessors lists the accessors of every live token.
func (d *devVault) tokenAccessors(t testing.TB) map[string]bool {
	t.Helper()
	sec, err := d.root.Logical().List("auth/token/accessors")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	keys, _ := sec.Data["keys"].([]any)
	for _, k := range keys {
		out[k.(string)] = true
	}
	return out
}

// logBuffer collects an adapter's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// mustNotShow fails if text contains any of the secrets.
func mustNotShow(t *testing.T, what, text string, secretsNotShown ...string) {
	t.Helper()
	for _, s := range secretsNotShown {
		if s != "" && strings.Contains(text, s) {
			t.Fatalf("%s shows a secret:\n%s", what, text)
		}
	}
}

var bg = context.Background()

func TestVaultPassesTheSecretsContract(t *testing.T) {
	d := startVault(t)
	var n atomic.Int64
	secretstest.Run(t, func(t *testing.T, env secretstest.Env) (string, secrets.Backend) {
		prefix := fmt.Sprintf("contract/%d", n.Add(1)) // each case its own prefix, and a token for it alone
		return "adp_vault_secrets", d.adapter(t, vaultsecrets.VaultConfig{Token: d.policyToken(t, prefix, nil), Prefix: prefix})
	})
}

func TestVaultWithAToken(t *testing.T) {
	d := startVault(t)
	token := d.policyToken(t, "svc", nil)
	v := d.adapter(t, vaultsecrets.VaultConfig{Token: token})
	if err := v.Check(bg); err != nil {
		t.Fatalf("Check: %v", err)
	}
	want := map[string]any{"kv_version": 2, "versions": true, "mount": "secret", "prefix": "svc", "auth": "token"}
	if got := v.Capabilities(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Capabilities() = %v, want %v", got, want)
	}
	st, err := v.Put(bg, ref, "hello")
	if err != nil || st.Version != 1 || st.Sealed != nil {
		t.Fatalf("Put = %+v, %v; want version 1 and nothing sealed", st, err)
	}
	if got, err := v.Get(bg, ref, st); err != nil || got != "hello" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	// The value is where the documentation says, as the field "value".
	kv, err := d.root.KVv2("secret").Get(bg, "svc/apps/"+ref.AppID+"/"+ref.Key)
	if err != nil || kv.Data["value"] != "hello" || len(kv.Data) != 1 {
		t.Fatalf("vault holds %v, %v; want {value: hello}", kv, err)
	}
	if err := v.Delete(bg, ref); err != nil {
		t.Fatal(err)
	}
	_, err = v.Get(bg, ref, st)
	wantCoded(t, err, errcode.NotFound)
	if err := v.Delete(bg, ref); err != nil {
		t.Fatalf("Delete of a deleted secret: %v", err)
	}
}

func TestVaultWithAppRole(t *testing.T) {
	d := startVault(t)
	roleID, secretID := d.appRole(t, "svc", map[string]any{"token_ttl": "1h"})
	before := d.tokenAccessors(t)
	var logs logBuffer
	v, err := vaultsecrets.NewVault(bg, vaultsecrets.VaultConfig{Address: d.srv.Addr, RoleID: roleID, SecretID: secretID, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Capabilities()["auth"]; got != "approle" {
		t.Fatalf("auth = %v", got)
	}
	if err := v.Check(bg); err != nil {
		t.Fatalf("Check: %v", err)
	}
	st, err := v.Put(bg, ref, "via-approle")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := v.Get(bg, ref, st); err != nil || got != "via-approle" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	entries, err := v.List(bg, ref.AppID)
	if err != nil || len(entries) != 1 || entries[0].Key != ref.Key || entries[0].Version != st.Version {
		t.Fatalf("List = %+v, %v", entries, err)
	}
	if len(d.tokenAccessors(t)) != len(before)+1 {
		t.Fatalf("logging in did not make one token")
	}
	// Close revokes the token the adapter logged in for.
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if after := d.tokenAccessors(t); len(after) != len(before) {
		t.Fatalf("%d tokens after Close, want %d: the AppRole token was not revoked", len(after), len(before))
	}
	if !strings.Contains(logs.String(), "logged in with AppRole") {
		t.Errorf("the log does not show the login:\n%s", logs.String())
	}
	mustNotShow(t, "the adapter's log", logs.String(), secretID, roleID, "hvs.", "via-approle")
}

func TestVaultRenewsAShortLivedToken(t *testing.T) {
	t.Parallel()
	d := startVault(t)
	const ttl = 3 * time.Second
	token := d.policyToken(t, "svc", map[string]any{"ttl": "3s", "explicit_max_ttl": "1h", "renewable": true})
	var logs logBuffer
	v := d.adapter(t, vaultsecrets.VaultConfig{Token: token, Logger: logs.logger()})
	if _, err := v.Put(bg, ref, "before"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3*ttl + time.Second) // without renewal the token would be long gone
	st, err := v.Put(bg, ref, "after")
	if err != nil {
		t.Fatalf("Put after %s with a %s token: %v\nlog:\n%s", 3*ttl+time.Second, ttl, err, logs.String())
	}
	if got, err := v.Get(bg, ref, st); err != nil || got != "after" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if err := v.Check(bg); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if !strings.Contains(logs.String(), "token renewed") {
		t.Errorf("the log shows no renewal:\n%s", logs.String())
	}
	mustNotShow(t, "the adapter's log", logs.String(), token, "after", "before")
	t.Logf("the adapter's log:\n%s", logs.String())

	// Close stops the renewal: the token then expires.
	_ = v.Close()
	time.Sleep(ttl + time.Second)
	c, _ := api.NewClient(&api.Config{Address: d.srv.Addr})
	c.SetToken(token)
	if _, err := c.Auth().Token().LookupSelf(); err == nil {
		t.Fatal("the token still lives after Close and its TTL: renewal did not stop")
	}
}

func TestVaultAppRoleLogsInAgainWhenRenewalEnds(t *testing.T) {
	t.Parallel()
	d := startVault(t)
	// Tokens live 2s and can be renewed up to 5s after login: the adapter
	// must log in again, more than once, to keep working for 12s.
	roleID, secretID := d.appRole(t, "svc", map[string]any{"token_ttl": "2s", "token_max_ttl": "5s"})
	var logs logBuffer
	v := d.adapter(t, vaultsecrets.VaultConfig{RoleID: roleID, SecretID: secretID, Logger: logs.logger()})
	deadline := time.Now().Add(12 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		value := fmt.Sprintf("value-%d", i)
		st, err := v.Put(bg, ref, value)
		if err != nil {
			t.Fatalf("Put %d: %v\nlog:\n%s", i, err, logs.String())
		}
		if got, err := v.Get(bg, ref, st); err != nil || got != value {
			t.Fatalf("Get %d = %q, %v", i, got, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "logged in with AppRole"); n < 3 {
		t.Fatalf("%d logins in 12s with a 5s max TTL, want at least 3:\n%s", n, logs.String())
	}
	// The renewal loop logs in again before the token ends (a request
	// refused with a dead token would too, but only as a fallback).
	if !strings.Contains(logs.String(), "can be renewed no longer; logging in again") {
		t.Errorf("no login came from the renewal loop:\n%s", logs.String())
	}
	mustNotShow(t, "the adapter's log", logs.String(), secretID, roleID, "hvs.", "value-")
	t.Logf("the adapter's log:\n%s", logs.String())
}

func TestVaultAppRoleRecoversFromARevokedToken(t *testing.T) {
	d := startVault(t)
	roleID, secretID := d.appRole(t, "svc", map[string]any{"token_ttl": "1h"})
	before := d.tokenAccessors(t)
	v := d.adapter(t, vaultsecrets.VaultConfig{RoleID: roleID, SecretID: secretID})
	for a := range d.tokenAccessors(t) {
		if !before[a] {
			if _, err := d.root.Logical().Write("auth/token/revoke-accessor", map[string]any{"accessor": a}); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := v.Put(bg, ref, "after-revoke")
	if err != nil {
		t.Fatalf("Put after the token was revoked: %v", err)
	}
	if got, err := v.Get(bg, ref, st); err != nil || got != "after-revoke" {
		t.Fatalf("Get = %q, %v", got, err)
	}
}

func TestVaultVersionsMatchVaultMetadata(t *testing.T) {
	d := startVault(t)
	v := d.adapter(t, vaultsecrets.VaultConfig{Token: d.policyToken(t, "svc", nil)})
	path := "svc/apps/" + ref.AppID + "/" + ref.Key
	var last int64
	for i, value := range []string{"one", "two", "two"} {
		start := time.Now().Add(-time.Second)
		st, err := v.Put(bg, ref, value)
		if err != nil {
			t.Fatal(err)
		}
		if st.Version <= last {
			t.Fatalf("write %d: version %d after %d; a rotation must raise it", i, st.Version, last)
		}
		last = st.Version
		md, err := d.root.KVv2("secret").GetMetadata(bg, path)
		if err != nil {
			t.Fatal(err)
		}
		if int64(md.CurrentVersion) != st.Version {
			t.Fatalf("write %d: adapter says version %d, vault's metadata %d", i, st.Version, md.CurrentVersion)
		}
		entries, err := v.List(bg, ref.AppID)
		if err != nil || len(entries) != 1 {
			t.Fatalf("List = %+v, %v", entries, err)
		}
		if e := entries[0]; e.Version != st.Version || e.UpdatedAt.Before(start) || e.UpdatedAt.After(time.Now().Add(time.Second)) {
			t.Fatalf("write %d: List says %+v, want version %d updated just now", i, e, st.Version)
		}
		if got, err := v.Get(bg, ref, st); err != nil || got != value {
			t.Fatalf("Get = %q, %v", got, err)
		}
	}
	// Every version is kept in vault until the secret is deleted.
	versions, err := d.root.KVv2("secret").GetVersionsAsList(bg, path)
	if err != nil || len(versions) != 3 {
		t.Fatalf("vault keeps %d versions (%v), want 3", len(versions), err)
	}
	if err := v.Delete(bg, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := d.root.KVv2("secret").GetMetadata(bg, path); !errors.Is(err, api.ErrSecretNotFound) {
		t.Fatalf("after Delete vault's metadata read gives %v, want nothing there", err)
	}
}

func TestVaultStoppedIsUnavailable(t *testing.T) {
	d := startVault(t)
	token := d.policyToken(t, "svc", nil)
	v := d.adapter(t, vaultsecrets.VaultConfig{Token: token, MaxRetries: -1})
	d.srv.Stop()
	const value = "canary-value-5d1e"
	_, err := v.Put(bg, ref, value)
	e := wantCoded(t, err, errcode.AdapterUnavailable, token, value)
	if !strings.Contains(e.Message, "not reachable") {
		t.Errorf("message = %q", e.Message)
	}
	_, err = v.Get(bg, ref, secrets.Stored{})
	wantCoded(t, err, errcode.AdapterUnavailable, token)
	_, err = v.List(bg, ref.AppID)
	wantCoded(t, err, errcode.AdapterUnavailable, token)
	wantCoded(t, v.Delete(bg, ref), errcode.AdapterUnavailable, token)
	wantCoded(t, v.Check(bg), errcode.AdapterUnavailable, token)
	_, err = vaultsecrets.NewVault(bg, vaultsecrets.VaultConfig{Address: d.srv.Addr, Token: token, MaxRetries: -1})
	wantCoded(t, err, errcode.AdapterUnavailable, token)
}

func TestVaultSealedIsUnavailable(t *testing.T) {
	d := startVault(t)
	token := d.policyToken(t, "svc", nil)
	v := d.adapter(t, vaultsecrets.VaultConfig{Token: token, MaxRetries: -1})
	if err := d.root.Sys().Seal(); err != nil {
		t.Fatal(err)
	}
	const value = "canary-value-7c2b"
	_, err := v.Put(bg, ref, value)
	e := wantCoded(t, err, errcode.AdapterUnavailable, token, value)
	if !strings.Contains(e.Message, "HTTP 503") || !strings.Contains(e.Remedy, "unseal") {
		t.Errorf("message %q, remedy %q", e.Message, e.Remedy)
	}
}

func TestVaultWithoutPermissionFails(t *testing.T) {
	d := startVault(t)
	// The token may use the mount, under another prefix only.
	token := d.policyToken(t, "elsewhere", nil)
	v := d.adapter(t, vaultsecrets.VaultConfig{Token: token, Prefix: "svc"})
	const value = "canary-value-9e4f"
	_, err := v.Put(bg, ref, value)
	e := wantCoded(t, err, errcode.AdapterFailed, token, value)
	if e.Message != "vault refused writing secret API_KEY (HTTP 403)" || !strings.Contains(e.Remedy, "secret/data/svc/apps/*") {
		t.Errorf("message %q, remedy %q", e.Message, e.Remedy)
	}
	_, err = v.Get(bg, ref, secrets.Stored{})
	wantCoded(t, err, errcode.AdapterFailed, token)
	_, err = v.List(bg, ref.AppID)
	wantCoded(t, err, errcode.AdapterFailed, token)
	wantCoded(t, v.Delete(bg, ref), errcode.AdapterFailed, token)

	// A token that may touch nothing under the mount is refused at start.
	sec, err := d.root.Logical().Write("auth/token/create", map[string]any{"policies": []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	bare := sec.Auth.ClientToken
	_, err = vaultsecrets.NewVault(bg, vaultsecrets.VaultConfig{Address: d.srv.Addr, Token: bare})
	wantCoded(t, err, errcode.AdapterFailed, bare)

	// And so is a token vault does not know.
	_, err = vaultsecrets.NewVault(bg, vaultsecrets.VaultConfig{Address: d.srv.Addr, Token: "hvs.not-a-real-token"})
	wantCoded(t, err, errcode.AdapterFailed, "hvs.not-a-real-token")
}

func TestVaultRefusesAKVVersion1Mount(t *testing.T) {
	d := startVault(t)
	if err := d.root.Sys().Mount("kv1", &api.MountInput{Type: "kv", Options: map[string]string{"version": "1"}}); err != nil {
		t.Fatal(err)
	}
	_, err := vaultsecrets.NewVault(bg, vaultsecrets.VaultConfig{Address: d.srv.Addr, Token: d.srv.RootToken, Mount: "kv1"})
	e := wantCoded(t, err, errcode.AdapterFailed, d.srv.RootToken)
	if !strings.Contains(e.Message, "not KV version 2") {
		t.Errorf("message = %q", e.Message)
	}
	_, err = vaultsecrets.NewVault(bg, vaultsecrets.VaultConfig{Address: d.srv.Addr, Token: d.srv.RootToken, Mount: "nothing-here"})
	wantCoded(t, err, errcode.AdapterFailed, d.srv.RootToken)
}

// BenchmarkVaultPutGet measures a write and a read of one secret against a
// local dev server (in memory, over loopback HTTP).
func BenchmarkVaultPutGet(b *testing.B) {
	d := startVault(b)
	v := d.adapter(b, vaultsecrets.VaultConfig{Token: d.srv.RootToken})
	value := strings.Repeat("x", 64)
	var put, get time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		st, err := v.Put(bg, ref, value)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := v.Get(bg, ref, st); err != nil {
			b.Fatal(err)
		}
		put += t1.Sub(t0)
		get += time.Since(t1)
		n++
	}
	b.ReportMetric(float64(put.Microseconds())/float64(n), "put-µs/op")
	b.ReportMetric(float64(get.Microseconds())/float64(n), "get-µs/op")
}
