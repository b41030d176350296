package nomad_test

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad"
)

func TestArtifacts(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	key := []byte(strings.Repeat("k", 32))
	arts, err := nomad.NewArtifacts(nomad.ArtifactsConfig{Dir: t.TempDir(), Key: key, TTL: time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	for name, body := range map[string]string{"app": "#!/bin/sh\necho hi\n", "static/index.html": "<h1>x</h1>\n"} {
		p := filepath.Join(src, name)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("app", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(arts)
	t.Cleanup(srv.Close)
	if _, err := arts.PublishForTest(scheduler.Artifact{ID: "../evil", Dir: src}); err == nil {
		t.Errorf("published an artifact whose ID escapes the store")
	}
	sum, err := arts.PublishForTest(scheduler.Artifact{ID: "b1", Dir: src})
	if err != nil {
		t.Fatal(err)
	}
	signed := arts.SignedURL(srv.URL, "b1")
	resp, err := http.Get(signed)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET the signed URL: %s", resp.Status)
	}
	if got := sha256.Sum256(body); hex.EncodeToString(got[:]) != sum {
		t.Errorf("served bytes do not match the published checksum")
	}
	names := map[string]byte{}
	zr, err := gzip.NewReader(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names[h.Name] = h.Typeflag
	}
	for name, typ := range map[string]byte{"app": tar.TypeReg, "static/": tar.TypeDir, "static/index.html": tar.TypeReg, "link": tar.TypeSymlink} {
		if names[name] != typ {
			t.Errorf("archive entry %s = type %q, want %q (entries %v)", name, names[name], typ, names)
		}
	}

	u, _ := url.Parse(signed)
	q := u.Query()
	for name, mutate := range map[string]func(url.Values) string{
		"tampered signature": func(v url.Values) string { v.Set("sig", strings.Repeat("0", 64)); return "b1" },
		"later expiry":       func(v url.Values) string { v.Set("expires", "9999999999"); return "b1" },
		"other artifact":     func(v url.Values) string { return "b2" },
		"no signature":       func(v url.Values) string { v.Del("sig"); return "b1" },
	} {
		v := url.Values{}
		for k, vs := range q {
			v[k] = append([]string(nil), vs...)
		}
		id := mutate(v)
		resp, err := http.Get(srv.URL + nomad.ArtifactPath + id + ".tar.gz?" + v.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s, want 403", name, resp.Status)
		}
	}
	now = now.Add(2 * time.Minute)
	resp, err = http.Get(signed)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("an expired URL: %s, want 403", resp.Status)
	}
	if err := arts.Remove("b1"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(-2 * time.Minute)
	resp, err = http.Get(signed)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a removed artifact: %s, want 404", resp.Status)
	}
	if _, err := nomad.NewArtifacts(nomad.ArtifactsConfig{Dir: t.TempDir(), Key: []byte("short")}); err == nil {
		t.Errorf("a short key was accepted")
	}
}
