package nomad_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/scheduler/nomad"
)

// tarGz packs entries (name -> body; a name ending in / is a directory,
// a body starting with "->" a symlink to the rest) as a gzipped tar.
func tarGz(t testing.TB, entries ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e[0], Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e[1]))}
		switch {
		case strings.HasSuffix(e[0], "/"):
			h.Typeflag, h.Size, h.Mode = tar.TypeDir, 0, 0o755
		case strings.HasPrefix(e[1], "->"):
			h.Typeflag, h.Size, h.Linkname = tar.TypeSymlink, 0, e[1][2:]
		case strings.HasPrefix(e[1], "dev:"):
			h.Typeflag, h.Size = tar.TypeChar, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write([]byte(e[1]))
		}
	}
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes()
}

func put(t *testing.T, url string, body []byte) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestArtifactUpload: a build job PUTs what it built to a URL signed for
// PUT and that artifact only; the store keeps a checked gzipped tar, the
// first upload wins (the same bytes again are fine), and the URL cannot
// download anything.
func TestArtifactUpload(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	arts, err := nomad.NewArtifacts(nomad.ArtifactsConfig{Dir: t.TempDir(), Key: []byte(strings.Repeat("k", 32)),
		TTL: time.Minute, Now: func() time.Time { return now }, MaxUploadBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(arts)
	t.Cleanup(srv.Close)
	good := tarGz(t, [2]string{"./", ""}, [2]string{"app", "#!/bin/sh\n"}, [2]string{"static/", ""},
		[2]string{"static/index.html", "<h1>x</h1>"}, [2]string{"link", "->app"})

	up := arts.SignedUploadURL(srv.URL, "b1", 10*time.Minute)
	if code := put(t, arts.SignedURL(srv.URL, "b1"), good); code != http.StatusForbidden {
		t.Errorf("PUT to a download URL: %d, want 403", code)
	}
	if resp, err := http.Get(up); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET an upload URL: %v %v, want 403", resp.Status, err)
	}
	if code := put(t, strings.Replace(up, "/b1.tar.gz", "/b2.tar.gz", 1), good); code != http.StatusForbidden {
		t.Errorf("PUT another artifact with b1's signature: %d, want 403", code)
	}
	for name, body := range map[string][]byte{
		"not gzip":        []byte("hello"),
		"truncated":       good[:len(good)/2],
		"escaping name":   tarGz(t, [2]string{"../evil", "x"}),
		"absolute name":   tarGz(t, [2]string{"/etc/evil", "x"}),
		"a device":        tarGz(t, [2]string{"dev", "dev:"}),
		"nested escaping": tarGz(t, [2]string{"a/../../evil", "x"}),
	} {
		if code := put(t, up, body); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, code)
		}
		if _, ok := arts.LookupForTest("b1"); ok {
			t.Fatalf("%s: stored", name)
		}
	}
	if code := put(t, up, bytes.Repeat([]byte{0}, 65<<10)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("an upload past the cap: %d, want 413", code)
	}
	if code := put(t, up, good); code != http.StatusCreated {
		t.Fatalf("PUT a build: %d, want 201", code)
	}
	sum, ok := arts.LookupForTest("b1")
	want := sha256.Sum256(good)
	if !ok || sum != hex.EncodeToString(want[:]) {
		t.Fatalf("stored %q %v, want the upload's checksum", sum, ok)
	}
	if code := put(t, up, good); code != http.StatusNoContent {
		t.Errorf("the same upload again (a retry): %d, want 204", code)
	}
	if code := put(t, up, tarGz(t, [2]string{"other", "y"})); code != http.StatusConflict {
		t.Errorf("a different upload: %d, want 409", code)
	}
	resp, err := http.Get(arts.SignedURL(srv.URL, "b1"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, good) {
		t.Errorf("the download differs from the upload")
	}
	now = now.Add(11 * time.Minute)
	if code := put(t, up, good); code != http.StatusForbidden {
		t.Errorf("an expired upload URL: %d, want 403", code)
	}
}

// FuzzCheckTarGz: the upload checker never panics and never accepts an
// entry that leaves the tree.
func FuzzCheckTarGz(f *testing.F) {
	f.Add(tarGz(f, [2]string{"a", "x"}))
	f.Add(tarGz(f, [2]string{"../a", "x"}))
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		if nomad.CheckTarGzForTest(bytes.NewReader(b)) != nil {
			return
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("accepted what is not gzip: %v", err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err != nil {
				return
			}
			if clean := path.Clean(h.Name); strings.HasPrefix(h.Name, "/") || clean == ".." || strings.HasPrefix(clean, "../") {
				t.Fatalf("accepted entry %q", h.Name)
			}
		}
	})
}
