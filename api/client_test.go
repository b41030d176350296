package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestErrorsAreDecoded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req_1")
		switch r.URL.Path {
		case "/api/v1/setup":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":"NOT_FOUND","message":"no such endpoint","remedy":"look","details":{"a":1},"request_id":"req_1"}`))
		case "/api/v1/config":
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("upstream broke\n"))
		case "/readyz":
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"not_ready"}`))
		case "/api/v1/reference":
			_, _ = w.Write([]byte(`{"version": 3}`))
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	_, err = c.Setup(ctx)
	if !IsCode(err, "NOT_FOUND") {
		t.Fatalf("Setup = %v, want NOT_FOUND", err)
	}
	e := err.(*Error)
	if e.Status != 404 || e.RequestID != "req_1" || e.Remedy != "look" || e.Details["a"] != float64(1) {
		t.Errorf("error = %+v", e)
	}
	if want := "NOT_FOUND (404): no such endpoint; look"; e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
	_, err = c.Config(ctx)
	if !IsCode(err, "INTERNAL") || err.(*Error).Message != "upstream broke" || err.(*Error).Status != 502 {
		t.Errorf("a non-envelope error = %#v", err)
	}
	if ready, err := c.Ready(ctx); ready || err != nil {
		t.Errorf("Ready = %v, %v; want false, nil", ready, err)
	}
	if _, err := c.Reference(ctx); err == nil {
		t.Error("an undecodable answer was accepted")
	}
}

func TestNewRefusesBadBaseURLs(t *testing.T) {
	for _, u := range []string{"", "localhost:8080", "ftp://x", "http://", "://"} {
		if _, err := New(u); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}

func TestTokenIsSent(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		_, _ = w.Write([]byte(`{"setup_required":false}`))
	}))
	defer srv.Close()
	c, _ := New(srv.URL, WithToken("tok_secret"))
	s, err := c.Setup(context.Background())
	if err != nil || s.SetupRequired || got != "Bearer tok_secret" {
		t.Errorf("Setup = %+v, %v; Authorization %q", s, err, got)
	}
}

// TestAppBySlug reads every page of the apps list for the slug.
func TestAppBySlug(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("cursor") == "" {
			io.WriteString(w, `{"items":[{"id":"app_1","slug":"one"}],"next_cursor":"c2"}`)
			return
		}
		io.WriteString(w, `{"items":[{"id":"app_2","slug":"two"}],"next_cursor":""}`)
	}))
	defer srv.Close()
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for slug, want := range map[string]string{"one": "app_1", "two": "app_2", "none": ""} {
		id, found, err := c.AppBySlug(context.Background(), slug)
		if err != nil || id != want || found != (want != "") {
			t.Errorf("AppBySlug(%s) = %q, %v, %v; want %q", slug, id, found, err, want)
		}
	}
}
