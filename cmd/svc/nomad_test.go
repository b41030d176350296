package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/svchost/svc/internal/config"
	"github.com/svchost/svc/scheduler/nomad"
)

// TestNomadArtifactKey: cluster servers derive one key from the cluster
// secret (never the secret itself); a single node keeps a random key.
func TestNomadArtifactKey(t *testing.T) {
	a, b := &config.Config{}, &config.Config{}
	a.Cluster.Secret, b.Cluster.Secret = "cluster-secret-value", "cluster-secret-value"
	a.Server.WorkDir, b.Server.WorkDir = t.TempDir(), t.TempDir()
	ka, err := nomadArtifactKey(a)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := nomadArtifactKey(b)
	if !bytes.Equal(ka, kb) || len(ka) < 32 || bytes.Contains(ka, []byte("cluster-secret-value")) {
		t.Errorf("cluster keys differ, are short, or hold the secret")
	}
	single := &config.Config{}
	single.Server.WorkDir = t.TempDir()
	k1, err := nomadArtifactKey(single)
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := nomadArtifactKey(single)
	if !bytes.Equal(k1, k2) || len(k1) < 32 {
		t.Errorf("a single node's key is not kept")
	}
}

// TestWithNomadArtifacts: the artifact path is served ahead of the front;
// everything else reaches it.
func TestWithNomadArtifacts(t *testing.T) {
	cfg := &config.Config{}
	cfg.Server.WorkDir = t.TempDir()
	front := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Header().Set("X-Front", "1"); next.ServeHTTP(w, r) })
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	arts, err := nomadArtifacts(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := withNomadArtifacts(arts, front)(api)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, nomad.ArtifactPath+"b1.tar.gz?expires=1&sig=x", nil))
	if rec.Code != http.StatusForbidden || rec.Header().Get("X-Front") != "" {
		t.Errorf("artifact path: %d (front %q), want 403 from the artifact store", rec.Code, rec.Header().Get("X-Front"))
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/apps", nil))
	if rec.Code != http.StatusTeapot || rec.Header().Get("X-Front") != "1" {
		t.Errorf("other path: %d (front %q), want the API through the front", rec.Code, rec.Header().Get("X-Front"))
	}
}
