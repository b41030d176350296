// Package console owns the web console: a single-page application
// (TypeScript, Preact, built by Vite from src/) whose built assets, dist/,
// are committed and embedded in the binary, so that building and running
// svc needs no Node. Handler serves them: the hashed files under /assets/
// with long cache lifetimes, and index.html for every other path the
// server routes here (the console's pages: /, /login, /setup,
// /passcode/<app ID>, /apps/…, /admin/…, /account/…), all under a strict
// Content-Security-Policy (nothing inline, requests to its own origin only).
//
// The console is a client of the public API (/api/v1) with the session
// cookie and has no capability the API lacks; this package holds no
// business rules, reads no state and imports nothing of svc. `make console`
// rebuilds dist/ (npm ci && npm run build); a test fails when the
// committed dist/ is not what the sources build.
package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed all:dist
var dist embed.FS

// Policy is the Content-Security-Policy of every answer of the console:
// its own scripts, styles, images (and data: images), fonts and API, no
// plugins, frames, inline code or base rewriting; forms post to itself.
const Policy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// assetsPrefix begins the path of every built file but index.html; their
// names carry a hash of their content, so they may be cached for good.
const assetsPrefix = "/assets/"

// file is one embedded file, ready to serve.
type file struct {
	body, gz    []byte // gz is nil when compressing does not pay
	contentType string
	etag        string
}

// Handler serves the embedded console.
type Handler struct {
	index  file
	assets map[string]file // by path under dist/
}

var _ http.Handler = (*Handler)(nil)

// New reads the embedded build. It fails when the build is missing its
// index.html (a checkout whose dist/ was never built).
func New() (*Handler, error) { return newFrom(dist) }

func newFrom(fsys fs.FS) (*Handler, error) {
	root, err := fs.Sub(fsys, "dist")
	if err != nil {
		return nil, err
	}
	h := &Handler{assets: map[string]file{}}
	err = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		h.assets[p] = prepare(p, b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("console: reading the embedded build: %w", err)
	}
	idx, ok := h.assets["index.html"]
	if !ok {
		return nil, fmt.Errorf("console: the embedded build has no index.html (run make console)")
	}
	h.index = idx
	return h, nil
}

func prepare(p string, b []byte) file {
	sum := sha256.Sum256(b)
	f := file{body: b, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, contentType: mime.TypeByExtension(path.Ext(p))}
	if f.contentType == "" {
		f.contentType = "application/octet-stream"
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	if buf.Len() < len(b) {
		f.gz = buf.Bytes()
	}
	return f
}

// ServeHTTP answers a GET or HEAD: a built asset under /assets/ (404 when
// there is none: a page never stands in for a script), else index.html,
// where the console's own router shows the page the path names.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", Policy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	f := h.index
	if name, ok := strings.CutPrefix(r.URL.Path, assetsPrefix); ok {
		a, found := h.assets[strings.TrimPrefix(assetsPrefix, "/")+name]
		if !found || name == "" || strings.Contains(name, "/") {
			hd.Set("Cache-Control", "no-store")
			http.Error(w, "no such file of the console", http.StatusNotFound)
			return
		}
		f = a
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		// A page's address may carry a handoff's state (next=…): never
		// kept anywhere.
		hd.Set("Cache-Control", "no-store")
	}
	hd.Set("Content-Type", f.contentType)
	hd.Set("ETag", f.etag)
	hd.Set("Vary", "Accept-Encoding")
	if r.Header.Get("If-None-Match") == f.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := f.body
	if f.gz != nil && acceptsGzip(r) {
		hd.Set("Content-Encoding", "gzip")
		body = f.gz
	}
	hd.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// acceptsGzip reports whether the request's Accept-Encoding lists gzip
// (without q=0).
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") {
			return strings.ReplaceAll(params, " ", "") != "q=0"
		}
	}
	return false
}
