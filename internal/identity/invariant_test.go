package identity

import (
	"fmt"
	"sync"
	"testing"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
)

// wantProtected checks the refusal of a change that would leave nobody able
// to manage accounts: STATE_INVALID naming install.users.manage.
func wantProtected(t *testing.T, what string, err error) {
	t.Helper()
	if ce := wantCode(t, what, err, errcode.StateInvalid); ce != nil && ce.Details["protected"] != string(authz.InstallUsersManage) {
		t.Errorf("%s: details = %v, want protected %s", what, ce.Details, authz.InstallUsersManage)
	}
}

// world is an installation whose only account manager is arranged by a
// scenario; carol is an ordinary account that remedies make a manager.
type world struct {
	e          *env
	a          User // the first administrator
	bob, carol User
	g          Group      // a group, in the group scenarios
	r          authz.Role // a custom role, in the custom-role scenarios
}

func (w *world) managers() int { return len(accountManagers(w.e.store.Read(), 10)) }

type scenario struct {
	name  string
	build func(t *testing.T, w *world)
	ops   map[string]func(w *world) error
}

func demote(id string) func(w *world) error {
	return func(w *world) error { _, err := w.e.svc.SetUserRole(bg, id, nil); return err }
}

func suspendOp(pick func(w *world) string) func(w *world) error {
	return func(w *world) error {
		id := pick(w)
		_, err := w.e.svc.UpdateUser(bg, authz.Caller{Install: authz.SetOf(authz.All()...)}, id, UserPatch{Status: ptr(StatusSuspended)})
		return err
	}
}

var invariantScenarios = []scenario{
	{
		name:  "the first administrator alone",
		build: func(*testing.T, *world) {},
		ops: map[string]func(w *world) error{
			"remove the admin role":  func(w *world) error { return demote(w.a.ID)(w) },
			"change role to auditor": func(w *world) error { _, err := w.e.svc.SetUserRole(bg, w.a.ID, ptr(authz.RoleAuditor)); return err },
			"suspend the admin":      suspendOp(func(w *world) string { return w.a.ID }),
			"delete the admin":       func(w *world) error { return w.e.svc.DeleteUser(bg, w.a.ID) },
		},
	},
	{
		name: "only a group gives the admin role",
		build: func(t *testing.T, w *world) {
			w.g = w.e.mkGroup(t, "admins", ptr(authz.RoleAdmin), w.bob.ID)
			_, err := w.e.svc.SetUserRole(bg, w.a.ID, nil)
			must(t, "demote the first admin once the group manages", err)
		},
		ops: map[string]func(w *world) error{
			"remove the group's role": func(w *world) error { _, err := w.e.svc.SetGroupRole(bg, w.g.ID, nil); return err },
			"change the group's role": func(w *world) error { _, err := w.e.svc.SetGroupRole(bg, w.g.ID, ptr(authz.RoleAuditor)); return err },
			"remove the last member":  func(w *world) error { _, err := w.e.svc.RemoveMember(bg, w.g.ID, w.bob.ID); return err },
			"set the members to none": func(w *world) error { _, err := w.e.svc.SetMembers(bg, w.g.ID, nil); return err },
			"delete the group":        func(w *world) error { return w.e.svc.DeleteGroup(bg, w.g.ID) },
			"suspend the member":      suspendOp(func(w *world) string { return w.bob.ID }),
			"delete the member":       func(w *world) error { return w.e.svc.DeleteUser(bg, w.bob.ID) },
			"suspend the member (as bob)": func(w *world) error {
				_, err := w.e.svc.UpdateUser(bg, w.e.userCaller(w.bob.ID), w.bob.ID, UserPatch{Status: ptr(StatusSuspended)})
				return err
			},
		},
	},
	{
		name: "only a custom role held by an account",
		build: func(t *testing.T, w *world) {
			_, err := w.e.svc.SetUserRole(bg, w.bob.ID, &w.r.ID)
			must(t, "give bob the custom role", err)
			_, err = w.e.svc.SetUserRole(bg, w.a.ID, nil)
			must(t, "demote the first admin", err)
		},
		ops: map[string]func(w *world) error{
			"delete the custom role": func(w *world) error { return w.e.svc.DeleteRole(bg, w.r.ID) },
			"remove bob's role":      func(w *world) error { return demote(w.bob.ID)(w) },
			"change bob's role":      func(w *world) error { _, err := w.e.svc.SetUserRole(bg, w.bob.ID, ptr(authz.RoleMember)); return err },
			"suspend bob":            suspendOp(func(w *world) string { return w.bob.ID }),
			"delete bob":             func(w *world) error { return w.e.svc.DeleteUser(bg, w.bob.ID) },
		},
	},
	{
		name: "only a custom role on a group",
		build: func(t *testing.T, w *world) {
			w.g = w.e.mkGroup(t, "managers", &w.r.ID, w.bob.ID)
			_, err := w.e.svc.SetUserRole(bg, w.a.ID, nil)
			must(t, "demote the first admin", err)
		},
		ops: map[string]func(w *world) error{
			"delete the custom role":  func(w *world) error { return w.e.svc.DeleteRole(bg, w.r.ID) },
			"remove the group's role": func(w *world) error { _, err := w.e.svc.SetGroupRole(bg, w.g.ID, nil); return err },
			"remove the last member":  func(w *world) error { _, err := w.e.svc.RemoveMember(bg, w.g.ID, w.bob.ID); return err },
			"delete the group":        func(w *world) error { return w.e.svc.DeleteGroup(bg, w.g.ID) },
			"delete bob":              func(w *world) error { return w.e.svc.DeleteUser(bg, w.bob.ID) },
		},
	},
}

// remedies make carol able to manage accounts by one path each; "suspended
// admin" does not, since only active accounts count.
var invariantRemedies = []struct {
	name  string
	works bool
	apply func(t *testing.T, w *world)
}{
	{"another admin", true, func(t *testing.T, w *world) {
		_, err := w.e.svc.SetUserRole(bg, w.carol.ID, ptr(authz.RoleAdmin))
		must(t, "make carol admin", err)
	}},
	{"another group with the admin role", true, func(t *testing.T, w *world) {
		w.e.mkGroup(t, "second-admins", ptr(authz.RoleAdmin), w.carol.ID)
	}},
	{"another custom role with install.users.manage", true, func(t *testing.T, w *world) {
		r, err := w.e.svc.CreateRole(bg, "second-managers", authz.ScopeInstall, []authz.Verb{authz.InstallUsersManage, authz.InstallView})
		must(t, "second custom role", err)
		_, err = w.e.svc.SetUserRole(bg, w.carol.ID, &r.ID)
		must(t, "give carol the second custom role", err)
	}},
	{"a suspended admin", false, func(t *testing.T, w *world) {
		_, err := w.e.svc.SetUserRole(bg, w.carol.ID, ptr(authz.RoleAdmin))
		must(t, "make carol admin", err)
		_, err = w.e.svc.UpdateUser(bg, w.e.userCaller(w.carol.ID), w.carol.ID, UserPatch{Status: ptr(StatusSuspended)})
		must(t, "carol suspends herself", err)
	}},
	{"an account with install.tokens.manage only", false, func(t *testing.T, w *world) {
		r, err := w.e.svc.CreateRole(bg, "token-managers", authz.ScopeInstall, []authz.Verb{authz.InstallTokensManage, authz.InstallView})
		must(t, "role", err)
		_, err = w.e.svc.SetUserRole(bg, w.carol.ID, &r.ID)
		must(t, "give carol the role", err)
	}},
}

func newWorld(t *testing.T) *world {
	t.Helper()
	e := newTestEnv(t)
	a, _ := e.setup(t)
	w := &world{e: e, a: a, bob: e.mkUser(t, "bob"), carol: e.mkUser(t, "carol")}
	r, err := e.svc.CreateRole(bg, "account-managers", authz.ScopeInstall, []authz.Verb{authz.InstallUsersManage})
	must(t, "custom role", err)
	w.r = r
	return w
}

func TestSomeoneAlwaysRemainsAbleToManageAccounts(t *testing.T) {
	for _, sc := range invariantScenarios {
		for opName, op := range sc.ops {
			t.Run(sc.name+"/"+opName, func(t *testing.T) {
				t.Parallel()
				// Refused as things stand.
				w := newWorld(t)
				sc.build(t, w)
				if n := w.managers(); n != 1 {
					t.Fatalf("scenario leaves %d account managers, want 1", n)
				}
				m := w.e.mark()
				wantProtected(t, "refused", op(w))
				if w.e.mark() != m {
					t.Error("a refused change wrote something")
				}
				if w.managers() != 1 {
					t.Error("nobody can manage accounts after a refused change")
				}
				// Allowed once another active account manages accounts.
				for _, rem := range invariantRemedies {
					t.Run(rem.name, func(t *testing.T) {
						t.Parallel()
						w := newWorld(t)
						sc.build(t, w)
						rem.apply(t, w)
						err := op(w)
						if !rem.works {
							wantProtected(t, "still refused", err)
							return
						}
						if err != nil {
							t.Fatalf("refused although carol manages accounts: %v", err)
						}
						if w.managers() < 1 {
							t.Error("nobody can manage accounts")
						}
					})
				}
			})
		}
	}
}

// Deleting the only account (the first administrator, nobody else) must be
// refused like deleting the last administrator: it would leave nobody able
// to manage accounts, and would even open setup to anyone again.
func TestTheOnlyAccountCannotBeDeleted(t *testing.T) {
	e := newTestEnv(t)
	a, si := e.setup(t)
	// Suspending or demoting it: refused.
	_, err := e.svc.SetUserRole(bg, a.ID, nil)
	wantProtected(t, "demote the only account", err)
	_, err = e.svc.UpdateUser(bg, e.userCaller(a.ID), a.ID, UserPatch{Status: ptr(StatusSuspended)})
	wantProtected(t, "suspend the only account", err)
	// Deleting it: refused as well.
	wantProtected(t, "delete the only account", e.svc.DeleteUser(bg, a.ID))
	if !e.userExists(a.ID) {
		t.Error("the only account was deleted")
	}
	if e.svc.SetupRequired() {
		t.Error("setup is open again: anyone may now create an administrator")
	}
	if _, err := e.svc.Authenticate(bg, "", si.Cookie); err != nil {
		t.Errorf("the administrator's session: %v", err)
	}
}

// A fresh installation holds the invariant trivially, but its first account
// must already manage accounts: an account without a role cannot be the
// first.
func TestFirstAccountMustManageAccounts(t *testing.T) {
	e := newTestEnv(t)
	_, _, err := e.svc.CreateUser(bg, NewUser{Username: "bob", Password: testPW})
	wantProtected(t, "an ordinary account as the first", err)
	if !e.svc.SetupRequired() {
		t.Error("setup no longer required")
	}
}

// Two administrators demoting each other at the same moment: both read a
// state with two administrators, and the store's FSM lets exactly one
// through.
func TestConcurrentDemotionsLeaveOneAdministrator(t *testing.T) {
	type op func(s *Service, id string) error
	ops := map[string]op{
		"demote": func(s *Service, id string) error { _, err := s.SetUserRole(bg, id, nil); return err },
		"delete": func(s *Service, id string) error { return s.DeleteUser(bg, id) },
		"suspend": func(s *Service, id string) error {
			_, err := s.UpdateUser(bg, authz.Caller{Install: authz.SetOf(authz.All()...)}, id, UserPatch{Status: ptr(StatusSuspended)})
			return err
		},
	}
	for n1, op1 := range ops {
		for n2, op2 := range ops {
			t.Run(n1+"+"+n2, func(t *testing.T) {
				e := newTestEnv(t)
				a, _ := e.setup(t)
				b := e.mkUserWithRole(t, "b", authz.RoleAdmin)
				e.mkUser(t, "bystander")
				s := e.withService(t, Deps{Store: newBarrierStore(e.store, 2)})
				var wg sync.WaitGroup
				errs := make([]error, 2)
				for i, f := range []func() error{func() error { return op1(s, a.ID) }, func() error { return op2(s, b.ID) }} {
					wg.Add(1)
					go func() { defer wg.Done(); errs[i] = f() }()
				}
				wg.Wait()
				ok := 0
				for i, err := range errs {
					if err == nil {
						ok++
					} else {
						wantProtected(t, fmt.Sprintf("change %d", i), err)
					}
				}
				if ok != 1 {
					t.Errorf("%d of the two changes succeeded, want exactly 1 (errors %v)", ok, errs)
				}
				if n := len(accountManagers(e.store.Read(), 10)); n != 1 {
					t.Errorf("%d account managers remain, want 1", n)
				}
			})
		}
	}
}

// The same race without forcing the interleaving, many times.
func TestConcurrentDemotionsRepeated(t *testing.T) {
	e := newTestEnv(t)
	a, _ := e.setup(t)
	b := e.mkUserWithRole(t, "b", authz.RoleAdmin)
	for round := range 20 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, id := range []string{a.ID, b.ID} {
			wg.Add(1)
			go func() { defer wg.Done(); _, errs[i] = e.svc.SetUserRole(bg, id, nil) }()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			} else {
				wantProtected(t, fmt.Sprintf("round %d", round), err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d demotions succeeded, want 1", round, ok)
		}
		for _, id := range []string{a.ID, b.ID} {
			if _, err := e.svc.SetUserRole(bg, id, ptr(authz.RoleAdmin)); err != nil {
				t.Fatal(err)
			}
		}
	}
}
