package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/browsertest"
)

// The console's pages about people and tokens (/admin/accounts,
// /admin/groups, /admin/roles, /admin/tokens, /account/tokens) in a real
// Chromium against the real binary. Run them with:
//
//	go test -count=1 -run 'TestConsoleAdmin' ./internal/e2e/

// TestConsoleAdminAccounts, on a server in port mode:
//   - accounts: the administrator creates an account through the page
//     without a password; the page shows the generated one once, and the
//     API has the account active, without a role, bound to change its
//     password. The new person signs in with it in a second browser, is
//     forced to change it, and lands on the launcher without an Admin
//     link; their /admin/accounts shows the API's PERM_VERB_REQUIRED.
//   - own tokens: they make a token on /account/tokens (reached by the
//     header's link); its secret, shown once, answers GET /api/v1/me as
//     them; revoked (confirmed), it is refused AUTH_TOKEN_INVALID.
//   - roles of accounts: removing the administrator's own role shows the
//     API's refusal (the last administrator, STATE_INVALID); giving the
//     new person role_auditor is what the API then has.
//   - suspend, confirmed: the API has the account suspended, the second
//     browser's session is refused (the console sends it to /login), and
//     signing in again is refused AUTH_INVALID; reactivated and reset with
//     a generated password (confirmed, shown once), that password signs in.
//     As an auditor she then sees the accounts with no form to change
//     them, and /admin/tokens shows the API's refusal (install.tokens.manage).
//   - groups: a group created on the page, an account found by name and
//     added, and the group given role_member: the API has both; an app shared with the group shows on
//     the group's page, and on her account's page as one she opens.
//   - roles: built-in roles show as fixed with no Delete; each verb lists
//     the endpoints requiring it (from the API's reference); a custom role
//     composed from two verbs is what the API has, and is deleted after a
//     confirmation.
//   - service tokens: one made on /admin/tokens answers GET /api/v1/me as
//     itself (a service token), and after the confirmed revoke is refused.
//
// All through, both browsers call only /api/v1 on the console's origin
// and report no problem; the accounts page does not shift as its data
// arrives; axe-core finds no serious violation on each page in the light
// and dark themes; screenshots of each go to SVC_SCREENSHOTS.
func TestConsoleAdminAccounts(t *testing.T) {
	s := startWebServer(t, "port")
	var admin struct {
		User struct{ ID string } `json:"user"`
	}
	s.must(t, "GET", "/me", nil, http.StatusOK, &admin)

	tab := consoleTab(t, browse(t))
	watchLayoutShift(tab)
	s.signInTab(t, tab, "admin", adminPassword)

	// The accounts page, and an account made on it with a generated password.
	tab.Go(s.console + "/admin/accounts")
	waitFor(t, tab, "the administrator listed", `document.querySelector('[data-table="accounts"] tr[data-username="admin"]')`)
	noLayoutShift(t, tab, "the accounts page")
	accessible(t, tab, "the accounts page")
	screenshots(t, tab, "admin-accounts")
	fill(t, tab, map[string]string{"username": "carol", "display_name": "Carol Newcomer", "email": "carol@example.test"}, "username", "display_name", "email")
	waitFor(t, tab, "the generated password shown", `document.querySelector('[data-secret="new_password"] input') && document.querySelector('[data-secret="new_password"] input').value.length >= 18`)
	var first string
	tab.MustEval(`document.querySelector('[data-secret="new_password"] input').value`, &first)
	carol := s.account(t, "carol")
	if carol.Status != "active" || !carol.MustChangePassword || carol.RoleID != nil || carol.Email != "carol@example.test" || carol.DisplayName != "Carol Newcomer" {
		t.Errorf("the account made on the page is %+v; want carol active, without a role, bound to change her password", carol)
	}
	waitFor(t, tab, "carol listed", `document.querySelector('[data-table="accounts"] tr[data-username="carol"]')`)
	accessible(t, tab, "the accounts page with a generated password")
	screenshots(t, tab, "admin-accounts-created")

	// Carol, in a second browser: the forced password change, no Admin link,
	// and the refusal of the accounts page.
	carolTab := consoleTab(t, browse(t))
	carolTab.Go(s.console + "/login")
	waitFor(t, carolTab, "the sign-in form", `document.querySelector('input[name="password"]')`)
	fill(t, carolTab, map[string]string{"username": "carol", "password": first}, "username", "password")
	waitURL(t, carolTab, "carol must change her password", func(a string) bool { return a == s.console+"/account/password" })
	waitFor(t, carolTab, "the password form", `document.querySelector('input[name="new_password_again"]')`)
	const carolPassword = "carol-own-password-2718"
	fill(t, carolTab, map[string]string{"current_password": first, "new_password": carolPassword, "new_password_again": carolPassword}, "current_password", "new_password", "new_password_again")
	waitURL(t, carolTab, "carol's launcher", func(a string) bool { return a == s.console+"/" })
	waitText(t, carolTab, "Carol Newcomer")
	var adminLink bool
	carolTab.MustEval(`!!document.querySelector('header a[href^="/admin"]')`, &adminLink)
	if adminLink {
		t.Errorf("a person without install.view sees the Admin link")
	}
	carolTab.Go(s.console + "/admin/accounts")
	waitFor(t, carolTab, "the refusal", `document.querySelector('.accounts [role=alert] .code')`)
	var refusal string
	carolTab.MustEval(`document.querySelector('.accounts [role=alert]').innerText`, &refusal)
	if !strings.Contains(refusal, "PERM_VERB_REQUIRED") || !strings.Contains(refusal, "install.view") {
		t.Errorf("a member's /admin/accounts shows %q; want the API's PERM_VERB_REQUIRED naming install.view", refusal)
	}
	var forms int
	carolTab.MustEval(`document.querySelectorAll('.accounts form').length`, &forms)
	if forms != 0 {
		t.Errorf("a member's /admin/accounts offers %d forms", forms)
	}
	accessible(t, carolTab, "the accounts page refused")
	screenshots(t, carolTab, "admin-accounts-refused")

	// Carol's own token, made and revoked on /account/tokens.
	click(t, carolTab, `header a[href="/account/tokens"]`)
	waitURL(t, carolTab, "the tokens page", func(a string) bool { return a == s.console+"/account/tokens" })
	waitText(t, carolTab, "No tokens yet")
	accessible(t, carolTab, "the own tokens page, empty")
	fill(t, carolTab, map[string]string{"token_name": "carol laptop"}, "token_name")
	secret := waitSecret(t, carolTab, "token_secret")
	if st, who := meWith(t, s, secret); st != http.StatusOK || who != "user carol" {
		t.Errorf("GET /me with carol's new token: %d %s; want 200 as carol", st, who)
	}
	accessible(t, carolTab, "the own tokens page with a secret")
	screenshots(t, carolTab, "account-tokens")
	clickButton(t, carolTab, `[data-table="tokens-own"]`, "Revoke")
	clickButton(t, carolTab, "dialog.confirm", "Revoke carol laptop")
	waitFor(t, carolTab, "the token gone", `!document.querySelector('[data-table="tokens-own"] tbody tr') && !document.querySelector('[data-secret]')`)
	if st, who := meWith(t, s, secret); st != http.StatusUnauthorized || who != "AUTH_TOKEN_INVALID" {
		t.Errorf("GET /me with carol's revoked token: %d %s; want 401 AUTH_TOKEN_INVALID", st, who)
	}

	// Installation roles: the last administrator is protected; carol gets
	// role_auditor.
	tab.Go(s.console + "/admin/accounts/" + admin.User.ID)
	waitFor(t, tab, "the administrator's account", `document.querySelector('[data-account] select[name="role_id"]') && document.querySelector('[data-account] select[name="role_id"]').value === "role_admin"`)
	choose(t, tab, `[data-account] select[name="role_id"]`, "")
	click(t, tab, `[data-account] form.inline-form button[type=submit]`)
	waitFor(t, tab, "the last administrator's refusal", `document.querySelector('#account-role-error .code')`)
	tab.MustEval(`document.querySelector('#account-role-error').innerText`, &refusal)
	if !strings.Contains(refusal, "STATE_INVALID") {
		t.Errorf("removing the last administrator's role shows %q; want the API's STATE_INVALID", refusal)
	}
	if a := s.account(t, "admin"); a.RoleID == nil || *a.RoleID != "role_admin" {
		t.Errorf("the administrator's role is %v after the refusal", a.RoleID)
	}
	accessible(t, tab, "an account with a refusal")
	screenshots(t, tab, "admin-account-last-admin")
	click(t, tab, `[data-table="accounts"] tr[data-username="carol"] a`)
	waitFor(t, tab, "carol's account", `document.querySelector('[data-account="`+carol.ID+`"] select[name="role_id"]')`)
	choose(t, tab, `[data-account] select[name="role_id"]`, "role_auditor")
	click(t, tab, `[data-account] form.inline-form button[type=submit]`)
	waitForAPI(t, "carol's role set", func() bool { r := s.account(t, "carol").RoleID; return r != nil && *r == "role_auditor" })
	waitFor(t, tab, "the role shown", `document.querySelector('[data-table="accounts"] tr[data-username="carol"]').innerText.includes("auditor")`)

	// Suspend: carol's session and sign-in are refused.
	clickButton(t, tab, "[data-account] .danger-zone", "Suspend")
	waitFor(t, tab, "the confirmation", `document.querySelector('dialog.confirm[open]')`)
	accessible(t, tab, "the suspension's confirmation")
	screenshots(t, tab, "admin-account-suspend")
	clickButton(t, tab, "dialog.confirm", "Suspend carol")
	waitForAPI(t, "carol suspended", func() bool { return s.account(t, "carol").Status == "suspended" })
	waitFor(t, tab, "the suspension shown", `document.querySelector('[data-table="accounts"] tr[data-username="carol"]').innerText.includes("suspended")`)
	if st, who := s.whoAmI(t, carolTab); st != http.StatusUnauthorized {
		t.Errorf("carol's session after her suspension: %d %s; want 401", st, who)
	}
	carolTab.Go(s.console + "/")
	waitURL(t, carolTab, "carol sent to sign in", func(a string) bool { return a == s.console+"/login" })
	waitFor(t, carolTab, "the sign-in form", `document.querySelector('input[name="password"]')`)
	fill(t, carolTab, map[string]string{"username": "carol", "password": carolPassword}, "username", "password")
	waitText(t, carolTab, "AUTH_INVALID")

	// Reactivate, then reset her password with a generated one.
	clickButton(t, tab, "[data-account] .danger-zone", "Reactivate")
	clickButton(t, tab, "dialog.confirm", "Reactivate carol")
	waitForAPI(t, "carol active again", func() bool { return s.account(t, "carol").Status == "active" })
	clickButton(t, tab, "[data-account] .sub-form", "Generate")
	waitFor(t, tab, "a generated password", `document.querySelector('input[name="reset_password"]').value.length >= 18`)
	clickButton(t, tab, "[data-account] .sub-form", "Reset password")
	clickButton(t, tab, "dialog.confirm", "Reset password")
	reset := waitSecret(t, tab, "reset_secret")
	if st := passwordSignIn(t, s, "carol", reset); st != http.StatusOK {
		t.Errorf("carol's sign-in with the password reset on the page: %d", st)
	}
	if !s.account(t, "carol").MustChangePassword {
		t.Errorf("after the reset carol need not change her password")
	}
	accessible(t, tab, "an account after a reset")
	screenshots(t, tab, "admin-account-reset")

	// Carol, an auditor now, signs in with it (and must change it): she sees
	// the Admin link and the accounts, with no form to change them, and the
	// service tokens page shows the API's refusal.
	carolTab.Go(s.console + "/login")
	waitFor(t, carolTab, "the sign-in form", `document.querySelector('input[name="password"]')`)
	fill(t, carolTab, map[string]string{"username": "carol", "password": reset}, "username", "password")
	waitURL(t, carolTab, "carol must change her password again", func(a string) bool { return a == s.console+"/account/password" })
	waitFor(t, carolTab, "the password form", `document.querySelector('input[name="new_password_again"]')`)
	fill(t, carolTab, map[string]string{"current_password": reset, "new_password": carolPassword + "-2", "new_password_again": carolPassword + "-2"}, "current_password", "new_password", "new_password_again")
	waitURL(t, carolTab, "carol's launcher again", func(a string) bool { return a == s.console+"/" })
	waitFor(t, carolTab, "the Admin link, for an auditor", `document.querySelector('header a[href^="/admin"]')`)
	click(t, carolTab, `header a[href^="/admin"]`)
	waitFor(t, carolTab, "the accounts, for an auditor", `document.querySelector('[data-table="accounts"] tr[data-username="admin"]')`)
	waitText(t, carolTab, "creating and changing them needs install.users.manage")
	carolTab.MustEval(`document.querySelectorAll('.accounts form').length`, &forms)
	if forms != 0 {
		t.Errorf("an auditor's /admin/accounts offers %d forms", forms)
	}
	accessible(t, carolTab, "the accounts page for an auditor")
	screenshots(t, carolTab, "admin-accounts-auditor")
	click(t, carolTab, `nav.side a[href="/admin/tokens"]`)
	waitFor(t, carolTab, "the service tokens refused", `document.querySelector('.tokens [role=alert] .code')`)
	carolTab.MustEval(`document.querySelector('.tokens [role=alert]').innerText`, &refusal)
	if !strings.Contains(refusal, "PERM_VERB_REQUIRED") || !strings.Contains(refusal, "install.tokens.manage") {
		t.Errorf("an auditor's /admin/tokens shows %q; want the API's PERM_VERB_REQUIRED naming install.tokens.manage", refusal)
	}
	carolTab.MustEval(`document.querySelectorAll('.tokens form').length`, &forms)
	if forms != 0 {
		t.Errorf("an auditor's /admin/tokens offers %d forms", forms)
	}
	accessible(t, carolTab, "the service tokens page refused")

	// Groups: one made, carol added.
	tab.Go(s.console + "/admin/groups")
	waitText(t, tab, "No groups yet")
	accessible(t, tab, "the groups page, empty")
	fill(t, tab, map[string]string{"group_name": "Operators"}, "group_name")
	groupURL := waitURL(t, tab, "the new group's page", func(a string) bool { return strings.HasPrefix(a, s.console+"/admin/groups/grp_") })
	typeInto(t, tab, "member_find", "newcom")
	click(t, tab, `[data-candidate="`+carol.ID+`"] button`)
	waitFor(t, tab, "carol a member", `document.querySelector('[data-member="`+carol.ID+`"]')`)
	var groups struct {
		Items []struct {
			Name      string   `json:"name"`
			MemberIDs []string `json:"member_ids"`
		} `json:"items"`
	}
	s.must(t, "GET", "/groups", nil, http.StatusOK, &groups)
	if len(groups.Items) != 1 || groups.Items[0].Name != "Operators" || !slices.Equal(groups.Items[0].MemberIDs, []string{carol.ID}) {
		t.Errorf("the API's groups: %+v; want Operators with carol", groups.Items)
	}
	choose(t, tab, `[data-group-detail] select[name="role_id"]`, "role_member")
	click(t, tab, `[data-group-detail] form.inline-form button[type=submit]`)
	waitForAPI(t, "the group's role set", func() bool {
		var g struct {
			Items []struct {
				RoleID *string `json:"role_id"`
			} `json:"items"`
		}
		s.must(t, "GET", "/groups", nil, http.StatusOK, &g)
		return len(g.Items) == 1 && g.Items[0].RoleID != nil && *g.Items[0].RoleID == "role_member"
	})
	waitFor(t, tab, "the group's role shown", `document.querySelector('[data-table="groups"] tbody tr').innerText.includes("member")`)
	wiki := s.createApp(t, "Team Wiki")
	s.must(t, "POST", "/apps/"+wiki+"/grants", map[string]any{"plane": "data", "principal_kind": "group", "principal_id": groupURL[strings.LastIndex(groupURL, "/")+1:]}, http.StatusCreated, nil)
	tab.Go(groupURL)
	waitFor(t, tab, "the app shared with the group", `[...document.querySelectorAll('.app-access a')].some((a) => a.innerText === "Team Wiki")`)
	accessible(t, tab, "a group")
	screenshots(t, tab, "admin-group")
	click(t, tab, `[data-member="`+carol.ID+`"] a`)
	waitURL(t, tab, "carol's account page", func(a string) bool { return a == s.console+"/admin/accounts/"+carol.ID })
	waitFor(t, tab, "the app carol has through the group", `[...document.querySelectorAll('.app-access li')].some((l) => l.innerText.includes("Team Wiki") && l.innerText.includes("opens it"))`)

	// Roles: built-in ones fixed, verbs explained by the reference, a
	// custom role composed and deleted.
	tab.Go(s.console + "/admin/roles")
	waitFor(t, tab, "the roles and the verbs' endpoints", `document.querySelector('[data-role="role_admin"]') && document.querySelector('[data-verb="install.users.manage"] details')`)
	var builtinDelete bool
	tab.MustEval(`[...document.querySelectorAll('[data-role]')].some((r) => r.innerText.includes("built in") && r.querySelector('button'))`, &builtinDelete)
	if builtinDelete {
		t.Errorf("a built-in role offers a Delete button")
	}
	var verbEndpoints string
	tab.MustEval(`document.querySelector('[data-verb="install.users.manage"] details').textContent`, &verbEndpoints)
	if !strings.Contains(verbEndpoints, "POST /api/v1/users") {
		t.Errorf("install.users.manage lists %q; want POST /api/v1/users among its endpoints", verbEndpoints)
	}
	accessible(t, tab, "the roles page")
	click(t, tab, `input[name="role_verb"][value="app.view"]`)
	click(t, tab, `input[name="role_verb"][value="app.deploy"]`)
	fill(t, tab, map[string]string{"role_name": "Deployers"}, "role_name")
	waitFor(t, tab, "the custom role listed", `[...document.querySelectorAll('[data-table="roles-app"] [data-role]')].some((r) => r.innerText.includes("Deployers"))`)
	deployers := s.role(t, "Deployers")
	if deployers == nil || deployers.Scope != "app" || !slices.Equal(deployers.Verbs, []string{"app.view", "app.deploy"}) {
		t.Errorf("the role made on the page is %+v; want Deployers on apps with app.view and app.deploy", deployers)
	}
	screenshots(t, tab, "admin-roles")
	if deployers != nil {
		clickButton(t, tab, `[data-role="`+deployers.ID+`"]`, "Delete")
		clickButton(t, tab, "dialog.confirm", "Delete Deployers")
		waitForAPI(t, "the custom role deleted", func() bool { return s.role(t, "Deployers") == nil })
	}

	// Service tokens.
	tab.Go(s.console + "/admin/tokens")
	waitText(t, tab, "No service tokens yet")
	accessible(t, tab, "the service tokens page, empty")
	fill(t, tab, map[string]string{"token_name": "ci deploys", "expires_in_days": "30"}, "token_name", "expires_in_days")
	secret = waitSecret(t, tab, "token_secret")
	if st, who := meWith(t, s, secret); st != http.StatusOK || who != "service ci deploys" {
		t.Errorf("GET /me with the new service token: %d %s; want 200 as the service token", st, who)
	}
	waitFor(t, tab, "the token listed", `document.querySelector('[data-table="tokens-service"] tbody tr[data-token]')`)
	accessible(t, tab, "the service tokens page with a secret")
	screenshots(t, tab, "admin-tokens")
	clickButton(t, tab, `[data-table="tokens-service"]`, "Revoke")
	clickButton(t, tab, "dialog.confirm", "Revoke ci deploys")
	waitFor(t, tab, "the service token gone", `!document.querySelector('[data-table="tokens-service"] tbody tr')`)
	if st, who := meWith(t, s, secret); st != http.StatusUnauthorized || who != "AUTH_TOKEN_INVALID" {
		t.Errorf("GET /me with the revoked service token: %d %s; want 401 AUTH_TOKEN_INVALID", st, who)
	}

	for _, tb := range []*browsertest.Tab{tab, carolTab} {
		noProblems(t, tb)
		onlyAPI(t, tb, s.console)
	}
}

// adminAccount is an account as the API answers it.
type adminAccount struct {
	ID                 string  `json:"id"`
	Username           string  `json:"username"`
	DisplayName        string  `json:"display_name"`
	Email              string  `json:"email"`
	Status             string  `json:"status"`
	MustChangePassword bool    `json:"must_change_password"`
	RoleID             *string `json:"role_id"`
}

// account reads the account of a username through the API.
func (s *webServer) account(t *testing.T, username string) adminAccount {
	t.Helper()
	var list struct {
		Items []adminAccount `json:"items"`
	}
	s.must(t, "GET", "/users?limit=200", nil, http.StatusOK, &list)
	for _, u := range list.Items {
		if u.Username == username {
			return u
		}
	}
	t.Fatalf("no account %s", username)
	return adminAccount{}
}

type adminRole struct {
	ID    string   `json:"id"`
	Scope string   `json:"scope"`
	Verbs []string `json:"verbs"`
}

// role reads the role of a name through the API, or nil.
func (s *webServer) role(t *testing.T, name string) *adminRole {
	t.Helper()
	var list struct {
		Items []struct {
			adminRole
			Name string `json:"name"`
		} `json:"items"`
	}
	s.must(t, "GET", "/roles?scope=all&limit=200", nil, http.StatusOK, &list)
	for _, r := range list.Items {
		if r.Name == name {
			return &r.adminRole
		}
	}
	return nil
}

// meWith asks GET /api/v1/me with a bearer token: the status and who
// answered ("user <username>", "service <token name>") or the refusal's code.
func meWith(t *testing.T, s *webServer, token string) (int, string) {
	t.Helper()
	r := sendToken(token, "GET", s.p.Base()+"/api/v1/me", nil)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var me struct {
		User  *struct{ Username string } `json:"user"`
		Token *struct {
			Name string `json:"name"`
			Kind string `json:"kind"`
		} `json:"token"`
	}
	if r.status != http.StatusOK {
		return r.status, r.code()
	}
	_ = json.Unmarshal(r.body, &me)
	switch {
	case me.User != nil:
		return r.status, "user " + me.User.Username
	case me.Token != nil:
		return r.status, me.Token.Kind + " " + me.Token.Name
	}
	return r.status, string(r.body)
}

// passwordSignIn signs in through the API and answers the status.
func passwordSignIn(t *testing.T, s *webServer, username, password string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"username": username, "password": password})
	res, err := http.Post(s.p.Base()+"/api/v1/sessions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// waitSecret waits for a secret shown once (SecretOnce, by its input's
// name) and reads it.
func waitSecret(t *testing.T, tab *browsertest.Tab, name string) string {
	t.Helper()
	sel := strconv.Quote(`input[name="` + name + `"][readonly]`)
	waitFor(t, tab, "the secret "+name+" shown", `document.querySelector(`+sel+`) && document.querySelector(`+sel+`).value !== ""`)
	var v string
	tab.MustEval(`document.querySelector(`+sel+`).value`, &v)
	return v
}

// typeInto types a value into the input of a name, as input events.
func typeInto(t *testing.T, tab *browsertest.Tab, name, value string) {
	t.Helper()
	var ok bool
	tab.MustEval(`(() => { const el = document.querySelector('input[name="`+name+`"]'); if (!el) return false; el.focus(); el.value = `+strconv.Quote(value)+`; el.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`, &ok)
	if !ok {
		t.Fatalf("no input %s at %s", name, tab.URL())
	}
}

// choose picks a select's option by value, as a change event.
func choose(t *testing.T, tab *browsertest.Tab, selector, value string) {
	t.Helper()
	var ok bool
	tab.MustEval(`(() => { const el = document.querySelector(`+strconv.Quote(selector)+`); if (!el) return false; el.value = `+strconv.Quote(value)+`; el.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, &ok)
	if !ok {
		t.Fatalf("no select %s at %s", selector, tab.URL())
	}
}
