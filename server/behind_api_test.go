package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/schema"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

// TestANodeBehindAnswersUnavailable: while this node's store has not
// caught up with its cluster (here a real node that never learned a
// leader), every route of the table but the stateless probes answers 503
// STORE_UNAVAILABLE with Retry-After, before authentication reads the
// store: a valid token, one the node has never seen, a public route and a
// sign-in alike, never AUTH_* or NOT_FOUND. /healthz and /metrics answer,
// and /readyz says why it is not ready.
func TestANodeBehindAnswersUnavailable(t *testing.T) {
	h := newHarness(t)
	wantStatus(t, "caught up", h.send("GET", api+"/me", ""), http.StatusOK)
	behind := raftstoretest.OpenBehind(t, schema.Tables()...)
	h.srv = h.withDeps(t, func(d *Deps) { d.Ready = behind })

	unknown := ids.New(ids.Token) + "." + strings.Repeat("A", 43)
	for _, r := range h.srv.routes {
		path := r.path
		for strings.Contains(path, "{") {
			i, j := strings.Index(path, "{"), strings.Index(path, "}")
			path = path[:i] + "x" + path[j+1:]
		}
		a := h.send(r.method, path, "")
		if r.stateless {
			if a.status == http.StatusServiceUnavailable && r.path != "/readyz" {
				t.Errorf("%s %s, which reads no state: %d %s", r.method, r.path, a.status, a.body)
			}
			continue
		}
		e := wantError(t, r.method+" "+r.path, a, http.StatusServiceUnavailable, errcode.StoreUnavailable)
		if a.header.Get("Retry-After") == "" || !strings.Contains(e.Message, "caught up") {
			t.Errorf("%s %s: Retry-After %q, message %q", r.method, r.path, a.header.Get("Retry-After"), e.Message)
		}
	}
	for _, tc := range []struct {
		what   string
		method string
		path   string
		body   string
		header []string
	}{
		{"a token the node has never seen", "GET", api + "/me", "", []string{"Authorization", "Bearer " + unknown}},
		{"no credential, a public route", "GET", api + "/setup", "", []string{"Authorization", ""}},
		{"a sign-in", "POST", api + "/sessions", `{"username":"admin","password":"` + adminPassword + `"}`, []string{"Authorization", ""}},
		{"no such route", "GET", api + "/no/such/route", "", nil},
	} {
		wantError(t, tc.what, h.send(tc.method, tc.path, tc.body, tc.header...), http.StatusServiceUnavailable, errcode.StoreUnavailable)
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		wantStatus(t, path, h.send("GET", path, ""), http.StatusOK)
	}
	a := h.send("GET", "/readyz", "")
	if ready := decodeAs[healthDTO](t, a); a.status != http.StatusServiceUnavailable || ready.Status != "not_ready" || !strings.Contains(ready.Reason, "knows no leader") {
		t.Errorf("/readyz: %d %+v; want 503 not_ready, saying it knows no leader to catch up with", a.status, ready)
	}
}
