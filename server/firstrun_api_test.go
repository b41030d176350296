package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

// TestSetupClosedWhileTheAdminPasswordIsPending: from the moment a node
// knows it is to create the administrator from SVC_ADMIN_PASSWORD (before
// the account is written, as on a cluster node waiting for its leader), GET
// /setup says setup_required false, POST /setup is refused, and /readyz
// says not ready; once FirstRun is done the node is ready and admin signs
// in.
func TestSetupClosedWhileTheAdminPasswordIsPending(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{}) // no account yet
	if !strings.Contains(string(h.send("GET", api+"/setup", "").body), `"setup_required":true`) {
		t.Fatal("a fresh installation does not wait for setup")
	}
	h.ident.ExpectAdmin()

	a := h.send("GET", api+"/setup", "")
	if a.status != http.StatusOK || !strings.Contains(string(a.body), `"setup_required":false`) {
		t.Errorf("GET /setup while the administrator is pending: %d %s", a.status, a.body)
	}
	wantError(t, "POST /setup while the administrator is pending",
		h.send("POST", api+"/setup", `{"username":"claimer","display_name":"C","password":"claimer-password-123"}`), http.StatusConflict, errcode.StateInvalid)
	a = h.send("GET", "/readyz", "")
	if a.status != http.StatusServiceUnavailable || !strings.Contains(string(a.body), "SVC_ADMIN_PASSWORD") {
		t.Errorf("/readyz while the administrator is pending: %d %s", a.status, a.body)
	}
	if !strings.Contains(h.logs.String(), "setup refused") {
		t.Error("the refused setup is not logged")
	}

	if _, err := h.ident.FirstRun(context.Background(), adminPassword); err != nil {
		t.Fatal(err)
	}
	if a = h.send("GET", "/readyz", ""); a.status != http.StatusOK {
		t.Errorf("/readyz once the administrator exists: %d %s", a.status, a.body)
	}
	wantStatus(t, "admin signs in", h.send("POST", api+"/sessions", `{"username":"admin","password":"`+adminPassword+`"}`), http.StatusOK)
	wantError(t, "POST /setup once the administrator exists",
		h.send("POST", api+"/setup", `{"username":"claimer","display_name":"C","password":"claimer-password-123"}`), http.StatusConflict, errcode.StateInvalid)
}
