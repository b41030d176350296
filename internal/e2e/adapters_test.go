package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/vaulttest"
)

// TestAVaultAdapterAppliesAfterRestart configures the vault secrets
// adapter against a real Vault dev server on a running svc serve: it waits
// for a restart (pending_restart, restart_needed); after POST /restart it is
// loaded and primary, new secrets go to Vault at the configured prefix, a
// secret written before through the builtin adapter still reads back, and
// nothing shows the token.
func TestAVaultAdapterAppliesAfterRestart(t *testing.T) {
	v := vaulttest.Start(t)
	dir := t.TempDir()
	p := newProc(t, "adapters", []string{
		"SVC_SERVER_ADDR=127.0.0.1:0",
		"SVC_SERVER_WORK_DIR=" + filepath.Join(dir, "work"),
	})
	base := p.startServing()
	p.waitReady(scaled(15 * time.Second))
	signIn(t, scaled(30*time.Second), p)

	do := func(method, path, body string, want int) []byte {
		t.Helper()
		var r reply
		for range 50 { // adapters load once the store has caught up
			r = send(p, method, base+"/api/v1"+path, strings.NewReader(body))
			if r.err == nil && !(r.status == http.StatusBadGateway && strings.Contains(string(r.body), "not loaded yet")) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if r.err != nil || r.status != want {
			t.Fatalf("%s %s: %d %s (%v)", method, path, r.status, r.body, r.err)
		}
		if strings.Contains(string(r.body), v.RootToken) {
			t.Fatalf("%s %s answers with the vault token: %s", method, path, r.body)
		}
		return r.body
	}
	var app struct {
		App struct{ ID string } `json:"app"`
	}
	if err := json.Unmarshal(do("POST", "/apps", `{"name":"Vault e2e"}`, http.StatusCreated), &app); err != nil {
		t.Fatal(err)
	}
	secrets := "/apps/" + app.App.ID + "/secrets/"
	do("PUT", secrets+"BEFORE", `{"value":"kept-in-builtin"}`, http.StatusOK)

	var configured struct {
		Adapter struct {
			AdapterID      string `json:"adapter_id"`
			PendingRestart bool   `json:"pending_restart"`
		} `json:"adapter"`
	}
	body := `{"category":"secrets","kind":"vault","config":{"address":"` + v.Addr + `","prefix":"e2e"},"credentials":{"token":"` + v.RootToken + `"}}`
	if err := json.Unmarshal(do("POST", "/adapters", body, http.StatusCreated), &configured); err != nil {
		t.Fatal(err)
	}
	id := configured.Adapter.AdapterID
	type view struct {
		AdapterID      string `json:"adapter_id"`
		Primary        bool   `json:"primary"`
		Loaded         bool   `json:"loaded"`
		PendingRestart bool   `json:"pending_restart"`
	}
	var list struct {
		Items         []view    `json:"items"`
		RestartNeeded bool      `json:"restart_needed"`
		StartedAt     time.Time `json:"started_at"`
	}
	find := func() view {
		t.Helper()
		list.Items = nil
		if err := json.Unmarshal(do("GET", "/adapters", "", http.StatusOK), &list); err != nil {
			t.Fatal(err)
		}
		for _, it := range list.Items {
			if it.AdapterID == id {
				return it
			}
		}
		t.Fatalf("adapter %s not listed", id)
		return view{}
	}
	if a := find(); !a.PendingRestart || a.Loaded || !list.RestartNeeded {
		t.Fatalf("before restart: %+v restart_needed=%v", a, list.RestartNeeded)
	}
	before := list.StartedAt

	do("POST", "/restart", "", http.StatusAccepted)
	waitRestarted(t, p, before)
	var a view
	for deadline := time.Now().Add(scaled(30 * time.Second)); ; time.Sleep(100 * time.Millisecond) {
		if a = find(); a.Loaded || time.Now().After(deadline) {
			break
		}
	}
	if !a.Loaded || !a.Primary || a.PendingRestart || list.RestartNeeded || !list.StartedAt.After(before) {
		t.Fatalf("after restart: %+v restart_needed=%v started_at %s (before %s)", a, list.RestartNeeded, list.StartedAt, before)
	}

	var set struct {
		Secret struct {
			Origin  string `json:"origin"`
			Version int64  `json:"version"`
		} `json:"secret"`
	}
	if err := json.Unmarshal(do("PUT", secrets+"AFTER", `{"value":"kept-in-vault"}`, http.StatusOK), &set); err != nil {
		t.Fatal(err)
	}
	if set.Secret.Origin != id || set.Secret.Version != 1 {
		t.Fatalf("a secret after the restart: %+v", set.Secret)
	}
	// The value is in Vault, where the configuration says.
	got, err := readKV(v, "secret/data/e2e/apps/"+app.App.ID+"/AFTER")
	if err != nil || got != "kept-in-vault" {
		t.Fatalf("vault holds %q (%v)", got, err)
	}
	for key, want := range map[string]string{"BEFORE": "kept-in-builtin", "AFTER": "kept-in-vault"} {
		var val struct{ Value string }
		if err := json.Unmarshal(do("GET", secrets+key+"/value", "", http.StatusOK), &val); err != nil || val.Value != want {
			t.Fatalf("%s = %q (%v)", key, val.Value, err)
		}
	}
	if strings.Contains(p.logText(), v.RootToken) {
		t.Fatal("the server's log holds the vault token")
	}
}

// readKV reads a KV version 2 value's "value" field over Vault's HTTP API
// with the root token.
func readKV(v *vaulttest.Server, path string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, v.Addr+"/v1/"+path, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("X-Vault-Token", v.RootToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Data map[string]string `json:"data"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", fmt.Errorf("status %d: %w", resp.StatusCode, err)
	}
	return out.Data.Data["value"], nil
}
