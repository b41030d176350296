package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/keyring"
	"github.com/svchost/svc/internal/secrets"
)

type secretListDTO struct {
	Items []secrets.View `json:"items"`
}

func TestSecretsAPI(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Secrets App")
	base := api + "/apps/" + app + "/secrets"

	a := h.send("PUT", base+"/API_KEY", `{"value":"first-value"}`)
	wantStatus(t, "set", a, http.StatusOK)
	v1 := decodeAs[secretAnswer](t, a).Secret
	if v1.Key != "API_KEY" || v1.Origin != "adp_builtin_secrets" || v1.Version != 1 {
		t.Fatalf("set answered %s", a.body)
	}
	if strings.Contains(string(a.body), "first-value") {
		t.Fatalf("the set answer carries the value: %s", a.body)
	}
	v2 := decodeAs[secretAnswer](t, h.send("PUT", base+"/API_KEY", `{"value":"second-value"}`)).Secret
	if v2.Version != 2 {
		t.Fatalf("a rotation is version %d, want 2", v2.Version)
	}
	h.send("PUT", base+"/EMPTY", `{"value":""}`)

	a = h.send("GET", base, "")
	wantStatus(t, "list", a, http.StatusOK)
	if strings.Contains(string(a.body), "second-value") || strings.Contains(string(a.body), "sealed") {
		t.Fatalf("the list carries a value: %s", a.body)
	}
	list := decodeAs[secretListDTO](t, a).Items
	if len(list) != 2 || list[0].Key != "API_KEY" || list[0].Version != 2 || list[1].Key != "EMPTY" {
		t.Fatalf("list = %s", a.body)
	}

	before := h.auditEntries(t)
	a = h.send("GET", base+"/API_KEY/value", "")
	wantStatus(t, "value", a, http.StatusOK)
	if got := decodeAs[secretValue](t, a); got.Key != "API_KEY" || got.Value != "second-value" {
		t.Fatalf("value = %s", a.body)
	}
	if a.header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", a.header.Get("Cache-Control"))
	}
	got := newEntries(before, h.auditEntries(t))
	if len(got) != 1 || got[0].Action != "secret.read" || *got[0].TargetID != "API_KEY" {
		t.Fatalf("reading a value wrote %v", actionsOf(got))
	}
	h.send("GET", base+"/API_KEY/value", "")
	if n := len(newEntries(before, h.auditEntries(t))); n != 2 {
		t.Fatalf("two reads wrote %d entries", n)
	}

	wantStatus(t, "delete", h.send("DELETE", base+"/EMPTY", ""), http.StatusNoContent)
	wantError(t, "delete again", h.send("DELETE", base+"/EMPTY", ""), http.StatusNotFound, errcode.NotFound)
	wantError(t, "value of a deleted secret", h.send("GET", base+"/EMPTY/value", ""), http.StatusNotFound, errcode.NotFound)

	// The app's own event feed says which key changed, never the value.
	changed := 0
	for _, e := range h.allEvents(t) {
		if e.Type == "app.secret_changed" {
			changed++
			if e.App == nil || e.App.ID != app || e.Data["key"] == nil {
				t.Errorf("app.secret_changed = %+v", e)
			}
		}
	}
	if changed != 4 {
		t.Errorf("%d app.secret_changed events, want 4 (three sets, one delete)", changed)
	}
}

func TestSecretsAPIRefusesBadInput(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Bad Secrets")
	base := api + "/apps/" + app + "/secrets"
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     errcode.Code
	}{
		{"no value", "PUT", base + "/K", `{}`, 400, errcode.ValidInvalid},
		{"null value", "PUT", base + "/K", `{"value":null}`, 400, errcode.ValidInvalid},
		{"number value", "PUT", base + "/K", `{"value":5}`, 400, errcode.ValidInvalid},
		{"unknown field", "PUT", base + "/K", `{"value":"v","extra":1}`, 400, errcode.ValidInvalid},
		{"malformed body", "PUT", base + "/K", `{"value":`, 400, errcode.ValidInvalid},
		{"key with a dash", "PUT", base + "/A-B", `{"value":"v"}`, 400, errcode.ValidInvalid},
		{"key starting with a digit", "PUT", base + "/1A", `{"value":"v"}`, 400, errcode.ValidInvalid},
		{"encoded slash in the key", "PUT", base + "/A%2FB", `{"value":"v"}`, 400, errcode.ValidInvalid},
		{"traversal in the key", "PUT", base + "/..%2F..%2Fetc", `{"value":"v"}`, 400, errcode.ValidInvalid},
		{"key too long", "PUT", base + "/" + strings.Repeat("K", 129), `{"value":"v"}`, 400, errcode.ValidInvalid},
		{"value too large", "PUT", base + "/K", jsonOf(map[string]string{"value": strings.Repeat("x", secrets.MaxValueBytes+1)}), 400, errcode.ValidInvalid},
		{"NUL in the value", "PUT", base + "/K", `{"value":"a\u0000b"}`, 400, errcode.ValidInvalid},
		{"unknown app", "PUT", api + "/apps/app_01JZZZZZZZZZZZZZZZZZZZZZZZ/secrets/K", `{"value":"v"}`, 404, errcode.NotFound},
		{"list of an unknown app", "GET", api + "/apps/app_01JZZZZZZZZZZZZZZZZZZZZZZZ/secrets", ``, 404, errcode.NotFound},
		{"unknown secret", "GET", base + "/NOPE/value", ``, 404, errcode.NotFound},
	}
	for _, c := range cases {
		wantError(t, c.name, h.send(c.method, c.path, c.body), c.status, c.code)
	}
	if list := decodeAs[secretListDTO](t, h.send("GET", base, "")).Items; len(list) != 0 {
		t.Fatalf("refused writes left %+v", list)
	}
}

// Reading a value needs app.secrets.read; writing needs app.secrets.write;
// the developer role writes but does not read.
func TestSecretsVerbsByRole(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Roles")
	base := api + "/apps/" + app + "/secrets"
	h.putSecret(t, app, "TOKEN", "role-value")
	dev := h.account(t, "dev", nil, true)
	h.grantApp(t, app, authz.KindUser, dev.userID, authz.RoleDeveloper)
	viewer := h.account(t, "viewer", nil, true)
	h.grantApp(t, app, authz.KindUser, viewer.userID, authz.RoleViewer)

	wantStatus(t, "developer sets", h.send("PUT", base+"/TOKEN", `{"value":"dev-value"}`, dev.bearer()...), http.StatusOK)
	wantError(t, "developer reads", h.send("GET", base+"/TOKEN/value", "", dev.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
	wantStatus(t, "viewer lists", h.send("GET", base, "", viewer.bearer()...), http.StatusOK)
	wantError(t, "viewer sets", h.send("PUT", base+"/TOKEN", `{"value":"x"}`, viewer.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
	wantError(t, "viewer deletes", h.send("DELETE", base+"/TOKEN", "", viewer.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
	stranger := h.account(t, "stranger", nil, true)
	wantError(t, "stranger lists", h.send("GET", base, "", stranger.bearer()...), http.StatusNotFound, errcode.NotFound)
}

// Rotating the keyring re-seals every value under the new data key; values
// still read back, after a restart too, and the store holds no value in the
// clear.
func TestKeyringRotationResealsValues(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Rotate")
	for _, k := range []string{"ONE", "TWO", "THREE"} {
		h.putSecret(t, app, k, "value-of-"+k)
	}
	keyOf := func(k string) string {
		row, _, ok := secrets.Secrets.Get(h.store.Read(), secrets.RowID(app, k))
		if !ok {
			t.Fatalf("no row for %s", k)
		}
		return keyring.KeyID(row.Sealed)
	}
	old := keyOf("ONE")
	a := h.send("POST", api+"/keyring/rotate", "")
	wantStatus(t, "rotate", a, http.StatusOK)
	rot := decodeAs[keyring.Rotation](t, a)
	if rot.Resealed != 3 || rot.Key.ID == old || !rot.Key.Current {
		t.Fatalf("rotation = %s (old key %s)", a.body, old)
	}
	for _, k := range []string{"ONE", "TWO", "THREE"} {
		if keyOf(k) != rot.Key.ID {
			t.Errorf("%s is sealed under %s, not the new key %s", k, keyOf(k), rot.Key.ID)
		}
	}
	info := decodeAs[keyringDTO](t, h.send("GET", api+"/keyring", ""))
	if len(info.Keys) != 2 || info.Keys[0].ID != rot.Key.ID || !info.Keys[0].Current || info.Keys[1].Current {
		t.Fatalf("keyring = %+v", info)
	}
	h.restart()
	for _, k := range []string{"ONE", "TWO", "THREE"} {
		a := h.send("GET", api+"/apps/"+app+"/secrets/"+k+"/value", "")
		if v := decodeAs[secretValue](t, a); v.Value != "value-of-"+k {
			t.Fatalf("after rotation and restart %s = %s", k, a.body)
		}
	}
	// A sealed value moved to another secret's row does not open.
	r := h.store.Read()
	one, _, _ := secrets.Secrets.Get(r, secrets.RowID(app, "ONE"))
	two, meta, _ := secrets.Secrets.Get(r, secrets.RowID(app, "TWO"))
	two.Sealed = one.Sealed
	if _, err := h.store.Apply(t.Context(), secrets.Secrets.PutIf(&two, meta.ModifyIndex)); err != nil {
		t.Fatal(err)
	}
	wantError(t, "a swapped ciphertext", h.send("GET", api+"/apps/"+app+"/secrets/TWO/value", ""), http.StatusBadGateway, errcode.AdapterFailed)
}
