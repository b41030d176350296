package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

// TestEmailThroughTheAPI: a member cannot take another account's address
// (409 STATE_INVALID naming the field), and email_verified says who set
// an address: the administrator (true) or the person (false).
func TestEmailThroughTheAPI(t *testing.T) {
	h := newHarness(t)
	a := h.send("POST", api+"/users", `{"username":"bob","email":"bob@example.com","password":"a-long-enough-password"}`)
	wantStatus(t, "create bob", a, http.StatusCreated)
	if !strings.Contains(string(a.body), `"email_verified":true`) {
		t.Errorf("an address set by the administrator: %s", a.body)
	}
	alice := h.account(t, "alice", nil, true)
	e := wantError(t, "alice takes bob's address", h.send("PATCH", api+"/users/"+alice.userID, `{"email":"Bob@Example.com"}`, alice.bearer()...),
		http.StatusConflict, errcode.StateInvalid)
	if e.Details["field"] != "email" {
		t.Errorf("details %v, want field email", e.Details)
	}
	a = h.send("PATCH", api+"/users/"+alice.userID, `{"email":"alice@example.com"}`, alice.bearer()...)
	wantStatus(t, "alice sets her own address", a, http.StatusOK)
	if !strings.Contains(string(a.body), `"email_verified":false`) {
		t.Errorf("a self-set address: %s", a.body)
	}
	a = h.send("PATCH", api+"/users/"+alice.userID, `{"email":"alice@example.com"}`)
	if a.status != http.StatusOK || !strings.Contains(string(a.body), `"email_verified":true`) {
		t.Errorf("the administrator vouches for it: %d %s", a.status, a.body)
	}
}
