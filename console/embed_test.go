package console

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func serve(t *testing.T, h http.Handler, method, path string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

var assetRefRE = regexp.MustCompile(`(?:src|href)="(/assets/[^"]+)"`)

// TestHandlerServesTheBuild: every page path answers index.html, never
// cached; each file index.html names answers with its type and a cache
// lifetime of a year, gzipped when asked; a file the build lacks is 404
// (never index.html in its place); every answer carries the policy and
// the headers that keep it from being sniffed, framed or referred.
func TestHandlerServesTheBuild(t *testing.T) {
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	check := func(path string, rec *httptest.ResponseRecorder) {
		t.Helper()
		for k, v := range map[string]string{"Content-Security-Policy": Policy, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"} {
			if got := rec.Header().Get(k); got != v {
				t.Errorf("GET %s: %s %q, want %q", path, k, got, v)
			}
		}
	}
	index := serve(t, h, "GET", "/")
	for _, p := range []string{"/", "/login?next=%2F", "/setup", "/passcode/app_01", "/apps/app_01/deploys", "/admin/", "/account/password"} {
		rec := serve(t, h, "GET", p)
		check(p, rec)
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" || rec.Header().Get("Cache-Control") != "no-store" || rec.Body.String() != index.Body.String() {
			t.Errorf("GET %s: %d %q %q; want index.html, not cached", p, rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Cache-Control"))
		}
	}
	refs := assetRefRE.FindAllStringSubmatch(index.Body.String(), -1)
	if len(refs) < 2 {
		t.Fatalf("index.html names %d assets, want its script and its stylesheet:\n%s", len(refs), index.Body)
	}
	for _, m := range refs {
		rec := serve(t, h, "GET", m[1], "Accept-Encoding", "br, gzip")
		check(m[1], rec)
		if rec.Code != 200 || rec.Header().Get("Cache-Control") != "public, max-age=31536000, immutable" || rec.Header().Get("Content-Encoding") != "gzip" {
			t.Fatalf("GET %s: %d, Cache-Control %q, Content-Encoding %q", m[1], rec.Code, rec.Header().Get("Cache-Control"), rec.Header().Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(zr)
		want, _ := fs.ReadFile(dist, "dist"+m[1])
		if !bytes.Equal(got, want) {
			t.Errorf("GET %s gzipped is not the file", m[1])
		}
		plain := serve(t, h, "GET", m[1])
		if plain.Header().Get("Content-Encoding") != "" || !bytes.Equal(plain.Body.Bytes(), want) {
			t.Errorf("GET %s without gzip: not the file as it is", m[1])
		}
		if ct := plain.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") && !strings.HasPrefix(ct, "text/css") {
			t.Errorf("GET %s: Content-Type %q", m[1], ct)
		}
		if again := serve(t, h, "GET", m[1], "If-None-Match", plain.Header().Get("ETag")); again.Code != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", m[1], again.Code)
		}
	}
	for _, p := range []string{"/assets/", "/assets/nothing.js", "/assets/../index.html"} {
		if rec := serve(t, h, "GET", p); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, rec.Code)
		}
	}
	if rec := serve(t, h, "POST", "/login"); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /login: %d, want 405", rec.Code)
	}
}

var (
	inlineScriptRE = regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`)
	scriptTagRE    = regexp.MustCompile(`<script\b[^>]*>`)
)

// TestBuildHasNothingInline: the policy allows no inline script, style or
// event handler, so the build must carry none: every script of index.html
// is a file of /assets/, no <style> element or style= attribute, no on…=
// handler.
func TestBuildHasNothingInline(t *testing.T) {
	b, err := fs.ReadFile(dist, "dist/index.html")
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	if inlineScriptRE.MatchString(html) || strings.Contains(html, "<style") || regexp.MustCompile(`\s(style|on[a-z]+)=`).MatchString(html) {
		t.Errorf("index.html has inline code the policy refuses:\n%s", html)
	}
	for _, tag := range scriptTagRE.FindAllString(html, -1) {
		if !strings.Contains(tag, `src="/assets/`) {
			t.Errorf("index.html: %s is not a file of the build", tag)
		}
	}
}

// TestDistIsWhatTheSourcesBuild fails when the committed dist/ is stale:
// it copies the console's sources to a temporary directory, installs the
// locked dependencies there (npm ci) and builds, and compares every file
// with dist/. It needs npm; without it the test skips, saying so, unless
// SVC_REQUIRE_NODE=1 (CI), which makes that a failure.
func TestDistIsWhatTheSourcesBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the console with npm; not in -short")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		if os.Getenv("SVC_REQUIRE_NODE") == "1" {
			t.Fatal("npm is not on PATH, and SVC_REQUIRE_NODE=1 requires it: the committed console/dist cannot be checked")
		}
		t.Skip("npm is not on PATH: the committed console/dist is not checked against its sources (install Node.js and npm; SVC_REQUIRE_NODE=1 makes this a failure)")
	}
	tmp := t.TempDir()
	for _, name := range []string{"package.json", "package-lock.json", "tsconfig.json", "vite.config.ts", "index.html", "src"} {
		if err := copySource(tmp, name); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"ci", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline"}, {"run", "build"}} {
		cmd := exec.Command(npm, args...)
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	built := os.DirFS(filepath.Join(tmp, "dist"))
	committed, _ := fs.Sub(dist, "dist")
	want := files(t, built)
	got := files(t, committed)
	for name, b := range want {
		if c, ok := got[name]; !ok {
			t.Errorf("dist/%s is missing", name)
		} else if !bytes.Equal(c, b) {
			t.Errorf("dist/%s differs from what the sources build", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("dist/%s is not built from the sources any more", name)
		}
	}
	if t.Failed() {
		t.Log("the committed console/dist is stale: run make console and commit console/dist")
	}
}

// copySource copies name, a file or directory of the console's sources,
// into dir.
func copySource(dir, name string) error {
	fi, err := os.Stat(name)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return os.CopyFS(filepath.Join(dir, name), os.DirFS(name))
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), b, 0o644)
}

func files(t *testing.T, fsys fs.FS) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		out[p] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
