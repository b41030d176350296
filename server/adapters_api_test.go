package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/errcode"
)

func adapterByID(t *testing.T, l adapters.List, id string) adapters.View {
	t.Helper()
	for _, v := range l.Items {
		if v.AdapterID == id {
			return v
		}
	}
	t.Fatalf("no adapter %s in %+v", id, l.Items)
	return adapters.View{}
}

func TestAdaptersListsTheEmbeddedDefaults(t *testing.T) {
	h := newHarness(t)
	l := decodeAs[adapters.List](t, h.send("GET", api+"/adapters", ""))
	if l.StartedAt.IsZero() || l.RestartNeeded {
		t.Fatalf("started_at %v, restart_needed %v", l.StartedAt, l.RestartNeeded)
	}
	for id, cat := range map[string]string{"adp_builtin_runtime": "runtime", "adp_builtin_routes": "routes",
		"adp_builtin_secrets": "secrets", "adp_builtin_identity": "identity"} {
		v := adapterByID(t, l, id)
		if v.Category != cat || !v.Builtin || !v.Primary || !v.Loaded || v.PendingRestart || v.Capabilities == nil {
			t.Errorf("%s = %+v", id, v)
		}
	}
	if caps := adapterByID(t, l, "adp_builtin_runtime").Capabilities; caps["isolation"] == nil {
		t.Errorf("the runtime declares no isolation: %v", caps)
	}

	k := decodeAs[kindList](t, h.send("GET", api+"/adapters/kinds", ""))
	for _, c := range []string{"runtime", "routes", "secrets", "identity", "slots", "notification", "backup"} {
		if !slices.Contains(k.Categories, c) {
			t.Errorf("category %s missing from %v", c, k.Categories)
		}
	}
	var vault *adapters.Kind
	for i := range k.Items {
		if k.Items[i].Category == "secrets" && k.Items[i].Name == "vault" {
			vault = &k.Items[i]
		}
	}
	if vault == nil {
		t.Fatal("no vault kind")
	}
	creds := map[string]bool{}
	for _, s := range vault.Settings {
		creds[s.Name] = s.Credential
		if s.Name == "address" && (!s.Required || s.Example == "") {
			t.Errorf("address = %+v", s)
		}
		if s.Name == "mount" && s.Default != "secret" {
			t.Errorf("mount = %+v", s)
		}
	}
	if !creds["token"] || !creds["secret_id"] || creds["address"] {
		t.Errorf("credential flags = %v", creds)
	}
}

func TestConfiguringAnAdapterWaitsForARestart(t *testing.T) {
	h := newHarness(t)
	const token = "hvs.canary-vault-token-51c2"
	before := h.auditEntries(t)
	a := h.send("POST", api+"/adapters", jsonOf(map[string]any{
		"category": "secrets", "kind": "vault",
		"config":      map[string]any{"address": "http://127.0.0.1:1", "mount": "kv", "tls_skip_verify": false},
		"credentials": map[string]string{"token": token},
	}))
	wantStatus(t, "configure vault", a, http.StatusCreated)
	if strings.Contains(string(a.body), token) {
		t.Fatalf("the answer carries the token: %s", a.body)
	}
	v := decodeAs[adapterAnswer](t, a).Adapter
	if !strings.HasPrefix(v.AdapterID, "adp_") || !v.PendingRestart || v.Loaded || !slices.Equal(v.CredentialsSet, []string{"token"}) ||
		v.Config["address"] != "http://127.0.0.1:1" || v.Config["mount"] != "kv" || v.Config["prefix"] != "svc" || v.Config["tls_skip_verify"] != "false" {
		t.Fatalf("configured = %s", a.body)
	}
	got := newEntries(before, h.auditEntries(t))
	if len(got) != 1 || got[0].Action != "adapter.configure" || got[0].Details["credentials_changed"] != true {
		t.Fatalf("audit = %+v", got)
	}
	var configured int
	for _, e := range h.allEvents(t) {
		if e.Type == "adapter.configured" {
			configured++
			if e.Data["category"] != "secrets" || e.Data["kind"] != "vault" || e.Data["credentials_changed"] != true {
				t.Errorf("adapter.configured = %+v", e.Data)
			}
		}
	}
	if configured != 1 {
		t.Fatalf("%d adapter.configured events", configured)
	}

	l := decodeAs[adapters.List](t, h.send("GET", api+"/adapters", ""))
	if !l.RestartNeeded || !adapterByID(t, l, v.AdapterID).PendingRestart || !adapterByID(t, l, "adp_builtin_secrets").Primary {
		t.Fatalf("before restart: %+v", l)
	}

	// Configuring vault again without an ID changes the same adapter; a
	// change of settings only keeps the credential and says so.
	a = h.send("POST", api+"/adapters", `{"category":"secrets","kind":"vault","config":{"address":"https://vault.internal:8200"}}`)
	wantStatus(t, "reconfigure", a, http.StatusOK)
	again := decodeAs[adapterAnswer](t, a).Adapter
	if again.AdapterID != v.AdapterID || again.Revision != 2 || !slices.Equal(again.CredentialsSet, []string{"token"}) {
		t.Fatalf("reconfigured = %s", a.body)
	}
	last := h.allEvents(t)
	if e := last[len(last)-1]; e.Type != "adapter.configured" || e.Data["credentials_changed"] != false {
		t.Fatalf("last event = %+v", e)
	}

	// After a restart the new adapter is loaded and primary; the vault it
	// names is down, so it is not healthy, and secrets answer
	// ADAPTER_UNAVAILABLE instead of going elsewhere quietly.
	h.restart()
	l = decodeAs[adapters.List](t, h.send("GET", api+"/adapters", ""))
	vault := adapterByID(t, l, v.AdapterID)
	if l.RestartNeeded || vault.PendingRestart || !vault.Primary || adapterByID(t, l, "adp_builtin_secrets").Primary {
		t.Fatalf("after restart: %+v", l)
	}
	app := h.app(t, "Vault App")
	wantError(t, "a secret while vault is down", h.send("PUT", api+"/apps/"+app+"/secrets/K", `{"value":"v"}`), http.StatusBadGateway, errcode.AdapterUnavailable)
}

func TestAdapterConfigurationIsValidated(t *testing.T) {
	h := newHarness(t)
	cases := []struct{ name, body, field string }{
		{"unknown category", `{"category":"toaster","kind":"x"}`, "category"},
		{"unknown kind", `{"category":"secrets","kind":"keepass"}`, "kind"},
		{"unknown setting", `{"category":"secrets","kind":"vault","config":{"address":"http://v:8200","colour":"red"},"credentials":{"token":"t"}}`, "config.colour"},
		{"credential in config", `{"category":"secrets","kind":"vault","config":{"address":"http://v:8200","token":"t"}}`, "config.token"},
		{"setting in credentials", `{"category":"secrets","kind":"vault","config":{"address":"http://v:8200"},"credentials":{"address":"x"}}`, "credentials.address"},
		{"missing required setting", `{"category":"secrets","kind":"vault","credentials":{"token":"t"}}`, "address"},
		{"no credentials", `{"category":"secrets","kind":"vault","config":{"address":"http://v:8200"}}`, "credentials"},
		{"both ways to log in", `{"category":"secrets","kind":"vault","config":{"address":"http://v:8200"},"credentials":{"token":"t","role_id":"r","secret_id":"s"}}`, "credentials"},
		{"address not a URL", `{"category":"secrets","kind":"vault","config":{"address":"vault:8200"},"credentials":{"token":"t"}}`, "config.address"},
		{"object setting", `{"category":"secrets","kind":"vault","config":{"address":{"a":1}},"credentials":{"token":"t"}}`, "config.address"},
		{"empty credential", `{"category":"secrets","kind":"vault","config":{"address":"http://v:8200"},"credentials":{"token":""}}`, "credentials.token"},
		{"bad boolean", `{"category":"secrets","kind":"vault","config":{"address":"http://v:8200","tls_skip_verify":"maybe"},"credentials":{"token":"t"}}`, "config.tls_skip_verify"},
		{"huge setting", jsonOf(map[string]any{"category": "secrets", "kind": "vault", "config": map[string]string{"address": "http://v:8200/" + strings.Repeat("a", 17<<10)}, "credentials": map[string]string{"token": "t"}}), "config.address"},
	}
	for _, c := range cases {
		e := wantError(t, c.name, h.send("POST", api+"/adapters", c.body), http.StatusBadRequest, errcode.ValidInvalid)
		if e.Details["field"] != c.field {
			t.Errorf("%s: details.field = %v, want %s (%s)", c.name, e.Details["field"], c.field, e.Message)
		}
	}
	wantError(t, "unknown adapter id", h.send("POST", api+"/adapters", `{"adapter_id":"adp_01JZZZZZZZZZZZZZZZZZZZZZZZ","category":"runtime","kind":"process"}`), http.StatusNotFound, errcode.NotFound)
	if l := decodeAs[adapters.List](t, h.send("GET", api+"/adapters", "")); l.RestartNeeded {
		t.Fatalf("refused configurations changed something: %+v", l)
	}
}
