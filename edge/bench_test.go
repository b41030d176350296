package edge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/authz"
)

// The edge's hot path over real HTTP on loopback: a client with pooled
// connections, the edge (a token authenticated, the grant checked, the
// assertion from the signer's cache, headers rewritten), and a workload
// answering "ok". BenchmarkBareProxy is a tuned httputil.ReverseProxy
// doing nothing else, and BenchmarkDirect the workload alone, for
// comparison (make bench compares them under wrk).

// okUpstream is a workload that answers 2 bytes.
func okUpstream(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	b.Cleanup(srv.Close)
	return srv
}

func benchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, DisableCompression: true}}
}

func runBench(b *testing.B, url string, opts ...reqOpt) {
	client := benchClient()
	b.Cleanup(client.CloseIdleConnections)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, _ := http.NewRequest("GET", url, nil)
		for _, o := range opts {
			o(req)
		}
		for pb.Next() {
			res, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Errorf("status %d", res.StatusCode)
				return
			}
		}
	})
}

// benchEdge serves alice's app notes, whose workload answers "ok", through
// the edge in port mode.
func benchEdge(b *testing.B) (w *world, alice *person, app *testApp, url string) {
	w = newWorld(b)
	alice = w.newPerson("alice")
	app = w.addApp("notes", 9001)
	w.grant(app.id, authz.KindUser, alice.user.ID)
	up := okUpstream(b)
	w.setRoute(app, Route{AppID: app.id, Slug: app.slug, Port: 9001, Upstream: strings.TrimPrefix(up.URL, "http://")})
	srv := httptest.NewServer(w.edge(edgeOpts{}).PortHandler(9001))
	b.Cleanup(srv.Close)
	return w, alice, app, srv.URL + "/"
}

func BenchmarkEdgeProxy(b *testing.B) {
	_, alice, _, url := benchEdge(b)
	runBench(b, url, bearer(alice.token), header("Cookie", "theme=dark; svc_session=x"))
}

// BenchmarkEdgeProxyAppCookie is a browser's request: the app cookie a
// handoff gave (its row, its console session and account read), same-origin
// fetch metadata checked, the console's own cookie stripped.
func BenchmarkEdgeProxyAppCookie(b *testing.B) {
	w, alice, app, url := benchEdge(b)
	runBench(b, url, header("Cookie", "theme=dark; svc_session=x; "+appCookie(app.id)+"="+w.appCookieFor(alice, app.id)),
		header("Sec-Fetch-Site", "same-origin"), header("Sec-Fetch-Mode", "cors"), header("Sec-Fetch-Dest", "empty"))
}

func BenchmarkBareProxy(b *testing.B) {
	up := okUpstream(b)
	target, _ := url.Parse(up.URL)
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target); pr.SetXForwarded() },
		Transport:     newTransport(Config{ResponseHeaderTimeout: DefaultResponseHeaderTimeout, DialTimeout: DefaultDialTimeout}),
		FlushInterval: -1,
		BufferPool:    bufferPool{},
	}
	srv := httptest.NewServer(rp)
	b.Cleanup(srv.Close)
	runBench(b, srv.URL+"/")
}

func BenchmarkDirect(b *testing.B) {
	runBench(b, okUpstream(b).URL+"/")
}
