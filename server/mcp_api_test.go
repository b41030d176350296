package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

// TestMCPTakesABearerTokenOnly: /mcp answers 401 with a Bearer challenge
// to a request without a credential, with a bad token, and with a
// browser's session cookie alone (its tools would have no token to call
// with); a valid token passes the gate (this harness has no tool server
// behind it: NOT_FOUND).
func TestMCPTakesABearerTokenOnly(t *testing.T) {
	h := newHarness(t)
	_, cookie := h.signIn("admin", adminPassword)
	if cookie == "" {
		t.Fatal("no session cookie")
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
	for _, tc := range []struct {
		name   string
		header []string
		status int
		code   errcode.Code
	}{
		{"no credential", []string{"Authorization", ""}, http.StatusUnauthorized, errcode.AuthRequired},
		{"a bad token", []string{"Authorization", "Bearer tok_nope.nope"}, http.StatusUnauthorized, errcode.AuthTokenInvalid},
		{"a session cookie", withCookie(cookie), http.StatusUnauthorized, errcode.AuthRequired},
		{"a token", nil, http.StatusNotFound, errcode.NotFound},
	} {
		for _, method := range []string{"POST", "GET", "DELETE"} {
			a := h.do(method, "/mcp", strings.NewReader(body), append([]string{"Content-Type", "application/json"}, tc.header...)...)
			challenge := a.header.Get("WWW-Authenticate")
			if a.status != tc.status || codeOf(a) != tc.code || (tc.status == http.StatusUnauthorized) != strings.HasPrefix(challenge, "Bearer") {
				t.Errorf("%s /mcp with %s: %d %s, WWW-Authenticate %q; want %d %s", method, tc.name, a.status, a.body, challenge, tc.status, tc.code)
			}
		}
	}
}
