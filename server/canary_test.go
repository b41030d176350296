package server

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svchost/svc/edge"
)

// secretCanary is a secret the test plants and then looks for.
type secretCanary struct {
	name  string
	value string
	// shownAt is the index of the answer that returned it (a token secret,
	// a generated password, a cookie); -1 for a secret only a request ever
	// carried (a chosen password), which no answer may contain.
	shownAt int
}

// TestNoSecretLeaks plants recognisable secrets through every way one
// enters (chosen, generated and reset passwords, a password change, token
// and session secrets, a failed sign-in's password, app secrets set,
// rotated and refused, adapter credentials set, replaced and misplaced, an
// app's passcode set, changed, mistyped and entered) and then looks for them
// in every later answer, the audit log, the events, the log at debug level
// and the raw files of the store.
func TestNoSecretLeaks(t *testing.T) {
	const adminPW = "canary-admin-pw-6f1d9a"
	h := newHarnessWith(t, harnessOptions{level: slog.LevelDebug, adminPassword: adminPW, noToken: true,
		env: []string{"SVC_ADMIN_PASSWORD=" + adminPW, "SVC_POLICY_PUBLIC_SHARING=allowed"}})

	var (
		answers  []string
		canaries []secretCanary
	)
	do := func(method, path, body string, header ...string) answer {
		t.Helper()
		a := h.send(method, path, body, header...)
		var sb strings.Builder
		for k, vs := range a.header {
			sb.WriteString(k + ": " + strings.Join(vs, ", ") + "\n")
		}
		sb.Write(a.body)
		answers = append(answers, sb.String())
		return a
	}
	chosen := func(name, value string) string {
		canaries = append(canaries, secretCanary{name: name, value: value, shownAt: -1})
		return value
	}
	shown := func(name, value string) {
		if value == "" {
			t.Fatalf("%s: nothing was returned", name)
		}
		canaries = append(canaries, secretCanary{name: name, value: value, shownAt: len(answers) - 1})
	}
	must := func(what string, a answer, status int) answer {
		t.Helper()
		if a.status != status {
			t.Fatalf("%s: %d %s", what, a.status, a.body)
		}
		return a
	}
	chosen("the administrator's password (SVC_ADMIN_PASSWORD)", adminPW)
	signIn := func(username, pw string) string {
		t.Helper()
		a := must("sign in "+username, do("POST", api+"/sessions", jsonOf(map[string]string{"username": username, "password": pw}), "Authorization", ""), http.StatusOK)
		ck := cookieNamed(a, cookieSession)
		if ck == nil {
			t.Fatal("no cookie")
		}
		shown("session secret of "+username, secretOf(ck.Value))
		return ck.Value
	}

	// The administrator signs in and mints a token from the console.
	adminCookie := signIn("admin", adminPW)
	a := must("mint a token", do("POST", api+"/tokens", `{"name":"console"}`, withCookie(adminCookie)...), http.StatusCreated)
	h.token = decodeAs[tokenAnswer](t, a).Secret
	shown("delegated token secret", secretOf(h.token))

	// Accounts: a chosen password, a generated one.
	alicePW := chosen("alice's chosen password", "canary-pw-alice-3c5e7b")
	a = must("create alice", do("POST", api+"/users", jsonOf(map[string]string{"username": "alice", "password": alicePW})), http.StatusCreated)
	alice := decodeAs[userAnswer](t, a).User.ID
	a = must("create bob", do("POST", api+"/users", `{"username":"bob"}`), http.StatusCreated)
	bob := decodeAs[userAnswer](t, a)
	shown("bob's generated password", bob.Password)
	a = must("generate", do("POST", api+"/passwords/generate", ""), http.StatusOK)
	shown("a generated password", decodeAs[passwordDTO](t, a).Password)
	a = must("mint a service token", do("POST", api+"/tokens/service", `{"name":"ci"}`), http.StatusCreated)
	service := decodeAs[tokenAnswer](t, a)
	shown("service token secret", secretOf(service.Secret))

	// alice signs in, changes her password; a wrong password is tried.
	aliceCookie := signIn("alice", alicePW)
	aliceNext := chosen("alice's changed password", "canary-chg-alice-9d2f4e")
	must("alice changes her password", do("POST", api+"/me/password", jsonOf(map[string]string{"current_password": alicePW, "new_password": aliceNext}), withCookie(aliceCookie)...), http.StatusNoContent)
	wrong := chosen("a mistyped password", "canary-wrong-pw-1a8b6c")
	must("wrong password", do("POST", api+"/sessions", jsonOf(map[string]string{"username": "alice", "password": wrong}), "Authorization", ""), http.StatusUnauthorized)
	must("unknown user", do("POST", api+"/sessions", jsonOf(map[string]string{"username": "mallory", "password": wrong}), "Authorization", ""), http.StatusUnauthorized)
	weak := chosen("a password refused as invalid", "canary\u0007x")
	do("POST", api+"/users", jsonOf(map[string]string{"username": "weak", "password": weak}))
	badBody := chosen("a password in a malformed body", "canary-bad-body-77e1f0")
	do("POST", api+"/users", `{"username":5,"password":"`+badBody+`"}`)
	do("POST", api+"/users", `{"password":"`+badBody+`"`)

	// bob: reset by the administrator, then changed by bob.
	bobReset := chosen("bob's reset password", "canary-reset-bob-5b7a2d")
	must("reset bob", do("POST", api+"/users/"+bob.User.ID+"/password", jsonOf(map[string]string{"password": bobReset})), http.StatusNoContent)
	bobCookie := signIn("bob", bobReset)
	bobNext := chosen("bob's changed password", "canary-chg-bob-0e4c8a")
	must("bob changes his password", do("POST", api+"/me/password", jsonOf(map[string]string{"current_password": bobReset, "new_password": bobNext}), withCookie(bobCookie)...), http.StatusNoContent)

	// An app's secret, set, rotated and read once; adapter credentials set
	// and replaced; the keyring rotated, re-sealing all of them.
	app := h.app(t, "Canary App")
	secretPath := api + "/apps/" + app + "/secrets/API_KEY"
	must("set a secret", do("PUT", secretPath, jsonOf(map[string]string{"value": chosen("a secret's first value", "canary-secret-first-4d7e1b")})), http.StatusOK)
	rotated := "canary-secret-rotated-8a3f2c"
	must("rotate the secret", do("PUT", secretPath, jsonOf(map[string]string{"value": rotated})), http.StatusOK)
	must("read the secret", do("GET", secretPath+"/value", ""), http.StatusOK)
	shown("the secret's value, from the value endpoint", rotated)
	must("refuse a bad secret", do("PUT", api+"/apps/"+app+"/secrets/BAD-KEY", jsonOf(map[string]string{"value": chosen("a refused secret", "canary-secret-refused-0c4d")})), http.StatusBadRequest)
	must("configure vault", do("POST", api+"/adapters", jsonOf(map[string]any{"category": "secrets", "kind": "vault",
		"config": map[string]string{"address": "http://127.0.0.1:1"}, "credentials": map[string]string{"token": chosen("a vault token", "hvs.canary-vault-token-2e9d")}})), http.StatusCreated)
	must("switch vault to approle", do("POST", api+"/adapters", jsonOf(map[string]any{"category": "secrets", "kind": "vault",
		"credentials": map[string]any{"token": nil, "role_id": chosen("an approle role id", "canary-role-id-71f3"), "secret_id": chosen("an approle secret id", "canary-secret-id-6b1a")}})), http.StatusOK)
	must("refuse a credential in config", do("POST", api+"/adapters", jsonOf(map[string]any{"category": "secrets", "kind": "vault",
		"config": map[string]string{"token": chosen("a credential sent as a setting", "canary-misplaced-token-3a0e")}})), http.StatusBadRequest)

	// The app shared with everyone behind a passcode: set, changed, guessed
	// wrong and entered (the admission cookie is shown once).
	a = must("share with everyone", do("POST", api+"/apps/"+app+"/grants", jsonOf(map[string]string{"plane": "data", "principal_kind": "anonymous",
		"passcode": chosen("a passcode", "canary-passcode-4f2a9c")})), http.StatusCreated)
	everyone := decodeAs[grantAnswer](t, a).Grant.ID
	passcode := chosen("a changed passcode", "canary-passcode-changed-8e1d")
	must("change the passcode", do("PATCH", api+"/apps/"+app+"/grants/"+everyone, jsonOf(map[string]string{"passcode": passcode})), http.StatusOK)
	must("a wrong passcode", do("POST", api+"/apps/"+app+"/passcode", jsonOf(map[string]string{"passcode": chosen("a mistyped passcode", "canary-passcode-wrong-3b7f")}), "Authorization", ""), http.StatusForbidden)
	a = must("enter the passcode", do("POST", api+"/apps/"+app+"/passcode", jsonOf(map[string]string{"passcode": passcode}), "Authorization", ""), http.StatusNoContent)
	if ck := cookieNamed(a, edge.PasscodeCookie(app)); ck != nil {
		shown("the admission cookie", ck.Value)
	} else {
		t.Fatal("no admission cookie")
	}
	must("rotate the keyring", do("POST", api+"/keyring/rotate", ""), http.StatusOK)

	// Use every credential, read everything an administrator can read,
	// then end sessions and revoke tokens.
	for _, hdr := range [][]string{nil, withCookie(adminCookie), withCookie(aliceCookie), withCookie(bobCookie), {"Authorization", "Bearer " + service.Secret}} {
		do("GET", api+"/me", "", hdr...)
		do("GET", api+"/tokens", "", hdr...)
	}
	for _, path := range []string{"/users", "/users/" + alice, "/users/" + bob.User.ID, "/tokens/service", "/groups", "/roles?scope=all",
		"/policy", "/config", "/audit?limit=500", "/reference", "/openapi.json", "/operator/raft?digest=true",
		"/adapters", "/adapters/kinds", "/keyring", "/apps", "/apps/" + app, "/apps/" + app + "/secrets",
		"/apps/" + app + "/grants", "/apps/" + app + "/passcode", "/apps/" + app + "/principals?q=a", "/users/" + alice + "/apps"} {
		must("GET "+path, do("GET", api+path, ""), http.StatusOK)
	}
	must("sign bob out", do("DELETE", api+"/sessions", "", withCookie(bobCookie)...), http.StatusNoContent)
	do("GET", api+"/me", "", withCookie(bobCookie)...)
	must("revoke the service token", do("DELETE", api+"/tokens/"+service.Token.ID, ""), http.StatusNoContent)
	do("GET", api+"/me", "", "Authorization", "Bearer "+service.Secret)
	do("GET", "/metrics", "")

	find := func(where, text string, c secretCanary) {
		t.Helper()
		for _, form := range []string{c.value, base64.StdEncoding.EncodeToString([]byte(c.value)), base64.RawURLEncoding.EncodeToString([]byte(c.value))} {
			if strings.Contains(text, form) {
				t.Errorf("%s contains %s", where, c.name)
				return
			}
		}
	}
	for _, c := range canaries {
		// The scan finds a secret where it was shown: it would find a leak.
		if c.shownAt >= 0 && !strings.Contains(answers[c.shownAt], c.value) {
			t.Errorf("%s is not in the answer that returned it: the scan is broken", c.name)
		}
		for i, ans := range answers {
			if i > c.shownAt {
				find(fmt.Sprintf("answer %d", i), ans, c)
			}
		}
	}
	entries, err := json.Marshal(h.auditEntries(t))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := json.Marshal(h.allEvents(t))
	if err != nil {
		t.Fatal(err)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, `"level":"DEBUG"`) {
		t.Error("the log has no debug line: the check would not cover debug logging")
	}
	for _, c := range canaries {
		find("the audit log", string(entries), c)
		find("the events", string(evs), c)
		find("the log", logs, c)
	}

	// The raw files of the store, with a snapshot taken.
	if err := h.store.Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	files := 0
	err = filepath.WalkDir(h.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, c := range canaries {
			find(path, string(b), c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	snaps, _ := filepath.Glob(filepath.Join(h.dir, "snapshots", "*", "state.bin"))
	if files < 2 || len(snaps) == 0 {
		t.Errorf("read %d files, %d snapshots: the store was not where the test looked", files, len(snaps))
	}
	t.Logf("%d secrets, %d answers, %d store files, %d bytes of log", len(canaries), len(answers), files, len(logs))
}
