package edge

import (
	"net/http"

	"testing"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/identity"
)

// TestOnlyAVerifiedEmailIsVouchedFor: the assertion carries email and
// email_verified as svc knows them; the unsigned X-Svc-Email only a
// verified address. A member who sets their own address (another user's
// is refused anyway) is not vouched for.
func TestOnlyAVerifiedEmailIsVouchedFor(t *testing.T) {
	w, alice, _, _, srv := sharedApp(t, edgeOpts{})
	rep := open(t, srv+"/", bearer(alice.token))
	if rep.Claims["email"] != "alice@example.test" || rep.Claims["email_verified"] != true || http.Header(rep.Header).Get(HeaderEmail) != "alice@example.test" {
		t.Errorf("an address the administrator set: claims %v, X-Svc-Email %q", rep.Claims, http.Header(rep.Header).Get(HeaderEmail))
	}

	me := authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: alice.user.ID, UserID: alice.user.ID}}
	addr := "ceo@example.test"
	if _, err := w.ident.UpdateUser(bg, me, alice.user.ID, identity.UserPatch{Email: &addr}); err != nil {
		t.Fatal(err)
	}
	rep = open(t, srv+"/", bearer(alice.token))
	if rep.Claims["email"] != addr || rep.Claims["email_verified"] != false {
		t.Errorf("a self-set address: claims %v, want email %s and email_verified false", rep.Claims, addr)
	}
	if v := http.Header(rep.Header).Values(HeaderEmail); len(v) != 0 {
		t.Errorf("X-Svc-Email %q for an unverified address, want none", v)
	}
}
