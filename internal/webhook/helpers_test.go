package webhook

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/events"
)

// received is one request a test receiver got, as it arrived.
type received struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// receiver is a real HTTP server on loopback that records what it gets and
// answers with answer (204 when nil).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(w http.ResponseWriter, r *http.Request, body []byte)
}

func newReceiver(t testing.TB, answer func(w http.ResponseWriter, r *http.Request, body []byte)) *receiver {
	t.Helper()
	rc := &receiver{answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, received{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		rc.mu.Unlock()
		if rc.answer != nil {
			rc.answer(w, r, body)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// requests returns what the receiver got so far.
func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// open is a Sender that may reach loopback (the receivers of these tests).
func open(t testing.TB, o Options) *Sender {
	t.Helper()
	o.AllowPrivate = func() bool { return true }
	s := NewSender(o)
	t.Cleanup(func() { s.closeIdle() })
	return s
}

// closeIdle closes the Sender's idle connections (tests end cleanly).
func (s *Sender) closeIdle() {
	s.strict.CloseIdleConnections()
	s.open.CloseIdleConnections()
}

// testEvent is the sample event with another ID, time, app name (with
// characters JSON and HTML escape) and data.
func testEvent(id string) *events.Event {
	ev := sampleEvent()
	ev.ID = id
	ev.OccurredAt = time.Date(2025, 6, 7, 8, 9, 10, 123000000, time.UTC)
	ev.App.Name, ev.App.Slug = "Shop <&> \"front\"", "shop"
	ev.Data["trigger"], ev.Data["message"] = "push", "step 3/7: exit status 1"
	return ev
}

// installEvent is an install event (no app).
func installEvent(id string) *events.Event {
	return &events.Event{
		ID:         id,
		Type:       "token.created",
		OccurredAt: time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC),
		Actor:      events.Actor{Kind: "user", ID: "usr_01JB4R3Q8S2W5Y7Z9A1C3E5G7K"},
		Data:       map[string]any{"name": "ci", "kind": "delegated", "target_kind": "token", "target_id": "tok_1"},
	}
}

// within fails the test when f does not return within d.
func within(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not finish within %s", what, d)
	}
}

var bg = context.Background()
