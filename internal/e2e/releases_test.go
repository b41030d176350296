package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svchost/svc/api"
)

// TestRollbackServesTheOldCode is the case on the real binary and
// the process runtime: go-hello deployed (v1), a new upload (v2) deployed
// without a new revision serves v2, and a rollback serves v1 again, from
// the kept build of the first deploy (nothing built, as the deployment's
// record and log say), while the app's recorded source stays v2.
func TestRollbackServesTheOldCode(t *testing.T) {
	srv := startAppServer(t, "rollback")
	sm := samples[0] // go-hello: a real build
	greeting := "greeting-" + randomHex(t)
	id, _ := srv.onboard(t, "rollback", sm.dir, sm.detector, helloValues(greeting, "token-"+randomHex(t))...)
	first := srv.deployed(t, id, 0)
	checkHello(t, sm, srv.waitDeployed(t, id), greeting)

	// v2: the same program saying so; uploaded, and deployed as the same
	// revision.
	v2 := filepath.Join(t.TempDir(), "go-hello")
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(v2, os.DirFS(filepath.Join(root, "samples", sm.dir))); err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(v2, "main.go")
	b, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(main, []byte(strings.Replace(string(b), `"hello from go: %s\n"`, `"hello from go v2: %s\n"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.must(t, "POST", "/apps/"+id+"/source", dirTarGz(t, v2), http.StatusAccepted, nil)
	second := srv.deployed(t, id, 0)
	if second.Revision != first.Revision {
		t.Fatalf("the deploy of v2 is revision %d; want the same revision %d", second.Revision, first.Revision)
	}
	waitAnswer(t, srv.waitDeployed(t, id), "/", "hello from go v2: "+greeting)

	c, err := api.New(srv.p.Base(), api.WithToken(srv.token()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d1, err := c.Deployment(ctx, id, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := c.Deployment(ctx, id, second.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d1.Source == nil || d2.Source == nil || d1.Source.Commit == d2.Source.Commit || d2.Builds["web"].Reused {
		t.Fatalf("deployments 1 and 2 shipped %+v and %+v (%+v); want two sources, v2 built", d1.Source, d2.Source, d2.Builds)
	}

	rb, err := c.Rollback(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	lines, end := srv.follow(t, id, rb.ID)
	if end.State != "succeeded" {
		t.Fatalf("rollback ended %s %s; its log:\n%s", end.State, end.code(), strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "build: ") || strings.Contains(l, "building workload") {
			t.Fatalf("the rollback built; its log:\n%s", strings.Join(lines, "\n"))
		}
	}
	rb, err = c.Deployment(ctx, id, rb.ID)
	if err != nil {
		t.Fatal(err)
	}
	w := rb.Builds["web"]
	if rb.Redeploys == nil || *rb.Redeploys != first.ID || rb.Source == nil || rb.Source.Commit != d1.Source.Commit ||
		!w.Reused || w.BuiltBy != first.ID || w.ArtifactID != d1.Builds["web"].ArtifactID {
		t.Fatalf("rollback = %+v (builds %+v); want deployment %s shipped again: its source and its kept build", rb, rb.Builds, first.ID)
	}
	body := waitAnswer(t, srv.waitDeployed(t, id), "/", "hello from go: ")
	if !strings.Contains(body, "hello from go: "+greeting) {
		t.Fatalf("after the rollback GET / = %q; want v1's answer", body)
	}
}
