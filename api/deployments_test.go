package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// The deployment calls send what the API takes and decode what it
// answers: the source shipped and each workload's build.
func TestDeployments(t *testing.T) {
	const answer = `{"deployment":{"id":"dep_1","app_id":"app_1","spec_id":"spc_1","revision":2,"state":"queued","trigger":"rollback",
		"error_code":null,"error_message":null,"created_by":"usr_1","created_at":"2025-01-02T03:04:05Z","started_at":null,"finished_at":null,
		"approvals_required":0,"approval_reasons":[],"approvals":[],"rejected_reason":null,
		"source":{"kind":"archive","commit":"sha256:ab","checkout_id":"chk_1"},"redeploys":"dep_0",
		"builds":{"web":{"build_key":"sha256:cd","artifact_id":"dep_0-web","reused":true,"built_by":"dep_0"}}}}`
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.Path+" "+string(b))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answer))
	}))
	defer srv.Close()
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := c.Deploy(ctx, "app_1", 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Deploy(ctx, "app_1", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Rollback(ctx, "app_1"); err != nil {
		t.Fatal(err)
	}
	d, err := c.Deployment(ctx, "app_1", "dep_1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"POST /api/v1/apps/app_1/deployments {}",
		`POST /api/v1/apps/app_1/deployments {"revision":3}`,
		"POST /api/v1/apps/app_1/deployments/rollback ",
		"GET /api/v1/apps/app_1/deployments/dep_1 ",
	}
	if !slices.Equal(got, want) {
		t.Errorf("requests = %q, want %q", got, want)
	}
	w := d.Builds["web"]
	if d.Source == nil || d.Source.Commit != "sha256:ab" || d.Source.CheckoutID != "chk_1" || d.Redeploys == nil || *d.Redeploys != "dep_0" ||
		!w.Reused || w.BuiltBy != "dep_0" || w.ArtifactID != "dep_0-web" || w.BuildKey != "sha256:cd" || d.Revision != 2 {
		t.Errorf("deployment = %+v", d)
	}
}
