package server

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// serveOnce runs one request through the whole stack (request id, metrics
// and log line, recovery, authentication as the harness administrator,
// authorization, body limit, the handler and the JSON answer) and fails the
// benchmark on any status but want, so that it never times refusals.
func serveOnce(b *testing.B, h *harness, want int, method, path, body string, header ...string) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+h.token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != want {
		b.Fatalf("%s %s: %d %s, want %d", method, path, rec.Code, rec.Body, want)
	}
}

// BenchmarkRead is the cost of the API's conventions around a read that
// touches the store: the floor under every GET.
func BenchmarkRead(b *testing.B) {
	h := newHarness(b)
	b.ReportAllocs()
	for b.Loop() {
		serveOnce(b, h, 200, "GET", "/api/v1/setup", "")
	}
}

// BenchmarkNotFound is an unknown route answered with the error envelope.
func BenchmarkNotFound(b *testing.B) {
	h := newHarness(b)
	b.ReportAllocs()
	for b.Loop() {
		serveOnce(b, h, 404, "GET", "/api/v1/nothing/here", "")
	}
}

// BenchmarkWrite is a replicated write through HTTP: bind, a Raft commit on
// a single node (an fsync), and the answer.
func BenchmarkWrite(b *testing.B) {
	h := newHarness(b)
	b.ReportAllocs()
	for b.Loop() {
		serveOnce(b, h, 201, "POST", "/api/v1/operator/raft/probes", `{"payload_bytes":64}`, "Content-Type", "application/json")
	}
}

// BenchmarkIdempotentReplay answers a retry from the stored first answer.
func BenchmarkIdempotentReplay(b *testing.B) {
	h := newHarness(b)
	c := &counter{}
	h.srv.register(route{method: "POST", path: "/api/v1/test/things", op: "test_things", handler: c.handler, idempotent: true})
	serveOnce(b, h, 202, "POST", "/api/v1/test/things", `{}`, "Content-Type", "application/json", "Idempotency-Key", "k")
	b.ReportAllocs()
	for b.Loop() {
		serveOnce(b, h, 202, "POST", "/api/v1/test/things", `{}`, "Content-Type", "application/json", "Idempotency-Key", "k")
	}
	if c.runs.Load() != 1 {
		b.Fatalf("the action ran %d times", c.runs.Load())
	}
}
