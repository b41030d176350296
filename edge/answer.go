package edge

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
)

// The edge's own answers (refusals, failures of the upstream) use the
// API's error envelope, so that a client reads one shape whichever side
// refused it. The edge cannot import the server (which owns the envelope
// for the API), so it writes the same JSON here; the two must agree field
// for field (edge/answer_test.go pins the shape).

// envelope is the body of every error answer: the API's fields.
type envelope struct {
	Code      errcode.Code   `json:"code"`
	Message   string         `json:"message"`
	Remedy    string         `json:"remedy,omitempty"`
	Details   map[string]any `json:"details"`
	RequestID string         `json:"request_id"`
}

// headerRequestID carries the request id of the edge's own answers (the
// app's answers carry whatever the app sets).
const headerRequestID = "X-Request-Id"

// writeError answers e in the envelope, with a fresh request id, and
// returns the id (for the log line).
func writeError(w http.ResponseWriter, r *http.Request, e *errcode.Error) string {
	id := ids.New(ids.Request)
	h := w.Header()
	h.Set(headerRequestID, id)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	w.WriteHeader(e.Status())
	if r.Method != http.MethodHead {
		_ = json.NewEncoder(w).Encode(envelope{Code: e.Code, Message: e.Message, Remedy: e.Remedy, Details: details, RequestID: id})
	}
	return id
}

// redirectTo sends a browser elsewhere (the console's handoff, an app's
// own address) with status (a 303 after which the browser GETs, or a 308
// that keeps the method).
func redirectTo(w http.ResponseWriter, to string, status int) {
	h := w.Header()
	h.Set(headerRequestID, ids.New(ids.Request))
	h.Set("Cache-Control", "no-store")
	h.Set("Location", to)
	w.WriteHeader(status)
}
