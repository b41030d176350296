package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/svchost/svc/internal/browsertest"
)

// The console's sharing, secrets, slots and settings pages of an app in a
// real Chromium against the real binary. Run them with:
//
//	go test -count=1 -run 'TestConsoleSharing|TestConsoleSecretsAndSettings' ./internal/e2e/

// grantsView is GET /apps/{appID}/grants.
type grantsView struct {
	Access, Management []struct {
		ID            string  `json:"id"`
		PrincipalKind string  `json:"principal_kind"`
		PrincipalID   *string `json:"principal_id"`
		RoleID        *string `json:"role_id"`
		Passcode      bool    `json:"passcode"`
	}
}

func (s *webServer) grants(t *testing.T, appID string) grantsView {
	t.Helper()
	var g grantsView
	s.must(t, "GET", "/apps/"+appID+"/grants", nil, http.StatusOK, &g)
	return g
}

// TestConsoleSharing, on a server in port mode with host policy's
// public_sharing at passcode_only and a deployed app:
//   - the sharing page lists who administers the app and who opens it (its
//     creator, owner, with both grants), without shifting its layout;
//   - the principal search is a combobox driven by the keyboard alone
//     (typing, Down, Enter), with aria-expanded, aria-activedescendant and
//     aria-selected following; sharing with the account found (open the
//     app) makes the API's data-plane grant, and that account, signed in
//     in a second browser, sees the app's tile in their launcher;
//   - a group found by the search is given the app to administer as
//     viewer, and the role's picker (the app roles GET /roles lists)
//     changes it to developer (PATCH), as the API then says;
//   - sharing with everyone without a passcode shows the API's refusal
//     POLICY_ANONYMOUS_GRANT_FORBIDDEN; with a passcode it is made
//     (passcode: true), and a third, anonymous browser sent by the app to
//     /passcode/<id> reaches the app after entering it; removing the
//     passcode shows the API's refusal under passcode_only;
//   - an account holding the viewer role on the app sees its grants, and
//     instead of the form the API's refusal (PERM_…), with nothing to
//     remove;
//   - removing the grant to everyone and then the account's grant, each
//     confirmed, removes them in the API, and the app's tile leaves the
//     account's launcher.
//
// All through the console calls only /api/v1 on its own origin and
// reports no problem; axe-core finds no serious violation, light and
// dark; screenshots go to SVC_SCREENSHOTS.
func TestConsoleSharing(t *testing.T) {
	s := startWebServer(t, "port", "SVC_RUNTIME_ISOLATION=none")
	notes := s.app(t, "notes")
	var mia struct {
		User struct{ ID string } `json:"user"`
	}
	s.must(t, "POST", "/users", map[string]any{"username": "mia", "display_name": "Mia Member", "password": "mia-password-5150-x"}, http.StatusCreated, &mia)
	var ops struct {
		Group struct{ ID string } `json:"group"`
	}
	s.must(t, "POST", "/groups", map[string]any{"name": "Operators"}, http.StatusCreated, &ops)
	s.must(t, "PUT", "/policy", map[string]any{"policy": map[string]any{"public_sharing": "passcode_only"}}, http.StatusOK, nil)

	tab := consoleTab(t, browse(t))
	watchLayoutShift(tab)
	s.signInTab(t, tab, "admin", adminPassword)
	tab.Go(s.console + "/apps/" + notes.id + "/sharing")
	var me struct {
		User struct{ ID string } `json:"user"`
	}
	s.must(t, "GET", "/me", nil, http.StatusOK, &me)
	admin := me.User.ID
	waitFor(t, tab, "the creator's grants", `document.querySelectorAll('[data-table="management"] tbody tr').length === 1 && document.querySelectorAll('[data-table="access"] tbody tr').length === 1 && document.querySelector('[data-table="access"] tr[data-principal="`+admin+`"]')`)
	noLayoutShift(t, tab, "the sharing page")
	var ownerRole string
	tab.MustEval(`document.querySelector('[data-table="management"] select').value`, &ownerRole)
	if ownerRole != "role_owner" {
		t.Errorf("the creator's management grant shows the role %q; want role_owner", ownerRole)
	}
	accessible(t, tab, "the sharing page")
	screenshots(t, tab, "app-sharing")

	// Share with mia, found by the search and chosen with the keyboard.
	pickPrincipal(t, tab, "mia", mia.User.ID, true)
	clickButton(t, tab, ".share", "Share")
	waitFor(t, tab, "mia in the access list", `document.querySelector('[data-table="access"] tr[data-principal="`+mia.User.ID+`"]')`)
	waitText(t, tab, "Shared with Mia Member (mia).")
	if g := s.grants(t, notes.id); !hasUser(g, mia.User.ID) {
		t.Fatalf("after sharing with mia the API has the access grants %+v", g.Access)
	}
	miaTab := consoleTab(t, browse(t))
	s.signInTab(t, miaTab, "mia", "mia-password-5150-x")
	miaTab.Go(s.console + "/")
	tile := `.tile[data-app="` + notes.id + `"]`
	waitFor(t, miaTab, "the shared app's tile in mia's launcher", `document.querySelector('`+tile+`')`)

	// A group, to administer the app as viewer, then as developer.
	tab.MustEval(`document.querySelector('input[name="share_plane"][value="control"]').click()`, nil)
	tab.MustEval(`(() => { const s = document.getElementById("share-role"); s.value = "role_viewer"; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, nil)
	pickPrincipal(t, tab, "oper", ops.Group.ID, false)
	clickButton(t, tab, ".share", "Share")
	row := `[data-table="management"] tr[data-principal="` + ops.Group.ID + `"]`
	waitFor(t, tab, "the group administering the app", `document.querySelector('`+row+` select') && document.querySelector('`+row+` select').value === "role_viewer"`)
	tab.MustEval(`(() => { const s = document.querySelector('`+row+` select'); s.value = "role_developer"; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, nil)
	waitText(t, tab, "Operators now administers the app as developer.")
	var groupRole string
	for _, g := range s.grants(t, notes.id).Management {
		if g.PrincipalID != nil && *g.PrincipalID == ops.Group.ID && g.RoleID != nil {
			groupRole = *g.RoleID
		}
	}
	if groupRole != "role_developer" {
		t.Errorf("after the role's change the group's management grant has the role %q; want role_developer", groupRole)
	}

	// Everyone: refused without a passcode (host policy), made with one.
	tab.MustEval(`document.querySelector('input[name="share_with"][value="everyone"]').click()`, nil)
	waitFor(t, tab, "the passcode choice", `document.querySelector('input[name="share_ask_passcode"]')`)
	tab.MustEval(`document.querySelector('input[name="share_ask_passcode"]').click()`, nil)
	waitText(t, tab, "anyone who has the app’s address opens it")
	clickButton(t, tab, ".share", "Share")
	waitFor(t, tab, "the refusal of everyone without a passcode", `document.querySelector('#share-error .code')`)
	var refusal string
	tab.MustEval(`document.querySelector('#share-error').innerText`, &refusal)
	if !strings.Contains(refusal, "POLICY_ANONYMOUS_GRANT_FORBIDDEN") {
		t.Errorf("sharing with everyone without a passcode shows %q; want the API's POLICY_ANONYMOUS_GRANT_FORBIDDEN", refusal)
	}
	accessible(t, tab, "the sharing page with a refusal")
	screenshots(t, tab, "app-sharing-refused")
	tab.MustEval(`document.querySelector('input[name="share_ask_passcode"]').click()`, nil)
	waitFor(t, tab, "the passcode field", `document.querySelector('input[name="share_passcode"]')`)
	const passcode = "open-sesame-4242"
	fill(t, tab, map[string]string{"share_passcode": passcode}, "share_passcode")
	waitFor(t, tab, "everyone in the access list", `document.querySelector('[data-table="access"] tr[data-principal="anonymous"]') && document.querySelector('[data-table="access"] tr[data-principal="anonymous"]').innerText.includes("asked")`)
	var everyone string
	for _, g := range s.grants(t, notes.id).Access {
		if g.PrincipalKind == "anonymous" {
			everyone = g.ID
			if !g.Passcode {
				t.Errorf("the grant to everyone made through the page has no passcode")
			}
		}
	}
	if everyone == "" {
		t.Fatalf("the API has no grant to everyone after sharing with everyone")
	}
	var shown bool
	tab.MustEval(`document.body.innerHTML.includes(`+strconv.Quote(passcode)+`) || [...document.querySelectorAll("input")].some((i) => i.value === `+strconv.Quote(passcode)+`)`, &shown)
	if shown {
		t.Errorf("the passcode is still in the page after sharing")
	}
	accessible(t, tab, "the sharing page shared with everyone")
	screenshots(t, tab, "app-sharing-everyone")

	// An anonymous browser reaches the app after the passcode.
	pc := consoleTab(t, browse(t))
	pc.Go(notes.url)
	if !strings.HasPrefix(pc.URL(), s.console+"/passcode/"+notes.id+"?next=") {
		t.Fatalf("the app shared behind a passcode sent an anonymous browser to %s", pc.URL())
	}
	waitFor(t, pc, "the passcode form", `!document.querySelector('button[type=submit]').disabled`)
	fill(t, pc, map[string]string{"passcode": passcode}, "passcode")
	waitURL(t, pc, "the app after the passcode", func(a string) bool { return a == notes.url })
	noProblems(t, pc)

	// Removing the passcode is refused under passcode_only.
	clickButton(t, tab, ".passcode-editor", "Remove passcode")
	clickButton(t, tab, "dialog.confirm", "Remove passcode")
	waitFor(t, tab, "the refusal to remove the passcode", `document.querySelector('#passcode-error .code')`)
	if g := s.grants(t, notes.id); !hasPasscode(g) {
		t.Errorf("the refused removal removed the passcode")
	}

	// A viewer of the app sees its grants but is shown, instead of the
	// form, the API's refusal to share it; no grant can be removed.
	var vic struct {
		User struct{ ID string } `json:"user"`
	}
	s.must(t, "POST", "/users", map[string]any{"username": "vic", "display_name": "Vic Viewer", "password": "vic-password-6160-x"}, http.StatusCreated, &vic)
	s.must(t, "POST", "/apps/"+notes.id+"/grants", map[string]any{"plane": "control", "principal_kind": "user", "principal_id": vic.User.ID, "role_id": "role_viewer"}, http.StatusCreated, nil)
	vicTab := consoleTab(t, browse(t))
	s.signInTab(t, vicTab, "vic", "vic-password-6160-x")
	vicTab.Go(s.console + "/apps/" + notes.id + "/sharing")
	waitFor(t, vicTab, "the viewer's refusal to share", `document.querySelector('.share [role=alert] .code') && document.querySelector('[data-table="access"]')`)
	var vicSees struct {
		Code    string
		Form    bool
		Removes int
	}
	vicTab.MustEval(`({code: document.querySelector('.share [role=alert] .code code').innerText, form: !!document.querySelector('.share form'), removes: document.querySelectorAll('.row-actions button').length})`, &vicSees)
	if !strings.HasPrefix(vicSees.Code, "PERM_") || vicSees.Form || vicSees.Removes != 0 {
		t.Errorf("a viewer's sharing page: %+v; want the API's PERM_ refusal, no form and no Remove", vicSees)
	}
	accessible(t, vicTab, "the sharing page of a viewer")
	screenshots(t, vicTab, "app-sharing-viewer")
	noProblems(t, vicTab)

	// Remove the grant to everyone, then mia's: her tile goes.
	removeGrant(t, tab, "access", "anonymous")
	removeGrant(t, tab, "access", mia.User.ID)
	waitText(t, tab, "Mia Member (mia) no longer opens the app.")
	if g := s.grants(t, notes.id); len(g.Access) != 1 || !hasUser(g, admin) {
		t.Errorf("after removing both, the API has the access grants %+v; want only the creator's", g.Access)
	}
	miaTab.Go(s.console + "/")
	waitFor(t, miaTab, "mia's launcher without the app", `document.querySelector('.launcher') && !document.querySelector('.tile.skeleton') && (document.querySelectorAll('.tile').length > 0 || document.body.innerText.includes("No apps yet")) && !document.querySelector('`+tile+`')`)
	screenshots(t, tab, "app-sharing-removed")

	noProblems(t, tab)
	noProblems(t, miaTab)
	onlyAPI(t, tab, s.console)
	onlyAPI(t, miaTab, s.console)
}

// hasUser says whether an account can open the app by a grant of its own.
func hasUser(g grantsView, userID string) bool {
	for _, a := range g.Access {
		if a.PrincipalKind == "user" && a.PrincipalID != nil && *a.PrincipalID == userID {
			return true
		}
	}
	return false
}

// hasPasscode says whether the grant to everyone asks a passcode.
func hasPasscode(g grantsView) bool {
	for _, a := range g.Access {
		if a.PrincipalKind == "anonymous" {
			return a.Passcode
		}
	}
	return false
}

// pickPrincipal types query into the principal search and chooses the
// match with the ID id by the keyboard alone (Down until it is the active
// option, then Enter), checking the combobox's ARIA state on the way.
func pickPrincipal(t *testing.T, tab *browsertest.Tab, query, id string, check bool) {
	t.Helper()
	tab.MustEval(`(() => { const i = document.getElementById("share-principal"); i.focus(); i.value = `+strconv.Quote(query)+`; i.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`, nil)
	opt := `#principal-options [role=option][data-principal="` + id + `"]`
	waitFor(t, tab, "the search's match "+id, `document.querySelector('`+opt+`') && document.getElementById("share-principal").getAttribute("aria-expanded") === "true"`)
	if check {
		accessible(t, tab, "the principal search, open")
		screenshots(t, tab, "app-sharing-search")
	}
	for i := 0; i < 40; i++ {
		var active string
		tab.MustEval(`(() => { const i = document.getElementById("share-principal"); i.dispatchEvent(new KeyboardEvent("keydown", {key: "ArrowDown", bubbles: true})); return true; })()`, nil)
		tab.MustEval(`new Promise((r) => setTimeout(() => { const a = document.getElementById("share-principal").getAttribute("aria-activedescendant"); const o = a && document.getElementById(a); r(o && o.getAttribute("aria-selected") === "true" ? o.dataset.principal : ""); }, 20))`, &active)
		if active == id {
			tab.MustEval(`(() => { const i = document.getElementById("share-principal"); i.dispatchEvent(new KeyboardEvent("keydown", {key: "Enter", bubbles: true})); return true; })()`, nil)
			waitFor(t, tab, "the choice of "+id, `document.getElementById("share-principal").getAttribute("aria-expanded") === "false" && document.getElementById("share-principal-hint").innerText.startsWith("Chosen:")`)
			return
		}
	}
	t.Fatalf("the keyboard never made %s the active option", id)
}

// removeGrant removes the grant of principal (an ID, or anonymous) from a
// table of the sharing page through its confirmation, and waits for its row
// to go.
func removeGrant(t *testing.T, tab *browsertest.Tab, table, principal string) {
	t.Helper()
	row := `[data-table="` + table + `"] tr[data-principal="` + principal + `"]`
	click(t, tab, row+` .row-actions button`)
	waitFor(t, tab, "the removal's confirmation", `document.querySelector('dialog.confirm[open]')`)
	clickButton(t, tab, "dialog.confirm", "Remove")
	waitFor(t, tab, "the grant of "+principal+" gone", `!document.querySelector('dialog.confirm') && !document.querySelector('`+row+`')`)
}

// TestConsoleSecretsAndSettings, on a server with an onboarded app whose
// latest revision declares a postgres slot:
//   - secrets: the empty state; a secret set through the page (the value
//     in a password field) is listed by the API at version 1, and
//     afterwards the value is nowhere in the page (its text, its markup,
//     any field) nor in any request's URL; Rotate makes version 2; Read
//     value asks first, saying the read is audited, then shows the value
//     masked (the audit log has secret.read), Reveal shows it, and leaving
//     the page forgets it;
//   - slots: the declared slot, not filled; filled with values (the
//     password write-only) it is, in the API, filled by value with the
//     password among its secret fields, and the page says it takes effect
//     at the next deploy, without showing the password;
//   - settings: an image dropped on the tile's drop zone becomes what
//     GET …/icon answers, byte for byte; an SVG chosen with the file input
//     is refused with the API's message shown; removing the image brings
//     back the generated one; rename and a new slug reach the API; delete
//     asks for a backup decision and the slug (the button is disabled until
//     both are given), then the app is gone (NOT_FOUND), its audit entry
//     records backup: true, and the console is at /apps.
//
// All through, only /api/v1, no problem, axe-core clean light and dark.
func TestConsoleSecretsAndSettings(t *testing.T) {
	s := startWebServer(t, "port", "SVC_RUNTIME_ISOLATION=none")
	appID, _ := s.onboard(t, "Ledger", samples[3].dir, samples[3].detector)
	var one struct {
		Spec struct {
			Spec specDoc `json:"spec"`
		} `json:"spec"`
	}
	s.must(t, "GET", "/apps/"+appID+"/specs/1", nil, http.StatusOK, &one)
	withSlot := clone(t, one.Spec.Spec)
	withSlot["slots"] = map[string]any{"db": map[string]any{"type": "postgres", "required": true}}
	s.newRevision(t, appID, withSlot)

	tab := consoleTab(t, browse(t))
	watchLayoutShift(tab)
	s.signInTab(t, tab, "admin", adminPassword)

	// Secrets.
	tab.Go(s.console + "/apps/" + appID + "/secrets")
	waitText(t, tab, "No secrets yet")
	noLayoutShift(t, tab, "the secrets page")
	accessible(t, tab, "the secrets page, empty")
	const value, rotated = "s3cr3t-value-93f1-x", "s3cr3t-value-rotated-77"
	fill(t, tab, map[string]string{"secret_key": "API_TOKEN", "secret_value": value}, "secret_key", "secret_value")
	waitFor(t, tab, "the secret listed", `document.querySelector('[data-table="secrets"] tr[data-secret="API_TOKEN"]')`)
	var list struct {
		Items []struct {
			Key     string `json:"key"`
			Version int    `json:"version"`
		} `json:"items"`
	}
	s.must(t, "GET", "/apps/"+appID+"/secrets", nil, http.StatusOK, &list)
	if len(list.Items) != 1 || list.Items[0].Key != "API_TOKEN" || list.Items[0].Version != 1 {
		t.Errorf("after setting API_TOKEN the API lists %+v", list.Items)
	}
	notInPage(t, tab, value)
	click(t, tab, `tr[data-secret="API_TOKEN"] button[aria-label="Rotate API_TOKEN"]`)
	waitFor(t, tab, "the form set to rotate", `document.querySelector('input[name="secret_key"]').value === "API_TOKEN" && document.activeElement === document.querySelector('input[name="secret_value"]')`)
	fill(t, tab, map[string]string{"secret_value": rotated}, "secret_value")
	waitText(t, tab, "API_TOKEN rotated to version 2.")
	notInPage(t, tab, rotated)
	accessible(t, tab, "the secrets page")
	screenshots(t, tab, "app-secrets")

	click(t, tab, `tr[data-secret="API_TOKEN"] button[aria-label="Read value of API_TOKEN"]`)
	waitFor(t, tab, "the audit warning", `document.querySelector('dialog.confirm[open]') && document.querySelector('dialog.confirm').innerText.includes("This read is audited")`)
	if s.audited(t, "secret.read", appID) {
		t.Errorf("the value was read before the warning was confirmed")
	}
	accessible(t, tab, "the secret read's warning")
	screenshots(t, tab, "app-secrets-read-warning")
	clickButton(t, tab, "dialog.confirm", "Read and record it")
	waitFor(t, tab, "the value, masked", `document.querySelector('.secret-read output[data-masked="true"]')`)
	notInPage(t, tab, rotated)
	if !s.audited(t, "secret.read", appID) {
		t.Errorf("the audit log has no secret.read after the page read the value")
	}
	clickButton(t, tab, ".secret-read", "Reveal")
	waitFor(t, tab, "the value revealed", `document.querySelector('.secret-read output').innerText === `+strconv.Quote(rotated))
	accessible(t, tab, "the secrets page with a value read")
	click(t, tab, `nav.tabs a[href$="/slots"]`)

	// Slots.
	waitFor(t, tab, "the declared slot", `document.querySelector('[data-table="slots"] tr[data-slot="db"]')`)
	notInPage(t, tab, rotated) // leaving the secrets page forgot the value
	accessible(t, tab, "the slots page")
	screenshots(t, tab, "app-slots")
	click(t, tab, `tr[data-slot="db"] .row-actions button`)
	waitFor(t, tab, "the fill form", `document.querySelector('#fill-form')`)
	tab.MustEval(`document.querySelector('input[name="fill_mode"][value="value"]').click()`, nil)
	waitFor(t, tab, "the value fields", `document.querySelector('input[name="fill_password"]')`)
	var pwType string
	tab.MustEval(`document.querySelector('input[name="fill_password"]').type`, &pwType)
	if pwType != "password" {
		t.Errorf("the slot's password field is of type %q", pwType)
	}
	accessible(t, tab, "the slot's fill form")
	screenshots(t, tab, "app-slots-fill")
	const dbPassword = "pg-password-1d4e"
	fill(t, tab, map[string]string{"fill_host": "db.internal", "fill_database": "ledger", "fill_username": "ledger", "fill_password": dbPassword}, "fill_host", "fill_database", "fill_username", "fill_password")
	waitText(t, tab, "db is filled (value); this takes effect at the app’s next deploy.")
	var slotList struct {
		Items []struct {
			Key          string            `json:"key"`
			Filled       bool              `json:"filled"`
			Mode         *string           `json:"mode"`
			Fields       map[string]string `json:"fields"`
			SecretFields []string          `json:"secret_fields"`
			Effective    *string           `json:"effective"`
		} `json:"items"`
	}
	s.must(t, "GET", "/apps/"+appID+"/slots", nil, http.StatusOK, &slotList)
	if len(slotList.Items) != 1 || !slotList.Items[0].Filled || slotList.Items[0].Mode == nil || *slotList.Items[0].Mode != "value" ||
		slotList.Items[0].Fields["host"] != "db.internal" || !strings.Contains(strings.Join(slotList.Items[0].SecretFields, ","), "password") {
		t.Errorf("after the fill the API lists the slots %+v", slotList.Items)
	}
	waitFor(t, tab, "the slot filled", `document.querySelector('tr[data-slot="db"]').innerText.includes("takes effect at the next deploy") && document.querySelector('tr[data-slot="db"]').innerText.includes("set, never shown")`)
	notInPage(t, tab, dbPassword)
	screenshots(t, tab, "app-slots-filled")

	// Settings: the tile image.
	click(t, tab, `nav.tabs a[href$="/settings"]`)
	waitFor(t, tab, "the settings page", `document.querySelector('#tile-file') && document.querySelector('input[name="app_name"]').value === "Ledger"`)
	accessible(t, tab, "the settings page")
	screenshots(t, tab, "app-settings")
	pngBytes := testPNG(t)
	tab.MustEval(`(() => {
  const b = Uint8Array.from(atob(`+strconv.Quote(base64.StdEncoding.EncodeToString(pngBytes))+`), (c) => c.charCodeAt(0));
  const dt = new DataTransfer();
  dt.items.add(new File([b], "tile.png", {type: "image/png"}));
  document.querySelector('.dropzone').dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
  return true;
})()`, nil)
	waitText(t, tab, "The tile shows tile.png now.")
	if r := sendToken(s.token(), "GET", s.p.Base()+"/api/v1/apps/"+appID+"/icon", nil); r.status != http.StatusOK || !bytes.Equal(r.body, pngBytes) {
		t.Errorf("after the drop GET …/icon answers %d with %d bytes; want the %d bytes dropped", r.status, len(r.body), len(pngBytes))
	}
	waitFor(t, tab, "the preview of the new image", `(() => { const i = document.querySelector('.tile-preview'); return i.complete && i.naturalWidth === 32; })()`)
	svg := `<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><rect width="8" height="8"/></svg>`
	want := sendToken(s.token(), "PUT", s.p.Base()+"/api/v1/apps/"+appID+"/icon", strings.NewReader(svg))
	tab.MustEval(`(() => {
  const dt = new DataTransfer();
  dt.items.add(new File([`+strconv.Quote(svg)+`], "tile.svg", {type: "image/svg+xml"}));
  const i = document.getElementById("tile-file");
  i.files = dt.files;
  i.dispatchEvent(new Event("change", {bubbles: true}));
  return true;
})()`, nil)
	waitFor(t, tab, "the SVG refused", `document.querySelector('.tile-editor ~ [role=alert] .code')`)
	var svgRefusal string
	tab.MustEval(`document.querySelector('.tile-editor ~ [role=alert]').innerText`, &svgRefusal)
	if want.code() != "VALID_INVALID" || !strings.Contains(svgRefusal, "VALID_INVALID") || !strings.Contains(strings.ToLower(svgRefusal), strings.ToLower(strings.TrimSuffix(replyMessage(want), "."))) {
		t.Errorf("an SVG shows %q; the API refuses it with %s %q", svgRefusal, want.code(), replyMessage(want))
	}
	if r := sendToken(s.token(), "GET", s.p.Base()+"/api/v1/apps/"+appID+"/icon", nil); !bytes.Equal(r.body, pngBytes) {
		t.Errorf("the refused SVG changed the tile image")
	}
	accessible(t, tab, "the settings page with a refusal")
	screenshots(t, tab, "app-settings-svg-refused")
	clickButton(t, tab, ".tile-editor", "Remove image")
	clickButton(t, tab, "dialog.confirm", "Remove image")
	waitText(t, tab, "The image is removed; the tile shows a generated one.")
	if r := sendToken(s.token(), "GET", s.p.Base()+"/api/v1/apps/"+appID+"/icon", nil); r.status != http.StatusOK || bytes.Equal(r.body, pngBytes) {
		t.Errorf("after removing the image GET …/icon answers %d, the image removed: %t", r.status, bytes.Equal(r.body, pngBytes))
	}

	// Rename and a new slug.
	fill(t, tab, map[string]string{"app_name": "Ledger Two", "app_slug": "ledger-two"}, "app_name", "app_slug")
	waitFor(t, tab, "the new name in the header", `document.querySelector('.app-head h1').innerText === "Ledger Two"`)
	var got struct {
		App struct{ Name, Slug string } `json:"app"`
	}
	s.must(t, "GET", "/apps/"+appID, nil, http.StatusOK, &got)
	if got.App.Name != "Ledger Two" || got.App.Slug != "ledger-two" {
		t.Errorf("after the rename the API has %+v", got.App)
	}

	// Delete, with the backup decision and the slug typed.
	clickButton(t, tab, ".danger-zone", "Delete this app…")
	waitFor(t, tab, "the delete dialog", `document.querySelector('dialog.delete-dialog[open]')`)
	var disabled bool
	tab.MustEval(`document.querySelector('dialog.delete-dialog button[type=submit]').disabled`, &disabled)
	if !disabled {
		t.Errorf("the delete button is enabled before a decision and the slug")
	}
	tab.MustEval(`(() => { const i = document.getElementById("delete-slug"); i.value = "ledger-two"; i.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`, nil)
	tab.MustEval(`new Promise((r) => setTimeout(() => r(document.querySelector('dialog.delete-dialog button[type=submit]').disabled), 50))`, &disabled)
	if !disabled {
		t.Errorf("the delete button is enabled with the slug but no backup decision")
	}
	tab.MustEval(`document.querySelector('input[name="delete_decision"][value="backup"]').click()`, nil)
	waitFor(t, tab, "the delete button enabled", `!document.querySelector('dialog.delete-dialog button[type=submit]').disabled`)
	accessible(t, tab, "the delete dialog")
	screenshots(t, tab, "app-settings-delete")
	click(t, tab, `dialog.delete-dialog button[type=submit]`)
	waitURL(t, tab, "after deleting", func(a string) bool { return a == s.console+"/apps" })
	s.must(t, "GET", "/apps/"+appID, nil, http.StatusNotFound, nil)
	var audit struct {
		Items []struct {
			Details map[string]any `json:"details"`
		} `json:"items"`
	}
	s.must(t, "GET", "/audit?action=app.delete&app_id="+url.QueryEscape(appID), nil, http.StatusOK, &audit)
	if len(audit.Items) != 1 || audit.Items[0].Details["backup"] != true || audit.Items[0].Details["force"] != false {
		t.Errorf("the delete's audit entries: %+v; want one with backup true, force false", audit.Items)
	}

	noProblems(t, tab)
	onlyAPI(t, tab, s.console)
	for _, r := range tab.Requests() {
		for _, secret := range []string{value, rotated, dbPassword} {
			if strings.Contains(r.URL, secret) || strings.Contains(r.URL, url.QueryEscape(secret)) {
				t.Errorf("a request's URL carries a secret: %s %s", r.Method, r.URL)
			}
		}
	}
}

// replyMessage is the message of an error answer.
func replyMessage(r reply) string {
	var e struct{ Message string }
	_ = json.Unmarshal(r.body, &e)
	return e.Message
}

// notInPage fails the test when secret is in the page: its text, its
// markup, or the value of any field.
func notInPage(t *testing.T, tab *browsertest.Tab, secret string) {
	t.Helper()
	var found bool
	q := strconv.Quote(secret)
	tab.MustEval(`document.body.innerText.includes(`+q+`) || document.documentElement.outerHTML.includes(`+q+`) || [...document.querySelectorAll("input, textarea")].some((i) => i.value.includes(`+q+`))`, &found)
	if found {
		t.Errorf("the page at %s shows a secret value", tab.URL())
	}
}

// testPNG is a 32×32 PNG.
func testPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 32, 32))
	for y := 0; y < 32; y++ {
		for x := 0; x < 32; x++ {
			img.Set(x, y, color.NRGBA{R: uint8(x * 8), G: 80, B: uint8(y * 8), A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
