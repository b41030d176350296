package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/detection"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
)

// nodeApp is the tar.gz of a small Node app that listens on 3000.
func nodeApp(t testing.TB) []byte {
	return tarGz(t,
		tarFile{name: "package.json", body: `{"name":"hello","scripts":{"start":"node server.js"},"dependencies":{"express":"^4.19.0"}}`},
		tarFile{name: "server.js", body: "const app = require('express')();\napp.get('/', (q, r) => r.send('hi'));\napp.listen(3000);\n"},
	)
}

// flaskApp asks for a secret: its .env.example names SECRET_KEY.
func flaskApp(t testing.TB) []byte {
	return tarGz(t,
		tarFile{name: "requirements.txt", body: "flask==3.0.0\ngunicorn==22.0.0\n"},
		tarFile{name: "app.py", body: "import os\nfrom flask import Flask\napp = Flask(__name__)\napp.secret_key = os.environ['SECRET_KEY']\n"},
		tarFile{name: ".env.example", body: "SECRET_KEY=\n"},
	)
}

func TestDetectionFromUploadToAcceptedRevision(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Hello")
	base := api + "/apps/" + app
	rec := decodeAs[detection.Record](t, h.send("GET", base+"/detection", ""))
	if rec.Status != detection.StatusPending || rec.Winner != nil {
		t.Fatalf("before any source: %+v", rec)
	}
	wantError(t, "accept before detection", h.send("POST", base+"/detection/accept", `{}`), http.StatusConflict, errcode.StateInvalid)
	wantError(t, "rerun without a source", h.send("POST", base+"/detection/rerun", ""), http.StatusConflict, errcode.StateInvalid)

	wantStatus(t, "upload", h.upload(base+"/source", "application/gzip", nodeApp(t)), http.StatusAccepted)
	rec = decodeAs[detection.Record](t, h.send("GET", base+"/detection", ""))
	if rec.Status != detection.StatusDone || rec.Winner == nil || rec.Winner.Detector != "node" || !strings.HasPrefix(rec.Commit, "sha256:") {
		t.Fatalf("after upload: %+v", rec)
	}
	web := rec.Winner.Proposal.Primary()
	if w := rec.Winner.Proposal.Workloads[web]; w.Run.Port != 3000 {
		t.Fatalf("proposal = %+v", rec.Winner.Proposal)
	}

	diff := decodeAs[spec.DiffResult](t, h.send("GET", base+"/detection/diff", ""))
	if diff.Effect != "rebuild" || len(diff.Changes) == 0 {
		t.Fatalf("diff against nothing pinned = %+v", diff)
	}
	a := h.send("POST", base+"/detection/accept", `{"values":[{"key":"LOG_LEVEL","value":"debug"},{"key":"API_TOKEN","value":"accept-secret-6f2c","secret":true}]}`)
	wantStatus(t, "accept", a, http.StatusCreated)
	if strings.Contains(string(a.body), "accept-secret-6f2c") {
		t.Fatalf("the accepted revision carries the secret value: %s", a.body)
	}
	v := decodeAs[specAnswer](t, a).Spec
	if !v.Pinned || v.Number != 1 || v.Spec.Env["LOG_LEVEL"].Value != "debug" || v.Spec.Env["API_TOKEN"].Secret != "API_TOKEN" {
		t.Fatalf("accepted = %s", a.body)
	}
	if got := decodeAs[secretValue](t, h.send("GET", base+"/secrets/API_TOKEN/value", "")); got.Value != "accept-secret-6f2c" {
		t.Fatalf("the secret value went to %+v", got)
	}
	if got := decodeAs[appAnswer](t, h.send("GET", base, "")).App; got.Pinned == nil || got.Pinned.Revision != 1 {
		t.Fatalf("the app's pin = %+v", got.Pinned)
	}
	// Over a configured app, accept needs confirm; the diff is now none.
	e := wantError(t, "accept again", h.send("POST", base+"/detection/accept", `{}`), http.StatusConflict, errcode.StateInvalid)
	if e.Details["protected"] != "confirm" {
		t.Fatalf("details = %v", e.Details)
	}
	wantStatus(t, "accept with confirm", h.send("POST", base+"/detection/accept", `{"confirm":true}`), http.StatusCreated)
	wantStatus(t, "rerun", h.send("POST", base+"/detection/rerun", ""), http.StatusOK)
}

func TestDetectionQuestionsAndSecretValues(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Flask")
	base := api + "/apps/" + app
	wantStatus(t, "upload", h.upload(base+"/source", "application/gzip", flaskApp(t)), http.StatusAccepted)
	rec := decodeAs[detection.Record](t, h.send("GET", base+"/detection", ""))
	var secretQ string
	for _, q := range rec.Questions {
		if q.Kind == "secret" {
			secretQ = q.Key
		}
	}
	if rec.Winner == nil || rec.Winner.Detector != "python" || secretQ == "" {
		t.Fatalf("detection = %+v", rec)
	}
	wantError(t, "a secret as an answer", h.send("POST", base+"/detection/answers", jsonOf(map[string]any{"answers": map[string]string{secretQ: "nope"}})), http.StatusBadRequest, errcode.ValidInvalid)
	wantError(t, "answers of the wrong type", h.send("POST", base+"/detection/answers", `{"answers":{"port":5}}`), http.StatusBadRequest, errcode.ValidInvalid)

	// A developer may write secrets; a custom role with spec.edit only may
	// accept, but not with a secret value.
	editor := h.account(t, "editor", nil, true)
	h.grantApp(t, app, authz.KindUser, editor.userID, h.role(t, authz.ScopeApp, authz.AppView, authz.AppSpecEdit))
	body := `{"values":[{"key":"SECRET_KEY","value":"flask-secret-0b9e","secret":true}]}`
	e := wantError(t, "a secret value without app.secrets.write", h.send("POST", base+"/detection/accept", body, editor.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
	if e.Details["verb"] != "app.secrets.write" {
		t.Fatalf("details = %v", e.Details)
	}
	if list := decodeAs[secretListDTO](t, h.send("GET", base+"/secrets", "")).Items; len(list) != 0 {
		t.Fatalf("a refused accept wrote secrets: %+v", list)
	}
	dev := h.account(t, "dev", nil, true)
	h.grantApp(t, app, authz.KindUser, dev.userID, authz.RoleDeveloper)
	wantStatus(t, "a developer accepts with the secret", h.send("POST", base+"/detection/accept", body, dev.bearer()...), http.StatusCreated)
	for _, e := range h.auditEntries(t) {
		if strings.Contains(jsonOf(e), "flask-secret-0b9e") {
			t.Fatalf("the audit log carries the secret value: %+v", e)
		}
	}
	bad := []string{
		`{"values":[{"key":"1BAD","value":"x"}]}`,
		`{"values":[{"key":"OK","value":"x","workload":"nope"}]}`,
		`{"values":[{"key":"OK","value":"a\u0000b"}]}`,
		`{"values":"x"}`,
	}
	for _, b := range bad {
		wantError(t, b, h.send("POST", base+"/detection/accept", b), http.StatusBadRequest, errcode.ValidInvalid)
	}
}
