package edge

import (
	"net/http/httptest"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

// TestNextPage: a console page sends the browser on only to a path of the
// console's own origin (as a path) or to an address of one of this
// installation's apps; never to another host, however it is spelled.
func TestNextPage(t *testing.T) {
	h := newHandoffWorld(t)
	for _, tc := range []struct {
		next, want string // want "" is a refusal
	}{
		{HandoffEndpoint + "?next=http%3A%2F%2Flocalhost%3A9001%2F&state=s", HandoffEndpoint + "?next=http%3A%2F%2Flocalhost%3A9001%2F&state=s"},
		{"/", "/"},
		{"/api/v1/me", "/api/v1/me"},
		{"/a b", "/a%20b"},
		{"/%2F%2Fevil.example/", "/%2F%2Fevil.example/"}, // a path, on the console
		{"/.//evil.example/", "/.//evil.example/"},       // a path too: the browser never reads a host from it
		{"http://localhost:9001/x?y=1", "http://localhost:9001/x?y=1"},
		{"https://evil.example/", ""},
		{"http://evil.example/", ""},
		{"//evil.example", ""},
		{"//evil.example/", ""},
		{"/\\evil.example", ""},
		{"/\\/evil.example", ""},
		{"\\\\evil.example", ""},
		{"/\t/evil.example", ""},
		{"javascript:alert(1)", ""},
		{"evil.example", ""},
		{"http://user:pw@localhost:9001/", ""},
		{"http://localhost:9999/", ""}, // no app holds the port
		{"https://localhost:9001/", ""},
		{"", ""},
	} {
		got, err := h.p.NextPage(httptest.NewRequest("GET", "/login", nil), tc.next)
		switch {
		case tc.want == "" && (err == nil || errcode.CodeOf(err) != errcode.ValidInvalid):
			t.Errorf("next %q: %q, %v; want VALID_INVALID", tc.next, got, err)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("next %q: %q, %v; want %q", tc.next, got, err, tc.want)
		}
	}
}
