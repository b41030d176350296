package server

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The server's hooks for the edge: Front in front of the API on the
// listener, AppURLs for the App's url field, and the session cookie, which
// no app receives.

// withDeps rebuilds the harness's server with changed dependencies.
func (h *harness) withDeps(t *testing.T, change func(*Deps)) *Server {
	t.Helper()
	d := h.srv.d
	change(&d)
	srv, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func TestFrontServesAheadOfTheAPI(t *testing.T) {
	h := newHarness(t)
	srv := h.withDeps(t, func(d *Deps) {
		d.Front = func(api http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(r.URL.Path, "/apps/") {
					_, _ = io.WriteString(w, "the edge")
					return
				}
				api.ServeHTTP(w, r)
			})
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, 5*time.Second) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	base := "http://" + ln.Addr().String()
	get := func(path string) (int, string) {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if status, body := get("/apps/notes/"); status != 200 || body != "the edge" {
		t.Errorf("/apps/notes/: %d %q, want the edge's answer", status, body)
	}
	if status, body := get("/healthz"); status != 200 || strings.Contains(body, "the edge") {
		t.Errorf("/healthz: %d %q, want the API's answer", status, body)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/apps/x/", nil))
	if rec.Body.String() != "the edge" {
		t.Errorf("Handler() is not the fronted API: %q", rec.Body.String())
	}
}

// appAddresses is a fake edge: it serves apps at /served/<slug>/, except
// the slug "nowhere".
type appAddresses struct{}

var _ appAddresser = appAddresses{}

func (appAddresses) AppURL(r *http.Request, _, slug string) string {
	if slug == "nowhere" {
		return ""
	}
	return "http://" + r.Host + "/served/" + slug + "/"
}

func TestTheAppsURLIsWhereTheEdgeServesIt(t *testing.T) {
	h := newHarness(t)
	id := h.app(t, "notes")
	nowhere := h.send("POST", api+"/apps", jsonOf(map[string]string{"name": "Nowhere", "slug": "nowhere"}))
	if nowhere.status != http.StatusCreated || !strings.Contains(string(nowhere.body), `"url":null`) {
		t.Fatalf("create: %d %s", nowhere.status, nowhere.body)
	}
	// Without the edge, url is null.
	if a := h.send("GET", api+"/apps/"+id, ""); !strings.Contains(string(a.body), `"url":null`) {
		t.Errorf("without the edge: %s", a.body)
	}
	h.srv = h.withDeps(t, func(d *Deps) { d.AppURLs = appAddresses{} })
	type app struct {
		Slug string  `json:"slug"`
		URL  *string `json:"url"`
	}
	one := decodeAs[struct {
		App app `json:"app"`
	}](t, h.send("GET", api+"/apps/"+id, ""))
	if one.App.URL == nil || *one.App.URL != "http://example.com/served/notes/" {
		t.Errorf("GET url = %v", one.App.URL)
	}
	list := decodeAs[struct {
		Items []app `json:"items"`
	}](t, h.send("GET", api+"/apps", ""))
	for _, a := range list.Items {
		switch {
		case a.Slug == "nowhere" && a.URL != nil:
			t.Errorf("an app served nowhere has url %q", *a.URL)
		case a.Slug == "notes" && (a.URL == nil || *a.URL != "http://example.com/served/notes/"):
			t.Errorf("list url = %v", a.URL)
		}
	}
	created := decodeAs[struct {
		App app `json:"app"`
	}](t, h.send("POST", api+"/apps", jsonOf(map[string]string{"name": "More"})))
	if created.App.URL == nil || !strings.HasSuffix(*created.App.URL, "/served/"+created.App.Slug+"/") {
		t.Errorf("created url = %v", created.App.URL)
	}
}

// TestTheSessionCookieIsHostOnly: in every routing mode the session
// cookie is the console's host's alone (no Domain): no app subdomain
// receives it, whatever host the console was asked at.
func TestTheSessionCookieIsHostOnly(t *testing.T) {
	for _, tc := range []struct {
		name, mode, host string
	}{
		{"subdomain, console on the base domain", "subdomain", "apps.test:8080"},
		{"subdomain, console under it", "subdomain", "console.Apps.Test"},
		{"port", "port", "apps.test:8080"},
		{"path", "path", "apps.test:8080"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarnessWith(t, harnessOptions{adminPassword: adminPassword, env: []string{"SVC_SERVER_ROUTING_MODE=" + tc.mode, "SVC_SERVER_BASE_DOMAIN=apps.test"}})
			body, _ := json.Marshal(map[string]string{"username": "admin", "password": adminPassword})
			req := httptest.NewRequest("POST", api+"/sessions", strings.NewReader(string(body)))
			req.Host = tc.host
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			rec := httptest.NewRecorder()
			h.srv.Handler().ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("sign in: %d %s", rec.Code, rec.Body)
			}
			ck := cookieNamed(answer{header: rec.Header()}, cookieSession)
			if ck == nil || ck.Domain != "" || ck.Path != "/" {
				t.Errorf("session cookie %v, want host-only at /", ck)
			}
		})
	}
}
