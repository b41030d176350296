package e2e

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/browsertest"
)

// BenchmarkConsoleLauncher: the real binary with 200 apps the administrator
// can open, and the launcher loaded in a real headless Chromium: ms from
// the navigation's start to all 200 tiles in the page (measured in the page),
// and to its load event (every tile image loaded) (the console's
// files from the browser's cache after the first load, as a returning
// person has them; GET /api/v1/me and /me/apps each time), and the
// console's transfer size: its HTML, JS and CSS gzipped as served.
func BenchmarkConsoleLauncher(b *testing.B) {
	s := startAppServer(b, "console-bench")
	size := consoleTransfer(b, s.p.Base())
	b.ReportMetric(float64(size["html"]+size["js"]+size["css"]), "gzip-bytes")
	fmt.Printf("console transfer size (gzip, as served): html %d B, js %d B, css %d B, total %d B\n", size["html"], size["js"], size["css"], size["html"]+size["js"]+size["css"])

	for i := range 200 {
		s.must(b, "POST", "/apps", map[string]string{"name": fmt.Sprintf("App %03d", i)}, http.StatusCreated, nil)
	}
	base := s.p.Base()
	tab := browsertest.Start(b, browsertest.Options{}).Tab()
	tab.Viewport(1280, 800)
	// When the 200th tile appears, in ms since the navigation started.
	tab.OnNewDocument(`new MutationObserver((_, o) => {
  if (document.querySelectorAll(".tile:not(.skeleton)").length >= 200) { window.__tilesAt = performance.now(); o.disconnect(); }
}).observe(document, {childList: true, subtree: true});`)
	tab.Go(base + "/login")
	waitFor(b, tab, "the sign-in form", `document.querySelector('input[name="password"]')`)
	fill(b, tab, map[string]string{"username": "admin", "password": adminPassword}, "username", "password")
	waitFor(b, tab, "the launcher", `document.querySelectorAll('.tile:not(.skeleton)').length === 200`)

	var total time.Duration
	var tiles float64
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		tab.Go(base + "/") // returns at the load event: every tile image loaded
		waitFor(b, tab, "200 tiles", `window.__tilesAt`)
		total += time.Since(start)
		var at float64
		tab.MustEval(`window.__tilesAt`, &at)
		tiles += at
	}
	b.StopTimer()
	b.ReportMetric(tiles/float64(b.N), "ms-to-tiles")
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-load")
	fmt.Printf("launcher with 200 apps (mean of %d): %.1f ms from navigation start to all 200 tiles rendered; %.1f ms until the page's load event (every tile image loaded)\n",
		b.N, tiles/float64(b.N), float64(total.Microseconds())/1000/float64(b.N))
}

// consoleAsset is a built file index.html loads.
var consoleAsset = regexp.MustCompile(`(?:src|href)="(/assets/[^"]+)"`)

// consoleTransfer is what a browser downloads for the console's first
// page, by kind (html, js, css): the bytes on the wire, gzipped as the
// server sends them to a client that accepts gzip.
func consoleTransfer(b *testing.B, base string) map[string]int {
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	get := func(path string) []byte {
		req, err := http.NewRequest("GET", base+path, nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Accept-Encoding", "gzip")
		res, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil || res.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d %v", path, res.StatusCode, err)
		}
		return body
	}
	size := map[string]int{}
	page := get("/login")
	size["html"] = len(page)
	html := page
	if raw, err := gunzip(page); err == nil {
		html = raw
	}
	for _, m := range consoleAsset.FindAllSubmatch(html, -1) {
		path := string(m[1])
		kind := strings.TrimPrefix(path[strings.LastIndex(path, "."):], ".")
		size[kind] += len(get(path))
	}
	return size
}

// gunzip is b decompressed, when it is gzip.
func gunzip(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}
