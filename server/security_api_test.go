package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/plan"
	"github.com/svchost/svc/internal/scan"
	"github.com/svchost/svc/internal/security"
)

// plantedToken is a GitHub token shape of random characters, made at run
// time so that no secret sits in this file.
func plantedToken(t testing.TB) string {
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 36)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alnum))))
		if err != nil {
			t.Fatal(err)
		}
		b[i] = alnum[n.Int64()]
	}
	return "gh" + "p_" + string(b)
}

// leakyApp is an app whose source holds a committed GitHub token in
// config.js line 1, with the static site spec pinned.
func (h *harness) leakyApp(t testing.TB, name, token string) string {
	t.Helper()
	app := h.app(t, name)
	src := tarGz(t, tarFile{name: "index.html", body: "<h1>hello</h1>\n"}, tarFile{name: "config.js", body: "const github = '" + token + "';\n"})
	if a := h.upload(api+"/apps/"+app+"/source", "application/gzip", src); a.status != http.StatusAccepted {
		t.Fatalf("upload: %d %s", a.status, a.body)
	}
	h.pinSpec(t, app, h.writeSpec(t, app, siteSpec("", 0)))
	return app
}

func (h *harness) security(t testing.TB, app string) security.View {
	t.Helper()
	a := h.send("GET", api+"/apps/"+app+"/security", "")
	wantStatus(t, "GET security", a, http.StatusOK)
	return decodeAs[securityAnswer](t, a).Security
}

// scanned asks for a scan (202, scanning) and waits for it to end.
func (h *harness) scanned(t testing.TB, app string) security.View {
	t.Helper()
	a := h.send("POST", api+"/apps/"+app+"/security/scan", "")
	wantStatus(t, "POST security/scan", a, http.StatusAccepted)
	if v := decodeAs[securityAnswer](t, a).Security; v.State != security.Scanning {
		t.Fatalf("answer state %q, want scanning", v.State)
	}
	var v security.View
	waitFor(t, "the scan of "+app, func() bool { v = h.security(t, app); return v.State != security.Scanning })
	return v
}

func (h *harness) setPolicy(t testing.TB, p map[string]any) {
	t.Helper()
	wantStatus(t, "PUT policy", h.send("PUT", api+"/policy", jsonOf(map[string]any{"policy": p})), http.StatusOK)
}

func (h *harness) plan(t testing.TB, app string) plan.Result {
	t.Helper()
	return decodeAs[plan.Result](t, h.send("POST", api+"/apps/"+app+"/plan", `{}`))
}

func refusalCodes(r plan.Result) []errcode.Code {
	var out []errcode.Code
	for _, e := range r.Refusals {
		out = append(out, e.Code)
	}
	return out
}

// TestSecurityAPI: before any scan the result is never_scanned in
// API.md's exact shape; a requested scan answers 202 scanning, runs in the
// background over the uploaded checkout and ends done with the planted
// token found (high, fixable, at its file and line, the value nowhere:
// not in the answer, the events or the audit log), the score the formula
// gives, the pinned revision's spec ID, and security.scanned with the
// counts; the request is audited.
func TestSecurityAPI(t *testing.T) {
	h := newHarness(t)
	token := plantedToken(t)
	app := h.leakyApp(t, "leaky", token)

	raw := h.send("GET", api+"/apps/"+app+"/security", "")
	wantStatus(t, "GET security", raw, http.StatusOK)
	var shape map[string]map[string]any
	if err := json.Unmarshal(raw.body, &shape); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range shape["security"] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// API.md's keys, and reason: why a failed scan failed (null otherwise).
	if want := []string{"basis", "counts", "findings", "reason", "scan" + "ned_at", "score", "spec_id", "state"}; !slices.Equal(keys, want) || shape["security"]["reason"] != nil {
		t.Fatalf("keys %v (reason %v), want %v (API.md, and reason null)", keys, shape["security"]["reason"], want)
	}
	if v := h.security(t, app); v.State != security.NeverScanned || v.Score != nil || v.ScannedAt != nil || v.SpecID != nil || len(v.Findings) != 0 {
		t.Fatalf("before a scan: %+v", v)
	}

	v := h.scanned(t, app)
	if v.State != security.Done || v.Score == nil || v.ScannedAt == nil || v.SpecID == nil {
		t.Fatalf("after the scan: %+v", v)
	}
	var found *scan.Finding
	for i, f := range v.Findings {
		if f.ID == "secret:github-token:config.js:1" {
			found = &v.Findings[i]
		}
	}
	if found == nil || found.Severity != scan.High || !found.Fixable || found.Path == nil || *found.Path != "config.js" {
		t.Fatalf("the planted token is not found as expected: %+v", v.Findings)
	}
	if *v.Score != scan.Score(v.Findings, false) || *v.Score > 80 || v.Counts.High < 1 {
		t.Fatalf("score %d, counts %+v for findings %+v", *v.Score, v.Counts, v.Findings)
	}
	pinned := h.getApp(t, app).Pinned
	if pinned == nil || *v.SpecID != pinned.SpecID {
		t.Fatalf("spec_id %s, pinned %+v", *v.SpecID, pinned)
	}
	if !slices.ContainsFunc(v.Basis, func(b scan.Basis) bool {
		return b.Scanner == scan.ScannerDependencies && strings.Contains(b.What, "no OSV database")
	}) {
		t.Fatalf("basis %+v does not say dependencies were not checked", v.Basis)
	}

	evs := h.eventsOf(t, "security.scanned", app)
	if len(evs) != 1 {
		t.Fatalf("security.scanned events: %d", len(evs))
	}
	if d := evs[0].Data; d["score"] != float64(*v.Score) || d["high"] != float64(v.Counts.High) || d["spec_id"] != *v.SpecID {
		t.Fatalf("security.scanned data %v, result %+v", d, v)
	}
	if n := h.auditedOf(t, "security.scan", app); n != 1 {
		t.Fatalf("security.scan audited %d times", n)
	}
	for what, body := range map[string]string{"the answer": string(h.send("GET", api+"/apps/"+app+"/security", "").body),
		"the events": jsonOf(h.allEvents(t)), "the audit log": jsonOf(h.auditEntries(t))} {
		if strings.Contains(body, token) || strings.Contains(body, token[4:]) {
			t.Errorf("%s carries the planted token", what)
		}
	}

	t.Run("two requests at once: each answered 202 and audited once", func(t *testing.T) {
		first := h.send("POST", api+"/apps/"+app+"/security/scan", "")
		second := h.send("POST", api+"/apps/"+app+"/security/scan", "")
		wantStatus(t, "first", first, http.StatusAccepted)
		wantStatus(t, "second", second, http.StatusAccepted)
		waitFor(t, "the scan", func() bool { return h.security(t, app).State == security.Done })
		var started []any
		for _, e := range h.auditEntries(t) {
			if e.Action == "security.scan" && e.AppID != nil && *e.AppID == app {
				started = append(started, e.Details["started"])
			}
		}
		// The second starts a scan only if the first's ended already.
		if len(started) != 3 || started[0] != true || started[1] != true {
			t.Fatalf("security.scan audit entries' started: %v", started)
		}
	})
	t.Run("nothing pinned: nothing to scan", func(t *testing.T) {
		bare := h.app(t, "bare")
		if a := h.send("POST", api+"/apps/"+bare+"/security/scan", ""); a.status != http.StatusConflict || a.envelope(t).Code != errcode.StateInvalid {
			t.Fatalf("scan of an app without a pinned revision: %d %s", a.status, a.body)
		}
		if v := h.security(t, bare); v.State != security.NeverScanned {
			t.Fatalf("state %s", v.State)
		}
	})
	t.Run("the result goes with its app", func(t *testing.T) {
		if _, _, ok := security.Results.Get(h.store.Read(), app); !ok {
			t.Fatal("no stored result")
		}
		wantStatus(t, "delete", h.send("DELETE", api+"/apps/"+app+"?force=true", ""), http.StatusNoContent)
		if _, _, ok := security.Results.Get(h.store.Read(), app); ok {
			t.Fatal("the result outlived its app")
		}
	})
	t.Run("an app that is not there", func(t *testing.T) {
		if a := h.send("GET", api+"/apps/app_nothere/security", ""); a.status != http.StatusNotFound {
			t.Fatalf("%d %s", a.status, a.body)
		}
	})
}

// TestSecurityGatesDeploys: with min_security_score set, the plan and a
// deploy of an app below it, or never scanned, are refused with
// PLAN_SECURITY_BELOW_THRESHOLD (409), whatever insecure_action says; at
// the minimum both go through and the deploy succeeds. Then, running, the
// leader's check finds it below a raised minimum: security.below_minimum
// once; with insecure_action stop and no grace hours, the next check
// stops it through the scheduler (app.stop audited with reason insecure,
// security.insecure_stopped); the minimum lowered again,
// security.recovered.
func TestSecurityGatesDeploys(t *testing.T) {
	h := newHarness(t)
	app := h.leakyApp(t, "gated", plantedToken(t))
	never := h.pinnedApp(t, "never scanned", siteSpec("", 0))
	score := *h.scanned(t, app).Score

	preview := decodeAs[previewDTO](t, h.send("POST", api+"/policy/preview", jsonOf(map[string]any{"policy": map[string]any{"min_security_score": score + 1}})))
	var blocked []string
	for _, b := range preview.Blocked {
		if slices.ContainsFunc(b.Reasons, func(e *errcode.Error) bool { return e.Code == errcode.PlanSecurityBelow }) {
			blocked = append(blocked, b.AppID)
		}
	}
	if slices.Sort(blocked); !slices.Equal(blocked, slices.Sorted(slices.Values([]string{app, never}))) {
		t.Fatalf("the preview of a minimum above the score blocks %v; want both apps", blocked)
	}
	h.setPolicy(t, map[string]any{"min_security_score": score + 1, "insecure_action": "warn"})
	for _, a := range []string{app, never} {
		if r := h.plan(t, a); r.Deployable || !slices.Equal(refusalCodes(r), []errcode.Code{errcode.PlanSecurityBelow}) {
			t.Fatalf("plan of %s under the minimum: %+v", a, r)
		}
		d := h.send("POST", api+"/apps/"+a+"/deployments", `{}`)
		if d.status != http.StatusConflict || !strings.Contains(string(d.body), string(errcode.PlanSecurityBelow)) {
			t.Fatalf("deploy of %s under the minimum: %d %s", a, d.status, d.body)
		}
	}

	h.setPolicy(t, map[string]any{"min_security_score": score})
	if r := h.plan(t, app); !r.Deployable {
		t.Fatalf("plan at the minimum: %+v", r.Refusals)
	}
	if r := h.plan(t, never); r.Deployable {
		t.Fatal("a never scanned app is deployable under a minimum")
	}
	h.deployed(t, app)
	h.waitAppState(t, app, apps.StateRunning)

	ctx := context.Background()
	h.setPolicy(t, map[string]any{"min_security_score": score + 1, "insecure_action": "stop", "insecure_grace_hours": 0})
	h.sec.CheckOnce(ctx)
	if n := len(h.eventsOf(t, "security.below_minimum", app)); n != 1 {
		t.Fatalf("security.below_minimum: %d", n)
	}
	if a := h.getApp(t, app); a.DesiredState != apps.DesiredRunning {
		t.Fatalf("stopped at the first check: %+v", a)
	}
	h.sec.CheckOnce(ctx)
	if a := h.getApp(t, app); a.DesiredState != apps.DesiredStopped {
		t.Fatalf("not stopped past the grace hours: desired %s", a.DesiredState)
	}
	stops := h.eventsOf(t, "security.insecure_stopped", app)
	if len(stops) != 1 || stops[0].Data["grace_hours"] != float64(0) || stops[0].Data["insecure_since"] == nil {
		t.Fatalf("security.insecure_stopped: %+v", stops)
	}
	if n := len(h.eventsOf(t, "security.below_minimum", app)); n != 1 {
		t.Fatalf("security.below_minimum emitted again: %d", n)
	}
	if n := h.auditedOf(t, "app.stop", app); n != 1 {
		t.Fatalf("app.stop audited %d times", n)
	}
	h.setPolicy(t, map[string]any{"min_security_score": score})
	h.sec.CheckOnce(ctx)
	if n := len(h.eventsOf(t, "security.recovered", app)); n != 1 {
		t.Fatalf("security.recovered: %d", n)
	}
}

// dirTarGz packs a directory's regular files (internal/scan's fixture
// repositories) as an upload.
func dirTarGz(t testing.TB, dir string) []byte {
	t.Helper()
	var files []tarFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, tarFile{name: filepath.ToSlash(rel), body: string(body)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tarGz(t, files...)
}

// TestSecurityScanWithOSVDatabase: with the built-in scanner's osv_db
// set to internal/scan's fixture database, a scan of the vulnerable
// fixture repository uploaded as an app's source finds its vulnerable
// dependencies (the vendored node_modules copy not among them) and its
// basis names the database; ignore_unfixable_findings raises the score
// and keeps the findings listed. With osv_db naming nothing, the scan
// fails closed: state failed, security.scan_failed saying why, no score.
func TestSecurityScanWithOSVDatabase(t *testing.T) {
	fixtures := filepath.Join("..", "internal", "scan", "testdata")
	h := newHarnessWith(t, harnessOptions{adminPassword: adminPassword, osvDB: filepath.Join(fixtures, "osv")})
	app := h.app(t, "vulnerable")
	if a := h.upload(api+"/apps/"+app+"/source", "application/gzip", dirTarGz(t, filepath.Join(fixtures, "repos", "vulnerable"))); a.status != http.StatusAccepted {
		t.Fatalf("upload: %d %s", a.status, a.body)
	}
	h.pinSpec(t, app, h.writeSpec(t, app, siteSpec("", 0)))
	v := h.scanned(t, app)
	if v.State != security.Done {
		t.Fatalf("scan: %+v", v)
	}
	var ids []string
	for _, f := range v.Findings {
		if strings.HasPrefix(f.ID, "osv:") {
			ids = append(ids, f.ID)
		}
	}
	for _, want := range []string{
		"osv:TEST-PYSEC-0002:api/requirements.txt:pyyaml@5.3.1",
		"osv:TEST-NPM-0001:web/package-lock.json:event-stream@3.3.6",
		"osv:GHSA-35jh-r3h4-6jhm:web/package-lock.json:lodash@4.17.15",
		"osv:GO-2022-1059:go.mod:golang.org/x/text@v0.3.7",
	} {
		if !slices.Contains(ids, want) {
			t.Errorf("%s not found in %v", want, ids)
		}
	}
	if len(ids) != 9 || v.Counts.Critical != 2 || *v.Score != 0 {
		t.Errorf("%d dependency findings %v, counts %+v, score %d; want 9, two criticals, 0", len(ids), ids, v.Counts, *v.Score)
	}
	if !slices.ContainsFunc(v.Basis, func(b scan.Basis) bool {
		return b.Scanner == scan.ScannerDependencies && strings.Contains(b.What, "against OSV database")
	}) {
		t.Errorf("basis %+v does not name the database", v.Basis)
	}
	h.setPolicy(t, map[string]any{"ignore_unfixable_findings": true})
	ignoring := h.scanned(t, app)
	if len(ignoring.Findings) != len(v.Findings) || *ignoring.Score != scan.Score(v.Findings, true) {
		t.Errorf("ignoring unfixable findings: %d findings, score %d; want %d findings, score %d",
			len(ignoring.Findings), *ignoring.Score, len(v.Findings), scan.Score(v.Findings, true))
	}

	missing := newHarnessWith(t, harnessOptions{adminPassword: adminPassword, osvDB: filepath.Join(t.TempDir(), "no-such-export")})
	other := missing.leakyApp(t, "no database", plantedToken(t))
	failed := missing.scanned(t, other)
	if failed.State != security.Failed || failed.Score != nil || failed.Failure == nil || !strings.Contains(*failed.Failure, "OSV database") {
		t.Fatalf("a scan without its database: %+v; want failed, no score, the reason naming the OSV database", failed)
	}
	evs := missing.eventsOf(t, "security.scan_failed", other)
	if len(evs) != 1 || !strings.Contains(fmt.Sprint(evs[0].Data["reason"]), "OSV database") {
		t.Fatalf("security.scan_failed: %+v", evs)
	}
}
