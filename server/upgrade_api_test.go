package server

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/upgrade"
)

// fakeBinary is an executable that answers "version" as an svc binary
// of version v does (a shell script: the server runs what it is sent).
func fakeBinary(v string) string { return "#!/bin/sh\necho " + v + "\n" }

// TestUpgradeEndpoints: POST /api/v1/upgrade runs the uploaded binary's
// "version", refuses what does not run or is the running version (nothing
// left behind), and hands an accepted one, written next to the executable,
// to the process once answered; GET shows it.
func TestUpgradeEndpoints(t *testing.T) {
	h := newHarness(t)
	none := decodeAs[upgrade.Current](t, h.send(http.MethodGet, api+"/upgrade", ""))
	if none.Upgrade != nil || none.Version != "test" || none.SignatureRequired {
		t.Errorf("GET /upgrade before any: %+v; want upgrade null, version test, no signature required", none)
	}

	e := wantError(t, "not a binary", h.send(http.MethodPost, api+"/upgrade", "just text"), http.StatusBadRequest, errcode.ValidInvalid)
	if e.Remedy == "" {
		t.Error("the refusal of a file that does not run has no remedy")
	}
	wantError(t, "empty", h.send(http.MethodPost, api+"/upgrade", ""), http.StatusBadRequest, errcode.ValidInvalid)
	wantError(t, "the running version", h.send(http.MethodPost, api+"/upgrade", fakeBinary("test")), http.StatusConflict, errcode.StateInvalid)
	wantError(t, "no version", h.send(http.MethodPost, api+"/upgrade", "#!/bin/sh\nexit 0\n"), http.StatusBadRequest, errcode.ValidInvalid)
	if left, _ := filepath.Glob(filepath.Join(h.dir, "bin", ".svc.upgrade-*")); len(left) > 0 {
		t.Errorf("refused uploads left %v behind", left)
	}
	select {
	case b := <-h.begun:
		t.Fatalf("a refused upload began an upgrade: %+v", b)
	default:
	}

	a := h.send(http.MethodPost, api+"/upgrade", fakeBinary("2.0.0-test"))
	got := decodeAs[upgradeAnswer](t, a)
	if a.status != http.StatusAccepted || got.Upgrade.State != upgrade.StateRestarting || got.Upgrade.From != "test" || got.Upgrade.To != "2.0.0-test" ||
		len(got.Upgrade.Nodes) != 1 || got.Upgrade.Nodes[0].ID != "n1" {
		t.Fatalf("POST /upgrade: %d %s", a.status, a.body)
	}
	b := <-h.begun
	if b.m.ID != got.Upgrade.ID || filepath.Dir(b.path) != filepath.Join(h.dir, "bin") {
		t.Errorf("began %+v at %s; want upgrade %s next to the executable", b.m, b.path, got.Upgrade.ID)
	}
	if body, err := os.ReadFile(b.path); err != nil || string(body) != fakeBinary("2.0.0-test") {
		t.Errorf("the binary handed on: %q, %v", body, err)
	}
	wantError(t, "a second while one is under way", h.send(http.MethodPost, api+"/upgrade", fakeBinary("2.0.1-test")), http.StatusConflict, errcode.StateInvalid)
	cur := decodeAs[upgrade.Current](t, h.send(http.MethodGet, api+"/upgrade", ""))
	if cur.Upgrade == nil || cur.Upgrade.ID != got.Upgrade.ID || cur.Upgrade.State != upgrade.StateRestarting {
		t.Errorf("GET /upgrade after: %+v", cur.Upgrade)
	}
}

// TestUpgradeSignature: with upgrade.signing_public_key set, a missing or
// wrong signature is refused before the binary is run; the right one is
// accepted.
func TestUpgradeSignature(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, harnessOptions{adminPassword: adminPassword, env: []string{"SVC_UPGRADE_SIGNING_PUBLIC_KEY=" + base64.StdEncoding.EncodeToString(pub)}})
	bin := fakeBinary("3.0.0-signed")
	digest := sha256.Sum256([]byte(bin))
	e := wantError(t, "unsigned", h.send(http.MethodPost, api+"/upgrade", bin), http.StatusBadRequest, errcode.ValidInvalid)
	if e.Details["signature"] != "missing" {
		t.Errorf("unsigned: details %v", e.Details)
	}
	wrong := base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte("something else")))
	e = wantError(t, "wrong", h.send(http.MethodPost, api+"/upgrade?signature="+url.QueryEscape(wrong), bin), http.StatusBadRequest, errcode.ValidInvalid)
	if e.Details["signature"] != "invalid" {
		t.Errorf("wrong signature: details %v", e.Details)
	}
	right := upgrade.Sign(priv, digest)
	wantStatus(t, "signed", h.send(http.MethodPost, api+"/upgrade?signature="+url.QueryEscape(right), bin), http.StatusAccepted)
}
