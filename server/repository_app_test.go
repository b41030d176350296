package server

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/detection"
	"github.com/svchost/svc/internal/errcode"
)

// gitRepo makes a local repository holding files, on branch main.
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("skipping: git is not installed (apt-get install git)")
	}
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "first"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// An app created from a repository is cloned and detected behind the
// answer; a repository outside host policy's allowlist is refused before
// the app exists.
func TestCreateAnAppFromARepository(t *testing.T) {
	h := newHarness(t)
	repo := gitRepo(t, map[string]string{
		"go.mod":  "module example.com/hello\n\ngo 1.22\n",
		"main.go": "package main\n\nimport \"net/http\"\n\nfunc main() { http.ListenAndServe(\":8080\", nil) }\n",
	})
	a := h.send("POST", api+"/apps", jsonOf(map[string]any{"name": "From Git", "source": map[string]string{"repository": repo, "ref": "main"}}))
	wantStatus(t, "create from a repository", a, http.StatusCreated)
	app := decodeAs[appAnswer](t, a).App
	var rec detection.Record
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		rec = decodeAs[detection.Record](t, h.send("GET", api+"/apps/"+app.ID+"/detection", ""))
		if rec.Status == detection.StatusDone || time.Now().After(deadline) {
			break
		}
	}
	if rec.Winner == nil || rec.Winner.Detector != "go" || len(rec.Commit) != 40 {
		t.Fatalf("detection = %+v", rec)
	}
	got := decodeAs[appAnswer](t, h.send("GET", api+"/apps/"+app.ID, "")).App
	if got.Source == nil || got.Source.Kind != "repository" || got.Source.Commit != rec.Commit {
		t.Fatalf("source = %+v", got.Source)
	}

	wantStatus(t, "allow only github.com", h.send("PUT", api+"/policy", `{"policy":{"source_allowlist":["github.com"]}}`), http.StatusOK)
	before := len(decodeAs[list[struct{ ID string }]](t, h.send("GET", api+"/apps", "")).Items)
	e := wantError(t, "a host outside the allowlist",
		h.send("POST", api+"/apps", `{"name":"Elsewhere","source":{"repository":"https://gitlab.example.com/acme/app.git"}}`),
		http.StatusForbidden, errcode.PolicySourceNotAllow)
	if !strings.Contains(e.Message, "gitlab.example.com") {
		t.Errorf("message = %q", e.Message)
	}
	if after := len(decodeAs[list[struct{ ID string }]](t, h.send("GET", api+"/apps", "")).Items); after != before {
		t.Fatalf("a refused source created an app (%d apps, then %d)", before, after)
	}
}

func TestPatchAppSource(t *testing.T) {
	h := newHarness(t)
	repo := gitRepo(t, map[string]string{"index.html": "<h1>hi</h1>\n"})
	app := h.app(t, "Static")
	wantStatus(t, "change the source", h.send("PATCH", api+"/apps/"+app, jsonOf(map[string]any{"source": map[string]string{"repository": repo}})), http.StatusOK)
	var rec detection.Record
	for deadline := time.Now().Add(60 * time.Second); rec.Status != detection.StatusDone && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		rec = decodeAs[detection.Record](t, h.send("GET", api+"/apps/"+app+"/detection", ""))
	}
	if rec.Winner == nil || rec.Winner.Detector != "static" {
		t.Fatalf("detection = %+v", rec)
	}
	wantError(t, "an option as a repository", h.send("PATCH", api+"/apps/"+app, `{"source":{"repository":"--upload-pack=touch /tmp/x"}}`), http.StatusBadRequest, errcode.ValidInvalid)
}

// A clone that fails behind the answer shows in the detection's status,
// with the reason and without the credentials in the address.
func TestAFailedCloneShowsInDetection(t *testing.T) {
	h := newHarness(t)
	repo := gitRepo(t, map[string]string{"index.html": "hi\n"})
	a := h.send("POST", api+"/apps", jsonOf(map[string]any{"name": "Bad Ref", "source": map[string]string{"repository": repo, "ref": "no-such-branch"}}))
	wantStatus(t, "create", a, http.StatusCreated)
	app := decodeAs[appAnswer](t, a).App
	var rec detection.Record
	for deadline := time.Now().Add(60 * time.Second); rec.Status != detection.StatusFailed && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		rec = decodeAs[detection.Record](t, h.send("GET", api+"/apps/"+app.ID+"/detection", ""))
	}
	if rec.Status != detection.StatusFailed || !strings.Contains(rec.Error, "fetching the source failed") {
		t.Fatalf("detection = %+v", rec)
	}
}
