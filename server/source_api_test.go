package server

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/source"
)

var _ sourcesService = (*source.Service)(nil)

type tarFile struct {
	name, body, link string
	mode             int64
}

// tarGz builds a tar.gz of files (a link when link is set).
func tarGz(t testing.TB, files ...tarFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Typeflag: tar.TypeReg, Size: int64(len(f.body))}
		if f.mode == 0 {
			h.Mode = 0o644
		}
		if f.link != "" {
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, f.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tinyApp is the tar.gz of a small web app.
func tinyApp(t testing.TB) []byte {
	return tarGz(t,
		tarFile{name: "tiny/package.json", body: `{"name":"tiny","scripts":{"start":"node server.js"}}`},
		tarFile{name: "tiny/server.js", body: "require('http').createServer((q, r) => r.end('hi')).listen(process.env.PORT)\n"},
		tarFile{name: "tiny/run.sh", body: "#!/bin/sh\nexec node server.js\n", mode: 0o755},
		tarFile{name: "tiny/index.js", link: "server.js"},
	)
}

func (h *harness) upload(path, contentType string, body []byte, header ...string) answer {
	h.t.Helper()
	return h.do("POST", path, bytes.NewReader(body), append([]string{"Content-Type", contentType}, header...)...)
}

func TestSourceUpload(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Tiny")
	path := api + "/apps/" + app + "/source"
	data := tinyApp(t)

	before := h.auditEntries(t)
	a := h.upload(path, "application/gzip", data)
	wantStatus(t, "upload", a, http.StatusAccepted)
	got := decodeAs[sourceAnswer](t, a)
	sum := sha256.Sum256(data)
	if got.Source.Kind != "archive" || got.Source.Commit != "sha256:"+hex.EncodeToString(sum[:]) || !strings.HasPrefix(got.CheckoutID, "chk_") {
		t.Fatalf("answer %s", a.body)
	}
	// The app records it.
	rec := decodeAs[appAnswer](t, h.send("GET", api+"/apps/"+app, "")).App
	if rec.Source == nil || *rec.Source != got.Source {
		t.Fatalf("the app's source is %+v, want %+v", rec.Source, got.Source)
	}
	entries := newEntries(before, h.auditEntries(t))
	if len(entries) != 1 || entries[0].Action != "source.upload" || entries[0].RequestID != a.header.Get("X-Request-Id") {
		t.Fatalf("audit: %v", actionsOf(entries))
	}
	// The checkout is on disk, current.
	cur := filepath.Join(h.dir, "work", "apps", app, "source", "current")
	if b, err := os.ReadFile(filepath.Join(cur, "tiny", "server.js")); err != nil || !strings.Contains(string(b), "createServer") {
		t.Fatalf("checkout: %q %v", b, err)
	}
	if info, err := os.Stat(filepath.Join(cur, "tiny", "run.sh")); err != nil || info.Mode().Perm() != 0o755 {
		t.Fatalf("run.sh: %v %v", info, err)
	}
	// A tar sent as a tar, and a tar.gz sent as a tar (the magic wins).
	wantStatus(t, "tar.gz labelled x-tar", h.upload(path, "application/x-tar", data), http.StatusAccepted)
}

func TestSourceUploadRefusals(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Refused")
	path := api + "/apps/" + app + "/source"
	hostile := tarGz(t, tarFile{name: "ok.txt", body: "ok"}, tarFile{name: "../../escape.sh", body: "pwned"})

	a := h.upload(path, "application/gzip", hostile)
	e := wantError(t, "hostile archive", a, http.StatusBadRequest, errcode.ValidInvalid)
	if !strings.Contains(e.Message, "path traversal") || e.Details["entry"] != "../../escape.sh" {
		t.Errorf("hostile archive: %s", a.body)
	}
	a = h.upload(path, "application/gzip", tarGz(t, tarFile{name: "etc", link: "/etc"}, tarFile{name: "etc/passwd", body: "x"}))
	if e := wantError(t, "symlink out", a, http.StatusBadRequest, errcode.ValidInvalid); !strings.Contains(e.Message, "absolute path") {
		t.Errorf("symlink out: %s", a.body)
	}
	wantError(t, "garbage", h.upload(path, "application/zip", []byte("not a zip at all")), http.StatusBadRequest, errcode.ValidInvalid)
	for _, ct := range []string{"application/json", "text/plain", "", "multipart/form-data; boundary=x"} {
		a := h.upload(path, ct, tinyApp(t))
		if ct == "" {
			a = h.do("POST", path, bytes.NewReader(tinyApp(t)))
		}
		wantError(t, "content type "+ct, a, http.StatusUnsupportedMediaType, errcode.ValidInvalid)
	}
	wantError(t, "unknown app", h.upload(api+"/apps/app_01JZZZZZZZZZZZZZZZZZZZZZZZ/source", "application/gzip", tinyApp(t)), http.StatusNotFound, errcode.NotFound)

	// Over the limit: declared, refused before the body is read.
	req := httptest.NewRequest("POST", path, strings.NewReader("small"))
	req.ContentLength = source.DefaultMaxArchiveBytes + 1
	req.Header.Set("Content-Type", "application/gzip")
	req.Header.Set("Authorization", "Bearer "+h.token)
	rec := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || codeOf(answer{body: rec.Body.Bytes()}) != errcode.ValidInvalid {
		t.Errorf("declared over the limit: %d %s", rec.Code, rec.Body)
	}

	// Over the limit, streamed without a length: the service's archive cap
	// (here 64 KiB) stops it, also 413.
	small, err := source.New(source.Deps{WorkDir: filepath.Join(h.dir, "work"), Apps: apps.NewService(h.store, func() time.Time { return time.Now().UTC() }), Policy: h.pol, Limits: source.Limits{MaxArchiveBytes: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	saved := h.srv.d.Sources
	h.srv.d.Sources = small
	for _, ct := range []string{"application/zip", "application/gzip"} {
		body := io.MultiReader(bytes.NewReader(tinyApp(t)), bytes.NewReader(make([]byte, 128<<10)))
		if ct == "application/zip" {
			body = bytes.NewReader(make([]byte, 128<<10))
		}
		req = httptest.NewRequest("POST", path, body)
		req.ContentLength = -1
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer "+h.token)
		rec = httptest.NewRecorder()
		h.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "larger than the limit of "+strconv.Itoa(64<<10)) {
			t.Errorf("%s streamed over the limit: %d %s", ct, rec.Code, rec.Body)
		}
	}
	h.srv.d.Sources = saved

	// Nothing was recorded or left behind, and nothing audited.
	rec2 := decodeAs[appAnswer](t, h.send("GET", api+"/apps/"+app, "")).App
	if rec2.Source != nil {
		t.Errorf("refused uploads recorded %+v", rec2.Source)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "work", "apps", app, "source", "current")); err == nil {
		t.Error("a refused upload left a checkout")
	}
	if _, err := os.Stat(filepath.Join(h.dir, "work", "apps", "escape.sh")); err == nil {
		t.Error("the hostile archive escaped")
	}
	for _, e := range h.auditEntries(t) {
		if e.Action == "source.upload" {
			t.Errorf("a refused upload was audited: %+v", e)
		}
	}
}

func TestSourceUploadNeedsSpecEdit(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Verbs")
	path := api + "/apps/" + app + "/source"
	viewer := h.account(t, "viewer", nil, true)
	h.grantApp(t, app, authz.KindUser, viewer.userID, authz.RoleViewer)
	wantError(t, "viewer", h.upload(path, "application/gzip", tinyApp(t), viewer.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
	dev := h.account(t, "dev", nil, true)
	h.grantApp(t, app, authz.KindUser, dev.userID, authz.RoleDeveloper)
	wantStatus(t, "developer", h.upload(path, "application/gzip", tinyApp(t), dev.bearer()...), http.StatusAccepted)
	stranger := h.account(t, "stranger", nil, true)
	wantError(t, "stranger", h.upload(path, "application/gzip", tinyApp(t), stranger.bearer()...), http.StatusNotFound, errcode.NotFound)
}
