package edge

import (
	"net/http"
	"testing"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/raftstore/raftstoretest"
)

// TestANodeBehindAnswersUnavailable: an edge whose store has not caught up
// with the cluster (a real node that never learned a leader: it holds none
// of the grants) answers every request 503 STORE_UNAVAILABLE with
// Retry-After, a valid token, an app cookie, a browser not signed in and
// a handoff redemption alike: never AUTH_*, PERM_* or NOT_FOUND for what it
// has not seen, and nothing reaches the app. Over the caught-up store the
// same token opens the app.
func TestANodeBehindAnswersUnavailable(t *testing.T) {
	w := newWorld(t)
	alice := w.newPerson("alice")
	notes := w.addApp("notes", 9001)
	w.grant(notes.id, authz.KindUser, alice.user.ID)
	behind := raftstoretest.OpenBehind(t, tables()...)
	url := serve(t, w.edge(edgeOpts{cfg: Config{ConsolePort: 8080}, store: behind}).PortHandler(9001))

	for _, tc := range []struct {
		name string
		path string
		opts []reqOpt
	}{
		{"a valid token", "/", []reqOpt{bearer(alice.token)}},
		{"a valid app cookie", "/", []reqOpt{w.as(alice, notes)}},
		{"a token the node has never seen", "/", []reqOpt{bearer("tok_01JAAAAAAAAAAAAAAAAAAAAAAA." + "x")}},
		{"a browser not signed in", "/page", []reqOpt{browser(), header("Sec-Fetch-Mode", "navigate"), header("Sec-Fetch-Dest", "document")}},
		{"a handoff redemption", "/.svc/handoff?code=x&next=" + "http%3A%2F%2Flocalhost%3A9001%2F", []reqOpt{browser()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := do(t, http.MethodGet, url+tc.path, tc.opts...)
			refused(t, res, body, http.StatusServiceUnavailable, "STORE_UNAVAILABLE")
			if res.Header.Get("Retry-After") == "" {
				t.Errorf("no Retry-After: %v", res.Header)
			}
		})
	}
	if n := notes.hits.Load(); n != 0 {
		t.Errorf("the app was reached %d times through a node behind", n)
	}

	caughtUp := serve(t, w.edge(edgeOpts{cfg: Config{ConsolePort: 8080}}).PortHandler(9001))
	res, body := do(t, http.MethodGet, caughtUp+"/", bearer(alice.token))
	if rep := reached(t, res, body); rep.Claims["sub"] != alice.user.ID {
		t.Errorf("over the caught-up store the token reached the app as %v", rep.Claims["sub"])
	}
}
