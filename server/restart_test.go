package server

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
)

func TestRestartAnswersThenRestarts(t *testing.T) {
	h := newHarness(t)
	started := time.Date(2025, 3, 1, 12, 0, 0, 123456000, time.UTC)
	h.srv.d.StartedAt = started
	rec := httptest.NewRecorder()
	var calls atomic.Int32
	h.srv.d.Restart = func() {
		calls.Add(1)
		if !rec.Flushed || rec.Body.Len() == 0 {
			t.Errorf("Restart was called before the answer was written and flushed (flushed %v, %d bytes)", rec.Flushed, rec.Body.Len())
		}
	}
	before := h.auditEntries(t)
	req := httptest.NewRequest(http.MethodPost, api+"/restart", nil)
	req.Header.Set("Authorization", "Bearer "+h.token)
	h.srv.Handler().ServeHTTP(rec, req)

	if rec.Code != http.StatusAccepted {
		t.Fatalf("POST /restart: %d %s, want 202", rec.Code, rec.Body)
	}
	var got restartDTO
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || !got.Restarting || !got.StartedAt.Equal(started) {
		t.Errorf("answer %s (%v), want restarting and started_at %s", rec.Body, err, started.Format(time.RFC3339Nano))
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("Restart called %d times, want 1", n)
	}
	entries := newEntries(before, h.auditEntries(t))
	if len(entries) != 1 || entries[0].Action != "server.restart" || entries[0].TargetID == nil || *entries[0].TargetID != "n1" {
		t.Errorf("audit entries %v, want one server.restart on node n1", actionsOf(entries))
	} else if id := rec.Header().Get("X-Request-Id"); entries[0].RequestID != id {
		t.Errorf("the entry's request_id %q is not the answer's %q", entries[0].RequestID, id)
	}

	health := decodeAs[healthDTO](t, h.do(http.MethodGet, "/healthz", nil))
	if health.StartedAt != started.Format(time.RFC3339Nano) {
		t.Errorf("/healthz started_at = %q, want %q", health.StartedAt, started.Format(time.RFC3339Nano))
	}
	if ready := decodeAs[healthDTO](t, h.do(http.MethodGet, "/readyz", nil)); ready.StartedAt != "" {
		t.Errorf("/readyz carries started_at %q", ready.StartedAt)
	}
}

func TestRestartRefusalsDoNotRestart(t *testing.T) {
	h := newHarness(t)
	var calls atomic.Int32
	h.srv.d.Restart = func() { calls.Add(1) }

	viewer := h.holder(t, authz.InstallView)
	wantError(t, "install.view only", h.send(http.MethodPost, api+"/restart", "", viewer.bearer()...), http.StatusForbidden, errcode.PermVerbRequired)
	wantError(t, "anonymous", h.send(http.MethodPost, api+"/restart", "", "Authorization", ""), http.StatusUnauthorized, errcode.AuthRequired)
	// Nothing is restarted that could not be recorded.
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	if a := h.send(http.MethodPost, api+"/restart", ""); a.status < 500 {
		t.Errorf("with the store closed: %d %s, want a server error", a.status, a.body)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("Restart called %d times by refused or failed requests", n)
	}
}

// The caller gets the whole answer even though Restart (as the process
// wires it) begins the server's shutdown at once: the drain waits for the
// handler that asked.
func TestRestartAnswerOutlivesTheDrain(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.srv.d.Restart = cancel
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- h.srv.Serve(ctx, ln, 10*time.Second) }()

	req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+api+"/restart", nil)
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /restart: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /restart: %d %s (%v)", resp.StatusCode, body, err)
	}
	var got restartDTO
	if err := json.Unmarshal(body, &got); err != nil || !got.Restarting {
		t.Errorf("answer %s: %v", body, err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop after the restart was asked for")
	}
}
