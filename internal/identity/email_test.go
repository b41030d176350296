package identity

import (
	"fmt"
	"sync"
	"testing"

	"github.com/svchost/svc/internal/errcode"
)

// TestEmailUniqueAndVerified: an address is no other account's, in any
// case; an administrator's address is verified, a person's own is not, and
// changing it resets the mark.
func TestEmailUniqueAndVerified(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	ac := e.userCaller(admin.ID)
	bob, _, err := e.svc.CreateUser(bg, NewUser{Username: "bob", Email: "bob@example.com", Password: testPW})
	must(t, "create bob", err)
	if !bob.EmailVerified {
		t.Error("an address set by whoever creates accounts is not verified")
	}
	alice := e.mkUser(t, "alice")
	me := e.userCaller(alice.ID)

	for _, claim := range []string{"bob@example.com", "BOB@Example.COM"} {
		_, err := e.svc.UpdateUser(bg, me, alice.ID, UserPatch{Email: ptr(claim)})
		if ce := wantCode(t, "alice claims "+claim, err, errcode.StateInvalid); ce != nil && ce.Details["field"] != "email" {
			t.Errorf("details %v, want field email", ce.Details)
		}
	}
	_, _, err = e.svc.CreateUser(bg, NewUser{Username: "carol", Email: "Bob@example.com", Password: testPW})
	wantCode(t, "a new account with bob's address", err, errcode.StateInvalid)

	u, err := e.svc.UpdateUser(bg, me, alice.ID, UserPatch{Email: ptr("alice@example.com")})
	must(t, "alice sets her own address", err)
	if u.EmailVerified || e.getUser(t, alice.ID).EmailVerified {
		t.Error("a self-set address is verified")
	}
	u, err = e.svc.UpdateUser(bg, ac, alice.ID, UserPatch{Email: ptr("alice@example.com")})
	must(t, "the administrator vouches for alice's address", err)
	if !u.EmailVerified || !e.getUser(t, alice.ID).EmailVerified {
		t.Error("an address an administrator set again is not verified")
	}
	u, err = e.svc.UpdateUser(bg, me, alice.ID, UserPatch{Email: ptr("Alice@example.com")})
	must(t, "alice changes the case of her address", err)
	if u.EmailVerified {
		t.Error("an address the person changed stays verified")
	}
	u, err = e.svc.UpdateUser(bg, ac, alice.ID, UserPatch{Email: ptr("")})
	must(t, "the administrator clears it", err)
	if u.EmailVerified || u.Email != "" {
		t.Errorf("cleared: %q verified %v", u.Email, u.EmailVerified)
	}
	// Bob keeps his address and its mark through other changes.
	u, err = e.svc.UpdateUser(bg, e.userCaller(bob.ID), bob.ID, UserPatch{DisplayName: ptr("Robert")})
	must(t, "bob renames himself", err)
	if u.Email != "bob@example.com" || !u.EmailVerified {
		t.Errorf("bob after a rename: %q verified %v", u.Email, u.EmailVerified)
	}
}

// TestEmailRace: accounts racing for one address (in either case):
// exactly one gets it.
func TestEmailRace(t *testing.T) {
	e := newTestEnv(t)
	e.setup(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, refused := 0, 0
	for i := range 8 {
		u := e.mkUser(t, fmt.Sprintf("racer%d", i))
		wg.Go(func() {
			_, err := e.svc.UpdateUser(bg, e.userCaller(u.ID), u.ID, UserPatch{Email: ptr([]string{"target@example.com", "TARGET@Example.com"}[i%2])})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errcode.CodeOf(err) == errcode.StateInvalid:
				refused++
			default:
				t.Errorf("racer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if won != 1 || refused != 7 {
		t.Errorf("%d won and %d were refused, want 1 and 7", won, refused)
	}
}
