package identity

import (
	"crypto/sha256"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
)

var tokenCredRE = regexp.MustCompile(`^tok_[0-9A-HJKMNP-TV-Z]{26}\.[A-Za-z0-9_-]{43}$`)

func TestDelegatedTokenActsAsItsOwner(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	bob := e.mkUserWithRole(t, "bob", authz.RoleMember)

	for _, owner := range []User{bob, admin} {
		tok, cred := e.mkToken(t, e.userCaller(owner.ID), TokenDelegated, "laptop")
		if tok.Kind != TokenDelegated || tok.OwnerID != owner.ID || tok.Agent {
			t.Errorf("token = %+v", tok)
		}
		a, err := e.svc.Authenticate(bg, cred, "")
		must(t, "authenticate "+owner.Username+"'s token", err)
		want := authz.Principal{Kind: authz.KindToken, ID: tok.ID, UserID: owner.ID}
		if a.Principal != want {
			t.Errorf("principal = %+v, want %+v", a.Principal, want)
		}
		if a.User == nil || a.User.ID != owner.ID || a.Token == nil || a.Token.ID != tok.ID {
			t.Errorf("authenticated = %+v", a)
		}
		got, own := e.verbsOf(a.Principal), e.verbsOf(userPrincipal(owner.ID))
		if got != own || got == 0 {
			t.Errorf("%s's token holds %v, the account %v", owner.Username, got.Verbs(), own.Verbs())
		}
	}
	// Bounded by the owner's live grants: a role change shows at once.
	tok, cred := e.mkToken(t, e.userCaller(bob.ID), TokenDelegated, "live")
	_, err := e.svc.SetUserRole(bg, bob.ID, ptr(authz.RoleAuditor))
	must(t, "make bob auditor", err)
	a, err := e.svc.Authenticate(bg, cred, "")
	must(t, "authenticate", err)
	if v := e.verbsOf(a.Principal); !v.Has(authz.InstallView) || v.Has(authz.AppCreate) {
		t.Errorf("token %s holds %v after its owner became auditor", tok.ID, v.Verbs())
	}
}

func TestServiceTokenIsItsOwnPrincipal(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	tok, cred := e.mkToken(t, e.userCaller(admin.ID), TokenService, "ci")
	if tok.Kind != TokenService || tok.OwnerID != admin.ID {
		t.Errorf("service token = %+v", tok)
	}
	a, err := e.svc.Authenticate(bg, cred, "")
	must(t, "authenticate", err)
	if a.Principal != (authz.Principal{Kind: authz.KindToken, ID: tok.ID}) {
		t.Errorf("principal = %+v, want the token alone", a.Principal)
	}
	if a.User != nil {
		t.Errorf("a service token authenticated with an account: %+v", a.User)
	}
	if v := e.verbsOf(a.Principal); v != 0 {
		t.Errorf("a service token of an administrator holds installation verbs %v", v.Verbs())
	}
	// A service token minting: its creator is that token.
	tok2, _ := e.mkToken(t, e.caller(a.Principal), TokenService, "child")
	if tok2.OwnerID != tok.ID {
		t.Errorf("token minted by a service token has owner %q, want %s", tok2.OwnerID, tok.ID)
	}
	_, _, err = e.svc.CreateToken(bg, e.caller(a.Principal), TokenDelegated, NewToken{Name: "x"})
	wantCode(t, "service token minting a delegated token", err, errcode.PermDenied)
	_, _, err = e.svc.CreateToken(bg, e.caller(authz.Principal{Kind: authz.KindAnonymous}), TokenDelegated, NewToken{Name: "x"})
	wantCode(t, "anonymous minting a delegated token", err, errcode.PermDenied)
}

func TestTokenSecretIsShownOnce(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	c := e.userCaller(admin.ID)
	var creds []string
	for _, kind := range []string{TokenDelegated, TokenService} {
		m := e.mark()
		tok, cred := e.mkToken(t, c, kind, "name-"+kind)
		if !tokenCredRE.MatchString(cred) || !strings.HasPrefix(cred, tok.ID+".") {
			t.Errorf("credential %q is not %s.<43 base64url characters>", cred, tok.ID)
		}
		_, secret, _ := splitCredential(ids.Token, cred)
		if sum := sha256.Sum256([]byte(secret)); string(tok.SecretHash) != string(sum[:]) {
			t.Errorf("%s token: hash is not SHA-256 of the secret", kind)
		}
		// One write: the token, its entry and its event.
		entry := e.oneAudit(t, m, "token.create")
		ev := e.oneEvent(t, m, "token.created")
		if entry.Meta.CreateIndex != ev.Meta.CreateIndex {
			t.Error("token.create entry and token.created event are not one write")
		}
		creds = append(creds, cred)
		// Authenticating records the use in the background; that write
		// must not carry the secret either.
		if _, err := e.svc.Authenticate(bg, cred, ""); err != nil {
			t.Fatal(err)
		}
	}
	waitBackground(t, e.svc)
	dump := e.dump(t)
	own, _ := e.svc.OwnTokens(c, "", 0)
	service, _ := e.svc.ServiceTokens("", 0)
	for _, list := range [][]Token{own, service} {
		if len(list) != 1 {
			t.Errorf("listing holds %d tokens, want 1", len(list))
		}
		dump += fmt.Sprintf("%+v", list)
	}
	for _, cred := range creds {
		_, secret, _ := splitCredential(ids.Token, cred)
		if strings.Contains(dump, secret) {
			t.Errorf("the secret of %s is stored, audited, evented or listed", cred[:30])
		}
	}
}

func TestTokenUseIsRecordedAtMostHourly(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	tok, cred := e.mkToken(t, e.userCaller(admin.ID), TokenDelegated, "t")
	used := func() *time.Time {
		v, _, _ := Tokens.Get(e.store.Read(), tok.ID)
		return v.LastUsedAt
	}
	eventually(t, "first use recorded", func() bool {
		if _, err := e.svc.Authenticate(bg, cred, ""); err != nil {
			t.Fatal(err)
		}
		u := used()
		return u != nil && u.Equal(e.now)
	})
	first := e.now
	e.now = e.now.Add(30 * time.Minute)
	if _, err := e.svc.Authenticate(bg, cred, ""); err != nil {
		t.Fatal(err)
	}
	waitBackground(t, e.svc)
	if u := used(); !u.Equal(first) {
		t.Errorf("use within the hour recorded: last used %v", u)
	}
	e.now = e.now.Add(31 * time.Minute)
	eventually(t, "use after an hour recorded", func() bool {
		if _, err := e.svc.Authenticate(bg, cred, ""); err != nil {
			t.Fatal(err)
		}
		return used().Equal(e.now)
	})
}

func TestInvalidTokens(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	c := e.userCaller(admin.ID)
	tok, cred := e.mkToken(t, c, TokenDelegated, "t")
	_, secret, _ := splitCredential(ids.Token, cred)
	for name, bearer := range map[string]string{
		"unknown":          ids.New(ids.Token) + "." + secret,
		"wrong secret":     tok.ID + "." + strings.Repeat("A", 43),
		"no secret":        tok.ID,
		"short secret":     cred[:len(cred)-1],
		"long secret":      cred + "A",
		"session cookie":   "ses_" + strings.TrimPrefix(cred, "tok_"),
		"garbage":          "Bearer " + cred,
		"lower-case ID":    strings.ToLower(tok.ID) + "." + secret,
		"dot only":         ".",
		"trailing newline": cred + "\n",
	} {
		_, err := e.svc.Authenticate(bg, bearer, "")
		wantCode(t, name, err, errcode.AuthTokenInvalid)
	}

	// Expired.
	exp, expCred, err := e.svc.CreateToken(bg, c, TokenDelegated, NewToken{Name: "short", ExpiresInDays: ptr(1)})
	must(t, "one-day token", err)
	if exp.ExpiresAt == nil || !exp.ExpiresAt.Equal(e.now.Add(24*time.Hour)) {
		t.Fatalf("one-day token expires at %v", exp.ExpiresAt)
	}
	e.now = exp.ExpiresAt.Add(-time.Second)
	if _, err := e.svc.Authenticate(bg, expCred, ""); err != nil {
		t.Errorf("a second before expiry: %v", err)
	}
	e.now = *exp.ExpiresAt
	_, err = e.svc.Authenticate(bg, expCred, "")
	wantCode(t, "at expiry", err, errcode.AuthTokenInvalid)
	e.now = exp.ExpiresAt.Add(365 * 24 * time.Hour)
	_, err = e.svc.Authenticate(bg, expCred, "")
	wantCode(t, "long after expiry", err, errcode.AuthTokenInvalid)

	// Revoked.
	must(t, "revoke", e.svc.RevokeToken(bg, c, tok.ID))
	_, err = e.svc.Authenticate(bg, cred, "")
	wantCode(t, "revoked", err, errcode.AuthTokenInvalid)
}

func TestTokensOfSuspendedOrDeletedOwners(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	ac := e.userCaller(admin.ID)
	bob := e.mkUserWithRole(t, "bob", authz.RoleAdmin)
	bc := e.userCaller(bob.ID)
	_, delegated := e.mkToken(t, bc, TokenDelegated, "bob-cli")
	svcTok, service := e.mkToken(t, bc, TokenService, "bob-made-ci")

	_, err := e.svc.UpdateUser(bg, ac, bob.ID, UserPatch{Status: ptr(StatusSuspended)})
	must(t, "suspend bob", err)
	_, err = e.svc.Authenticate(bg, delegated, "")
	wantCode(t, "delegated token of a suspended account", err, errcode.AuthTokenOrphaned)
	if a, err := e.svc.Authenticate(bg, service, ""); err != nil || a.Principal.ID != svcTok.ID {
		t.Errorf("service token made by a suspended account = %+v, %v; want it to work", a.Principal, err)
	}

	_, err = e.svc.UpdateUser(bg, ac, bob.ID, UserPatch{Status: ptr(StatusActive)})
	must(t, "reactivate bob", err)
	must(t, "delete bob", e.svc.DeleteUser(bg, bob.ID))
	if a, err := e.svc.Authenticate(bg, service, ""); err != nil || a.Principal.ID != svcTok.ID {
		t.Errorf("service token outliving its creator = %+v, %v; want it to work", a.Principal, err)
	}
	// Specification, Authentication rule 3 and the error table: a token
	// whose owner was deleted answers AUTH_TOKEN_ORPHANED.
	_, err = e.svc.Authenticate(bg, delegated, "")
	wantCode(t, "delegated token of a deleted account", err, errcode.AuthTokenOrphaned)
}

func TestTokenLifetime(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	c := e.userCaller(admin.ID)
	create := func(kind string, days *int) (Token, error) {
		tok, _, err := e.svc.CreateToken(bg, c, kind, NewToken{Name: "t", ExpiresInDays: days})
		return tok, err
	}
	day := 24 * time.Hour

	// No policy cap: no expiry unless asked; 1 to 3650 days.
	tok, err := create(TokenDelegated, nil)
	must(t, "no expiry", err)
	if tok.ExpiresAt != nil {
		t.Errorf("token without policy or request expires at %v", tok.ExpiresAt)
	}
	for _, d := range []int{0, -1, MaxTokenDays + 1} {
		_, err := create(TokenDelegated, ptr(d))
		if ce := wantCode(t, fmt.Sprintf("expires_in_days %d", d), err, errcode.ValidInvalid); ce != nil && ce.Details["field"] != "expires_in_days" {
			t.Errorf("details = %v", ce.Details)
		}
	}
	tok, err = create(TokenDelegated, ptr(MaxTokenDays))
	must(t, "3650 days", err)
	if !tok.ExpiresAt.Equal(e.now.Add(MaxTokenDays * day)) {
		t.Errorf("expires at %v", tok.ExpiresAt)
	}

	// Policy cap of 30 days, for both kinds.
	e.pol.p.MaxTokenLifetimeDays = 30
	for _, kind := range []string{TokenDelegated, TokenService} {
		before := Tokens.Count(e.store.Read())
		_, err := create(kind, ptr(31))
		if ce := wantCode(t, kind+": 31 days under a 30-day cap", err, errcode.PolicyTokenLifetime); ce != nil {
			if ce.Details["max_token_lifetime_days"] != 30 {
				t.Errorf("details = %v", ce.Details)
			}
			if ce.Status() != 403 {
				t.Errorf("status %d, want 403", ce.Status())
			}
		}
		if Tokens.Count(e.store.Read()) != before {
			t.Error("a refused token was stored")
		}
		tok, err := create(kind, ptr(30))
		must(t, kind+": 30 days", err)
		if !tok.ExpiresAt.Equal(e.now.Add(30 * day)) {
			t.Errorf("%s: 30-day token expires at %v", kind, tok.ExpiresAt)
		}
		tok, err = create(kind, nil)
		must(t, kind+": no expiry asked", err)
		if tok.ExpiresAt == nil || !tok.ExpiresAt.Equal(e.now.Add(30*day)) {
			t.Errorf("%s: token without expires_in_days under a 30-day cap expires at %v, want in 30 days", kind, tok.ExpiresAt)
		}
		_, err = create(kind, ptr(0))
		wantCode(t, kind+": 0 days under a cap", err, errcode.ValidInvalid)
	}
}

// TestTokenLifetimeCapAppliesToOlderTokens: a cap set after a token was
// minted applies to it: past cap days from its creation it is refused
// (AUTH_TOKEN_INVALID) though its own expiry is later or unset; lifting
// the cap accepts it again. A token's own earlier expiry still holds.
func TestTokenLifetimeCapAppliesToOlderTokens(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	c := e.userCaller(admin.ID)
	foreverTok, forever := e.mkToken(t, c, TokenDelegated, "forever")
	short, _, err := e.svc.CreateToken(bg, c, TokenDelegated, NewToken{Name: "short", ExpiresInDays: ptr(2)})
	must(t, "a 2-day token", err)
	day := 24 * time.Hour

	e.now = e.now.Add(8 * day)
	_, err = e.svc.Authenticate(bg, forever, "")
	must(t, "8 days old, no cap", err)
	e.pol.p.MaxTokenLifetimeDays = 7
	_, err = e.svc.Authenticate(bg, forever, "")
	wantCode(t, "8 days old under a 7-day cap", err, errcode.AuthTokenInvalid)
	e.pol.p.MaxTokenLifetimeDays = 0
	_, err = e.svc.Authenticate(bg, forever, "")
	must(t, "the cap lifted", err)
	// The same rule where a service re-checks an owner outside a request
	// (a subscription's): the token acts without the cap, not under it.
	if _, ok := PrincipalOf(e.store.Read(), foreverTok.ID, e.now, 0); !ok {
		t.Error("PrincipalOf: the 8-day-old token without a cap can no longer act")
	}
	if _, ok := PrincipalOf(e.store.Read(), foreverTok.ID, e.now, 7); ok {
		t.Error("PrincipalOf: the 8-day-old token acts under a 7-day cap")
	}

	for _, c := range []struct {
		tok  Token
		cap  int
		want time.Time
	}{
		{Token{CreatedAt: e.now}, 7, e.now.Add(7 * day)},
		{short, 7, *short.ExpiresAt},
		{Token{CreatedAt: e.now, ExpiresAt: ptr(e.now.Add(30 * day))}, 7, e.now.Add(7 * day)},
	} {
		if got := Expiry(c.tok, c.cap); got == nil || !got.Equal(c.want) {
			t.Errorf("Expiry(%v, %d) = %v, want %v", c.tok.ExpiresAt, c.cap, got, c.want)
		}
	}
	if got := Expiry(Token{CreatedAt: e.now}, 0); got != nil {
		t.Errorf("Expiry without a cap or an expiry = %v", got)
	}
}

func TestTokenNames(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	c := e.userCaller(admin.ID)
	for _, name := range []string{"", strings.Repeat("n", 101), "\xff"} {
		_, _, err := e.svc.CreateToken(bg, c, TokenDelegated, NewToken{Name: name})
		wantCode(t, fmt.Sprintf("name %q", name), err, errcode.ValidInvalid)
	}
	if _, _, err := e.svc.CreateToken(bg, c, TokenDelegated, NewToken{Name: strings.Repeat("ñ", 100)}); err != nil {
		t.Errorf("100-character name: %v", err)
	}
}

func TestAgentTokensMintAgentTokens(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	bob := e.mkUserWithRole(t, "bob", authz.RoleMember)
	agent, agentCred, err := e.svc.CreateToken(bg, e.userCaller(bob.ID), TokenDelegated, NewToken{Name: "assistant", Agent: true})
	must(t, "agent token", err)
	if !agent.Agent {
		t.Fatal("agent: true not kept")
	}
	a, err := e.svc.Authenticate(bg, agentCred, "")
	must(t, "authenticate agent", err)
	if !a.Principal.Agent || a.Principal.UserID != bob.ID {
		t.Errorf("agent principal = %+v", a.Principal)
	}
	ac := e.caller(a.Principal)
	for _, kind := range []string{TokenDelegated, TokenService} {
		child, childCred, err := e.svc.CreateToken(bg, ac, kind, NewToken{Name: "child-" + kind, Agent: false})
		must(t, "mint from agent", err)
		if !child.Agent {
			t.Errorf("a %s token minted by an agent token is not an agent token", kind)
		}
		ca, err := e.svc.Authenticate(bg, childCred, "")
		must(t, "authenticate child", err)
		if !ca.Principal.Agent {
			t.Errorf("child %s principal is not an agent", kind)
		}
	}
	// A non-agent token stays non-agent.
	plain, _, err := e.svc.CreateToken(bg, e.userCaller(admin.ID), TokenDelegated, NewToken{Name: "plain"})
	must(t, "plain", err)
	if plain.Agent {
		t.Error("a plain token became an agent token")
	}
	// The floor for automated callers applies to it.
	floor := authz.Floor{AgentDisabled: []authz.Verb{authz.AppCreate}}
	f := FactsOf(e.store.Read())
	if authz.InstallVerbs(f, a.Principal, floor).Has(authz.AppCreate) {
		t.Error("agent_disabled_verbs did not apply to an agent token")
	}
	if !authz.InstallVerbs(f, userPrincipal(bob.ID), floor).Has(authz.AppCreate) {
		t.Error("agent_disabled_verbs applied to the person")
	}
}

func TestRevokeTokenRules(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	usersRole, err := e.svc.CreateRole(bg, "account-managers", authz.ScopeInstall, []authz.Verb{authz.InstallUsersManage})
	must(t, "role", err)
	tokensRole, err := e.svc.CreateRole(bg, "token-managers", authz.ScopeInstall, []authz.Verb{authz.InstallTokensManage})
	must(t, "role", err)
	bob := e.mkUser(t, "bob")
	carol := e.mkUserWithRole(t, "carol", usersRole.ID)  // install.users.manage only
	dave := e.mkUserWithRole(t, "dave", tokensRole.ID)   // install.tokens.manage only
	eve := e.mkUserWithRole(t, "eve", authz.RoleAuditor) // install.view, no managing verb
	caller := func(u User) authz.Caller { return e.caller(userPrincipal(u.ID)) }

	// One's own delegated token: no verb.
	own, _ := e.mkToken(t, caller(bob), TokenDelegated, "own")
	m := e.mark()
	must(t, "revoke own token", e.svc.RevokeToken(bg, caller(bob), own.ID))
	entry := e.oneAudit(t, m, "token.revoke")
	wantData(t, "token.revoke", entry.Value.Details, map[string]any{"name": "own", "kind": TokenDelegated})
	ev := e.oneEvent(t, m, "token.revoked")
	if ev.Meta.CreateIndex != entry.Meta.CreateIndex {
		t.Error("token.revoke entry and token.revoked event are not one write")
	}
	wantData(t, "token.revoked", ev.Value.Data, map[string]any{"target_kind": "token", "target_id": own.ID})
	if _, _, ok := Tokens.Get(e.store.Read(), own.ID); ok {
		t.Error("revoked token still stored")
	}

	// One's own delegated token, through another delegated token of one's own.
	t1, _ := e.mkToken(t, caller(bob), TokenDelegated, "t1")
	t2, t2cred := e.mkToken(t, caller(bob), TokenDelegated, "t2")
	a2, err := e.svc.Authenticate(bg, t2cred, "")
	must(t, "authenticate t2", err)
	waitBackground(t, e.svc) // see TestRevokeTokenRightAfterItsUse
	must(t, "revoke own token through a token", e.svc.RevokeToken(bg, e.caller(a2.Principal), t1.ID))
	must(t, "a token revokes itself", e.svc.RevokeToken(bg, e.caller(a2.Principal), t2.ID))

	// Another account's delegated token: install.users.manage.
	bobs, _ := e.mkToken(t, caller(bob), TokenDelegated, "bobs")
	for _, u := range []User{dave, eve} {
		err := e.svc.RevokeToken(bg, caller(u), bobs.ID)
		wantVerb(t, u.Username+" revoking bob's token", err, authz.InstallUsersManage)
	}
	must(t, "carol revokes bob's token", e.svc.RevokeToken(bg, caller(carol), bobs.ID))

	// A service token: install.tokens.manage, even for its creator, and
	// install.users.manage does not do.
	svcTok, _ := e.mkToken(t, caller(admin), TokenService, "ci")
	bobSvc, _ := e.mkToken(t, caller(bob), TokenService, "bob-ci")
	for _, u := range []User{bob, carol, eve} {
		err := e.svc.RevokeToken(bg, caller(u), svcTok.ID)
		wantVerb(t, u.Username+" revoking a service token", err, authz.InstallTokensManage)
	}
	wantVerb(t, "bob revoking the service token he made", e.svc.RevokeToken(bg, caller(bob), bobSvc.ID), authz.InstallTokensManage)
	must(t, "dave revokes the service token", e.svc.RevokeToken(bg, caller(dave), svcTok.ID))
	must(t, "admin revokes bob's service token", e.svc.RevokeToken(bg, caller(admin), bobSvc.ID))

	// A service token revokes itself.
	self, selfCred := e.mkToken(t, caller(admin), TokenService, "self")
	sa, err := e.svc.Authenticate(bg, selfCred, "")
	must(t, "authenticate", err)
	waitBackground(t, e.svc)
	must(t, "a service token revokes itself", e.svc.RevokeToken(bg, e.caller(sa.Principal), self.ID))

	// A token that does not exist could have been anyone's, or a service
	// token: NOT_FOUND only to a holder of both verbs, the verb missing to
	// anyone else (so that nobody learns which tokens exist).
	unknown := ids.New(ids.Token)
	wantCode(t, "unknown token", e.svc.RevokeToken(bg, caller(admin), unknown), errcode.NotFound)
	wantCode(t, "revoked twice", e.svc.RevokeToken(bg, caller(admin), svcTok.ID), errcode.NotFound)
	wantVerb(t, "unknown token, no verb", e.svc.RevokeToken(bg, caller(bob), unknown), authz.InstallUsersManage)
	wantVerb(t, "unknown token, install.users.manage only", e.svc.RevokeToken(bg, caller(carol), unknown), authz.InstallTokensManage)
	wantVerb(t, "unknown token, install.tokens.manage only", e.svc.RevokeToken(bg, caller(dave), unknown), authz.InstallUsersManage)
	wantVerb(t, "a revoked service token, install.users.manage only", e.svc.RevokeToken(bg, caller(carol), svcTok.ID), authz.InstallTokensManage)
}

func TestTokenEvents(t *testing.T) {
	e := newTestEnv(t)
	admin, _ := e.setup(t)
	c := e.userCaller(admin.ID)
	for kind, wantKind := range map[string]string{TokenDelegated: "delegated", TokenService: "account"} {
		m := e.mark()
		tok, cred, err := e.svc.CreateToken(bg, c, kind, NewToken{Name: "n-" + kind, Agent: true})
		must(t, "create", err)
		ev := e.oneEvent(t, m, "token.created")
		wantData(t, "token.created "+kind, ev.Value.Data, map[string]any{"name": "n-" + kind, "kind": wantKind, "target_kind": "token", "target_id": tok.ID})
		entry := e.oneAudit(t, m, "token.create")
		wantData(t, "token.create "+kind, entry.Value.Details, map[string]any{"name": "n-" + kind, "kind": kind, "agent": true})
		if _, secret, _ := splitCredential(ids.Token, cred); strings.Contains(fmt.Sprint(ev.Value, entry.Value), secret) {
			t.Error("the secret is in the event or entry")
		}
	}
}

// A token revoking itself is authenticated first, and that records its use
// in the background. When that write lands between the revocation's read and
// its write, the revocation must still succeed (or be retried), not fail
// with "changed concurrently".
func TestRevokeTokenRightAfterItsUse(t *testing.T) {
	for _, kind := range []string{TokenDelegated, TokenService} {
		t.Run(kind, func(t *testing.T) {
			e := newTestEnv(t)
			admin, _ := e.setup(t)
			tok, cred := e.mkToken(t, e.userCaller(admin.ID), kind, "self")
			racing := e.withService(t, Deps{Store: &hookStore{Store: e.store, before: func() {
				// The request's authentication, whose use-record lands now.
				_, err := e.svc.Authenticate(bg, cred, "")
				must(t, "authenticate", err)
				waitBackground(t, e.svc)
			}}})
			p := authz.Principal{Kind: authz.KindToken, ID: tok.ID}
			if kind == TokenDelegated {
				p.UserID = admin.ID
			}
			if err := racing.RevokeToken(bg, e.caller(p), tok.ID); err != nil {
				t.Errorf("revoke a token whose use was just recorded: %v", err)
			}
			_, err := e.svc.Authenticate(bg, cred, "")
			wantCode(t, "after revocation", err, errcode.AuthTokenInvalid)
		})
	}
}
