package e2e

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/browsertest"
)

// The installation's host pages (/admin/adapters, /admin/policy,
// /admin/audit, /admin/config, /admin/capacity) in a real Chromium
// against the real binary. Run them with:
//
//	go test -count=1 -run 'TestConsoleAdminHost' ./internal/e2e/

// recordBodies makes the tab's pages keep the body of every answer their
// fetches receive in window.__bodies (the console reads the API only with
// fetch), so a test can say what the console was ever sent.
const recordBodies = `window.__bodies = []; { const f = window.fetch.bind(window);
window.fetch = async (...a) => { const r = await f(...a); r.clone().text().then((t) => window.__bodies.push(String(a[0]) + " " + t), () => {}); return r; }; }`

// auditItem is an audit entry as GET /api/v1/audit answers it.
type auditItem struct {
	ID            string    `json:"id"`
	Time          time.Time `json:"time"`
	Action        string    `json:"action"`
	PrincipalID   string    `json:"principal_id"`
	PrincipalKind string    `json:"principal_kind"`
	AppID         *string   `json:"app_id"`
	TargetKind    *string   `json:"target_kind"`
	TargetID      *string   `json:"target_id"`
}

// TestConsoleAdminHost, on a server in port mode with host policy's
// insecure_grace_hours fixed by the environment, a deployed app, an app
// shared with everyone, and a member who signed in:
//   - configuration: every setting GET /api/v1/config gives is on the page
//     with its value (a secret one as "secret, not shown") and its origin,
//     in its group; the fixed policy setting is listed with its value;
//   - capacity: the meters carry what GET /api/v1/capacity says the host
//     has and apps commit (CPU, memory, host ports), and the table has a
//     row for every app GET /api/v1/apps lists;
//   - host policy: the fixed setting is read-only, shows its value and says
//     it was fixed by SVC_POLICY_INSECURE_GRACE_HOURS; min_security_score
//     500 previews as the API's refusal naming it; public_sharing set to
//     passcode_only previews, before anything is saved (the API's policy is
//     unchanged), exactly the apps POST /api/v1/policy/preview names for
//     that policy (the app shared with everyone, linked to its page); Save
//     asks for confirmation naming it, and the saved value is the API's;
//   - adapters: a postgres slots adapter added through the page, and its
//     password replaced, is listed by the API with the credential set and
//     pending_restart, the page saying "waits for restart" and the restart
//     needed; neither password is ever in the page (its markup or any
//     field) nor in any answer the page received; the restart the page
//     asks for (confirmed) comes back with the adapter loaded and nothing
//     waiting for a restart, the API agreeing;
//   - the audit log: each filter (action prefix, principal_id,
//     principal_kind, app_id, target_kind, target_id, involving, since,
//     until, and two together), set through the page's form, is kept in
//     the address and shows exactly the entries GET /api/v1/audit answers
//     for the address's query — fewer than unfiltered, each matching the
//     filter — and so does a reload of that address, its form showing the
//     filter again; with limit=2 in the address, "Older entries" pages with
//     before= as the API does, and the older page survives a reload;
//   - an auditor (install.view and install.audit.read, not the manage
//     verbs) is offered no change: the policy read-only, saying which verb
//     changing it needs, with no preview or Save; adapters without a
//     button; the audit log readable.
//
// All through, the console calls only /api/v1 on its own origin and reports
// no problem; axe-core finds no serious violation on each page, in the
// light and dark themes; screenshots of each go to SVC_SCREENSHOTS.
func TestConsoleAdminHost(t *testing.T) {
	s := startWebServer(t, "port", "SVC_RUNTIME_ISOLATION=none", "SVC_POLICY_INSECURE_GRACE_HOURS=48")
	notes := s.app(t, "notes")
	open := s.createApp(t, "Open Board")
	s.shareWithEveryone(t, open)
	quiet := s.createApp(t, "Quiet Ledger")
	bobID, _ := s.member(t, "bob")

	tab := consoleTab(t, browse(t))
	tab.OnNewDocument(recordBodies)
	watchLayoutShift(tab)
	s.signInTab(t, tab, "admin", adminPassword)

	// Configuration.
	var cfg struct {
		Settings []struct {
			Name, Env, Value, Origin string
			Secret                   bool
		} `json:"settings"`
		PolicyFixed []struct {
			Name   string `json:"name"`
			Value  any    `json:"value"`
			Origin string `json:"origin"`
		} `json:"policy_fixed"`
	}
	s.must(t, "GET", "/config", nil, http.StatusOK, &cfg)
	tab.Go(s.console + "/admin/config")
	waitFor(t, tab, "the configuration", `document.querySelector('[data-table="config"]')`)
	noLayoutShift(t, tab, "the configuration page")
	var rows map[string][]string
	tab.MustEval(`Object.fromEntries([...document.querySelectorAll('[data-table="config"] tr[data-setting]')].map((r) => [r.dataset.setting,
  [r.closest("section").dataset.group, r.querySelector("td.value").innerText.trim(), r.querySelector("td:last-child").innerText.trim(), r.querySelector("th .env").innerText.trim()]]))`, &rows)
	if len(rows) != len(cfg.Settings) || len(rows) == 0 {
		t.Errorf("the configuration page lists %d settings; the API gives %d", len(rows), len(cfg.Settings))
	}
	words := map[string]string{"environment": "environment", "config_file": "configuration file", "default": "default"}
	secrets := 0
	for _, c := range cfg.Settings {
		want := c.Value
		switch {
		case c.Secret:
			want = "secret, not shown"
			secrets++
		case c.Value == "":
			want = "empty"
		}
		group := c.Name[:max(strings.Index(c.Name, "."), 0)]
		if group == "" {
			group = "general"
		}
		if r := rows[c.Name]; len(r) != 4 || r[0] != group || r[1] != want || r[2] != words[c.Origin] || r[3] != c.Env {
			t.Errorf("the configuration page shows %s as %q; the API has %q from %s (%s)", c.Name, r, c.Value, c.Origin, c.Env)
		}
	}
	if rows["server.routing_mode"] == nil || rows["server.routing_mode"][1] != "port" || rows["server.routing_mode"][2] != "environment" {
		t.Errorf("server.routing_mode shows as %q; the server was started with SVC_SERVER_ROUTING_MODE=port", rows["server.routing_mode"])
	}
	var fixedShown string
	tab.MustEval(`document.querySelector('[data-table="policy-fixed"] tr[data-setting="insecure_grace_hours"]').innerText`, &fixedShown)
	if len(cfg.PolicyFixed) != 1 || !strings.Contains(fixedShown, "48") || !strings.Contains(fixedShown, "environment") {
		t.Errorf("the fixed policy setting shows as %q; the API has %+v", fixedShown, cfg.PolicyFixed)
	}
	t.Logf("configuration: %d settings (%d secret) in %d groups", len(rows), secrets, countGroups(rows))
	accessible(t, tab, "the configuration page")
	screenshots(t, tab, "admin-config")

	// Capacity.
	var capa struct {
		Host struct {
			CPUMillis   int64 `json:"cpu_millis"`
			MemoryBytes int64 `json:"memory_bytes"`
		} `json:"host"`
		Committed struct {
			CPUMillis   int64 `json:"cpu_millis"`
			MemoryBytes int64 `json:"memory_bytes"`
			Apps        int   `json:"apps"`
		} `json:"committed"`
		Ports struct{ Start, End, Used int } `json:"ports"`
	}
	s.must(t, "GET", "/capacity", nil, http.StatusOK, &capa)
	tab.MustEval(`window.__cls = 0`, nil)
	tab.Go(s.console + "/admin/capacity")
	waitFor(t, tab, "the capacity meters and the apps", `document.querySelector('[data-meter="cpu"][data-used]') && document.querySelector('[data-table="capacity-apps"]')`)
	noLayoutShift(t, tab, "the capacity page")
	var meters map[string][2]int64
	tab.MustEval(`Object.fromEntries([...document.querySelectorAll('[data-meter]')].map((m) => [m.dataset.meter, [Number(m.dataset.used), Number(m.dataset.of)]]))`, &meters)
	wantMeters := map[string][2]int64{
		"cpu":    {capa.Committed.CPUMillis, capa.Host.CPUMillis},
		"memory": {capa.Committed.MemoryBytes, capa.Host.MemoryBytes},
		"ports":  {int64(capa.Ports.Used), int64(capa.Ports.End - capa.Ports.Start + 1)},
	}
	for k, want := range wantMeters {
		if meters[k] != want {
			t.Errorf("the capacity page's %s meter is %v (committed, of); the API says %v", k, meters[k], want)
		}
	}
	if capa.Host.CPUMillis <= 0 || capa.Ports.Used != 1 {
		t.Errorf("the API's capacity: %+v; want the host's CPU and the deployed app's one port", capa)
	}
	var appRows []string
	tab.MustEval(`[...document.querySelectorAll('[data-table="capacity-apps"] tr[data-app]')].map((r) => r.dataset.app)`, &appRows)
	slices.Sort(appRows)
	want := []string{notes.id, open, quiet}
	slices.Sort(want)
	if !slices.Equal(appRows, want) {
		t.Errorf("the capacity page's apps are %v; the API's are %v", appRows, want)
	}
	var noteRow string
	tab.MustEval(`document.querySelector('[data-table="capacity-apps"] tr[data-app="`+notes.id+`"]').innerText`, &noteRow)
	if !strings.Contains(noteRow, "running") || !strings.Contains(noteRow, "notes") {
		t.Errorf("the deployed app's row on the capacity page: %q", noteRow)
	}
	accessible(t, tab, "the capacity page")
	screenshots(t, tab, "admin-capacity")

	// Host policy: the fixed setting, then a change previewed and saved.
	tab.Go(s.console + "/admin/policy")
	waitFor(t, tab, "the policy's settings", `document.querySelector('[data-setting="insecure_grace_hours"] input')`)
	var fixed struct {
		ReadOnly bool   `json:"readOnly"`
		Value    string `json:"value"`
		Text     string `json:"text"`
		Fixed    string `json:"fixed"`
	}
	tab.MustEval(`(() => { const d = document.querySelector('[data-setting="insecure_grace_hours"]'); const i = d.querySelector("input");
  return {readOnly: i.readOnly || i.disabled, value: i.value, text: d.innerText, fixed: d.dataset.fixed || ""}; })()`, &fixed)
	if !fixed.ReadOnly || fixed.Value != "48" || fixed.Fixed != "true" || !strings.Contains(fixed.Text, "SVC_POLICY_INSECURE_GRACE_HOURS") || !strings.Contains(fixed.Text, "fixed") {
		t.Errorf("the fixed setting insecure_grace_hours: %+v; want read-only, 48, saying it was fixed by SVC_POLICY_INSECURE_GRACE_HOURS", fixed)
	}
	var editable bool
	tab.MustEval(`(() => { const c = document.querySelector('[data-setting="min_security_score"] input'); return !c.readOnly && !c.disabled; })()`, &editable)
	if !editable {
		t.Errorf("min_security_score, which is not fixed, is read-only on the policy page")
	}
	var shownCount int
	tab.MustEval(`document.querySelectorAll('[data-setting]').length`, &shownCount)
	var pol struct {
		Policy map[string]any `json:"policy"`
		Fixed  []string       `json:"fixed"`
	}
	s.must(t, "GET", "/policy", nil, http.StatusOK, &pol)
	if shownCount != len(pol.Policy) || !slices.Equal(pol.Fixed, []string{"insecure_grace_hours"}) {
		t.Errorf("the policy page shows %d settings; the API has %d (fixed %v)", shownCount, len(pol.Policy), pol.Fixed)
	}
	// A value out of range: the preview shows the API's refusal, naming it.
	setValue(t, tab, `input[name="min_security_score"]`, "500")
	waitFor(t, tab, "the preview refusing 500", `document.querySelector('.preview [role=alert] .code')`)
	var refusal string
	tab.MustEval(`document.querySelector('.preview [role=alert]').innerText`, &refusal)
	if !strings.Contains(refusal, "VALID_INVALID") || !strings.Contains(refusal, "min_security_score") {
		t.Errorf("min_security_score 500 previews as %q; want the API's VALID_INVALID naming the setting", refusal)
	}
	setValue(t, tab, `input[name="min_security_score"]`, "0")
	waitText(t, tab, "No change yet.")
	tab.MustEval(`(() => { const e = document.querySelector('select[name="public_sharing"]'); e.value = "passcode_only"; e.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, nil)
	waitFor(t, tab, "the preview of the change", `document.querySelector('.preview').dataset.preview === "1"`)
	var previewed []string
	tab.MustEval(`[...document.querySelectorAll('.preview [data-list="blocked"] li')].map((l) => l.dataset.app + " " + l.querySelector("a").getAttribute("href") + " " + l.querySelector(".code").innerText)`, &previewed)
	candidate := maps.Clone(pol.Policy)
	candidate["public_sharing"] = "passcode_only"
	var preview struct {
		Blocked []struct {
			AppID   string `json:"app_id"`
			Reasons []struct{ Code string }
		} `json:"blocked"`
	}
	s.must(t, "POST", "/policy/preview", map[string]any{"policy": candidate}, http.StatusOK, &preview)
	var apiPreview []string
	for _, b := range preview.Blocked {
		apiPreview = append(apiPreview, b.AppID+" /apps/"+b.AppID+" "+b.Reasons[0].Code)
	}
	if len(previewed) != 1 || !slices.Equal(previewed, apiPreview) || !strings.HasPrefix(previewed[0], open+" ") {
		t.Errorf("the page previews %q as blocked; the API's preview is %q; want the app shared with everyone, %s", previewed, apiPreview, open)
	}
	s.must(t, "GET", "/policy", nil, http.StatusOK, &pol)
	if pol.Policy["public_sharing"] != "" {
		t.Errorf("previewing saved the policy: public_sharing is %v", pol.Policy["public_sharing"])
	}
	accessible(t, tab, "the policy page with a preview")
	screenshots(t, tab, "admin-policy-preview")
	click(t, tab, `.preview button[type=submit]`)
	waitFor(t, tab, "the confirmation naming the blocked app", `document.querySelector('dialog.confirm[open] [data-list="blocked"] li[data-app="`+open+`"]')`)
	accessible(t, tab, "the policy's confirmation")
	screenshots(t, tab, "admin-policy-confirm")
	clickButton(t, tab, "dialog.confirm", "Save and block 1 app")
	waitText(t, tab, "Saved: public_sharing.")
	s.must(t, "GET", "/policy", nil, http.StatusOK, &pol)
	if pol.Policy["public_sharing"] != "passcode_only" || pol.Policy["insecure_grace_hours"] != float64(48) {
		t.Errorf("after saving, the API's policy has public_sharing %v, insecure_grace_hours %v", pol.Policy["public_sharing"], pol.Policy["insecure_grace_hours"])
	}
	var policyUpdates []auditItem
	s.must(t, "GET", "/audit?action=policy.update", nil, http.StatusOK, &struct {
		Items *[]auditItem `json:"items"`
	}{&policyUpdates})
	if len(policyUpdates) != 1 || policyUpdates[0].PrincipalKind != "user" {
		t.Fatalf("policy.update entries: %+v; want the one the page made, by the signed-in user", policyUpdates)
	}
	adminID := policyUpdates[0].PrincipalID

	// Adapters: a postgres slots adapter with a password, then the password
	// replaced; neither is ever shown or sent to the page.
	first, second := "pg-first-"+randomHex(t), "pg-second-"+randomHex(t)
	tab.Go(s.console + "/admin/adapters")
	waitFor(t, tab, "the slots adapters", `document.querySelector('[data-category="slots"] .section-head button')`)
	click(t, tab, `[data-category="slots"] .section-head button`)
	waitFor(t, tab, "the form of a new adapter", `document.querySelector('[data-category="slots"] select[name="kind"]')`)
	tab.MustEval(`(() => { const e = document.querySelector('[data-category="slots"] select[name="kind"]'); e.value = "postgres"; e.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, nil)
	waitFor(t, tab, "the postgres form", `document.querySelector('input[name="credential_password"]')`)
	accessible(t, tab, "the adapters page adding an adapter")
	fill(t, tab, map[string]string{"host": "db.internal", "username": "svc_admin", "credential_password": first}, "host", "username", "credential_password")
	var adapterID string
	waitForAPI(t, "the postgres adapter configured", func() bool {
		adapterID = s.postgresAdapter(t)
		return adapterID != ""
	})
	card := `[data-adapter="` + adapterID + `"]`
	waitFor(t, tab, "the new adapter's card", `document.querySelector('`+card+`') && document.querySelector('`+card+`').innerText.includes("waits for restart")`)
	var credShown string
	tab.MustEval(`document.querySelector('`+card+` [data-credential="password"]').innerText`, &credShown)
	if !strings.HasPrefix(credShown, "set") || !strings.Contains(credShown, "write-only") {
		t.Errorf("the adapter's password shows as %q; want set, write-only", credShown)
	}
	waitFor(t, tab, "the restart asked for", `document.querySelector('[data-restart-needed="true"]')`)
	click(t, tab, card+` button[aria-label="Edit `+adapterID+`"]`)
	waitFor(t, tab, "the edit form", `document.querySelector('`+card+` input[name="credential_password"]')`)
	var placeholder string
	tab.MustEval(`document.querySelector('`+card+` input[name="credential_password"]').value + "|" + document.querySelector('`+card+` label[for$="cred-password"]').innerText`, &placeholder)
	if placeholder != "|Replace password" {
		t.Errorf("the edit form's password field: %q; want empty, labelled Replace password", placeholder)
	}
	accessible(t, tab, "the adapters page editing an adapter")
	screenshots(t, tab, "admin-adapters-edit")
	fill(t, tab, map[string]string{"credential_password": second}, "credential_password")
	waitFor(t, tab, "the edit saved", `!document.querySelector('`+card+` form') && document.body.innerText.includes("Saved `+adapterID+`")`)
	var configured []struct {
		Details map[string]any `json:"details"`
	}
	s.must(t, "GET", "/audit?action=adapter.configure&target_id="+adapterID, nil, http.StatusOK, &struct {
		Items *[]struct {
			Details map[string]any `json:"details"`
		} `json:"items"`
	}{&configured})
	if len(configured) != 2 || configured[0].Details["credentials_changed"] != true {
		t.Errorf("adapter.configure entries of %s: %+v; want two, the newest changing the credential", adapterID, configured)
	}
	var list struct {
		Items []struct {
			AdapterID      string   `json:"adapter_id"`
			CredentialsSet []string `json:"credentials_set"`
			PendingRestart bool     `json:"pending_restart"`
		} `json:"items"`
		RestartNeeded bool `json:"restart_needed"`
	}
	r := s.call(t, "GET", "/adapters", nil)
	mustJSON(t, r.body, &list)
	found := false
	for _, a := range list.Items {
		if a.AdapterID == adapterID {
			found = slices.Equal(a.CredentialsSet, []string{"password"}) && a.PendingRestart
		}
	}
	if !found || !list.RestartNeeded {
		t.Errorf("the API lists the adapter as %s; want %s with the password set, waiting for a restart", r.body, adapterID)
	}
	screenshots(t, tab, "admin-adapters")
	accessible(t, tab, "the adapters page")
	var seen struct {
		Markup string   `json:"markup"`
		Fields []string `json:"fields"`
		Bodies []string `json:"bodies"`
	}
	tab.MustEval(`({markup: document.documentElement.outerHTML, fields: [...document.querySelectorAll("input, textarea")].map((i) => i.value), bodies: window.__bodies})`, &seen)
	if len(seen.Bodies) < 4 {
		t.Errorf("only %d answers recorded: the recording is broken", len(seen.Bodies))
	}
	for _, secret := range []string{first, second} {
		if strings.Contains(seen.Markup, secret) || slices.ContainsFunc(seen.Fields, func(v string) bool { return strings.Contains(v, secret) }) {
			t.Errorf("the adapters page shows a password it was given")
		}
		for _, b := range seen.Bodies {
			if strings.Contains(b, secret) {
				t.Errorf("an answer the page received holds a password: %.200s", b)
			}
		}
	}

	// The restart the page asks for loads the adapter: nothing waits for
	// one any more, as the API says too.
	click(t, tab, `.restart-bar button`)
	waitFor(t, tab, "the restart's confirmation", `document.querySelector('dialog.confirm[open]')`)
	clickButton(t, tab, "dialog.confirm", "Restart")
	waitText(t, tab, "Restarted at")
	waitFor(t, tab, "no restart needed", `document.querySelector('[data-restart-needed="false"]') && !document.querySelector('`+card+`').innerText.includes("waits for restart")`)
	r = s.call(t, "GET", "/adapters", nil)
	mustJSON(t, r.body, &list)
	for _, a := range list.Items {
		if a.AdapterID == adapterID && a.PendingRestart || list.RestartNeeded {
			t.Errorf("after the restart the API lists %s", r.body)
		}
	}
	screenshots(t, tab, "admin-adapters-restarted")

	// The audit log: each filter through the form, against the API.
	var everything []auditItem
	s.must(t, "GET", "/audit?limit=500", nil, http.StatusOK, &struct {
		Items *[]auditItem `json:"items"`
	}{&everything})
	var policyAt time.Time
	for _, e := range everything {
		if e.Action == "policy.update" {
			policyAt = e.Time.Truncate(time.Second)
		}
	}
	since := policyAt.Format(time.RFC3339)
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	cases := []struct {
		name   string
		fields map[string]string
		match  func(e auditItem) bool
	}{
		{"action", map[string]string{"action": "app."}, func(e auditItem) bool { return strings.HasPrefix(e.Action, "app.") }},
		{"principal_id", map[string]string{"principal_id": adminID}, func(e auditItem) bool { return e.PrincipalID == adminID }},
		{"principal_kind", map[string]string{"principal_kind": "user"}, func(e auditItem) bool { return e.PrincipalKind == "user" }},
		{"app_id", map[string]string{"app_id": open}, func(e auditItem) bool { return str(e.AppID) == open }},
		{"target_kind", map[string]string{"target_kind": "adapter"}, func(e auditItem) bool { return str(e.TargetKind) == "adapter" }},
		{"target_id", map[string]string{"target_id": adapterID}, func(e auditItem) bool { return str(e.TargetID) == adapterID }},
		{"involving", map[string]string{"involving": bobID}, func(e auditItem) bool { return e.PrincipalID == bobID || str(e.TargetID) == bobID }},
		{"since", map[string]string{"since": since}, func(e auditItem) bool { return !e.Time.Before(policyAt) }},
		{"until", map[string]string{"until": since}, func(e auditItem) bool { return e.Time.Before(policyAt) }},
		{"action and principal_kind", map[string]string{"action": "session.", "principal_kind": "user"}, func(e auditItem) bool {
			return strings.HasPrefix(e.Action, "session.") && e.PrincipalKind == "user"
		}},
	}
	for _, c := range cases {
		tab.Go(s.console + "/admin/audit")
		waitFor(t, tab, "the unfiltered audit log", `document.querySelector('.audit-results').dataset.loaded === "?"`)
		setFilters(t, tab, c.fields)
		addr := waitURL(t, tab, "the filter "+c.name+" in the address", func(a string) bool { return strings.Contains(a, "?") })
		u, _ := url.Parse(addr)
		for k, v := range c.fields {
			if u.Query().Get(k) != v {
				t.Errorf("filter %s: the address %s has %s=%q; want %q", c.name, addr, k, u.Query().Get(k), v)
			}
		}
		shown := s.auditShown(t, tab)
		var api []auditItem
		s.must(t, "GET", "/audit?"+u.RawQuery, nil, http.StatusOK, &struct {
			Items *[]auditItem `json:"items"`
		}{&api})
		ids := make([]string, len(api))
		for i, e := range api {
			ids[i] = e.ID
			if !c.match(e) {
				t.Errorf("filter %s: the API's entry %+v does not match it", c.name, e)
			}
		}
		if !slices.Equal(shown, ids) {
			t.Errorf("filter %s (%s): the page shows %v; the API answers %v", c.name, u.RawQuery, shown, ids)
		}
		if len(ids) == 0 || len(ids) >= len(everything) {
			t.Errorf("filter %s: %d of %d entries; want it to narrow the list to some", c.name, len(ids), len(everything))
		}
		// A reload of the address shows the same, the form keeping the filter.
		tab.Go(addr)
		if again := s.auditShown(t, tab); !slices.Equal(again, ids) {
			t.Errorf("filter %s: after a reload the page shows %v; want %v", c.name, again, ids)
		}
		for k := range c.fields {
			var v string
			tab.MustEval(`(() => { const e = document.querySelector('.audit-filters [name="`+k+`"]'); return e.type === "datetime-local" ? new Date(e.value).toISOString().replace(/\.\d{3}Z$/, "Z") : e.value; })()`, &v)
			if v != c.fields[k] {
				t.Errorf("filter %s: after a reload the form's %s is %q; want %q", c.name, k, v, c.fields[k])
			}
		}
		t.Logf("audit filter %s: %d of %d entries, as the API answers", c.name, len(ids), len(everything))
		if c.name == "involving" {
			accessible(t, tab, "the audit log, filtered")
			tab.MustEval(`(() => { document.querySelectorAll('[data-table="audit"] button.toggle').forEach((b) => b.click()); return true; })()`, nil)
			waitFor(t, tab, "the details shown", `document.querySelector('[data-table="audit"] tr.detail-row')`)
			screenshots(t, tab, "admin-audit-filtered")
		}
	}

	// Paging: two a page, then the older two, as the API pages.
	tab.Go(s.console + "/admin/audit?limit=2")
	firstPage := s.auditShown(t, tab)
	if len(firstPage) != 2 || firstPage[0] != everything[0].ID || firstPage[1] != everything[1].ID {
		t.Errorf("two a page: the page shows %v; the newest two are %s, %s", firstPage, everything[0].ID, everything[1].ID)
	}
	click(t, tab, `[data-older]`)
	addr := waitURL(t, tab, "the older page", func(a string) bool { return strings.Contains(a, "before=") })
	olderPage := s.auditShown(t, tab)
	if want := []string{everything[2].ID, everything[3].ID}; !slices.Equal(olderPage, want) || !strings.Contains(addr, "before="+everything[1].ID) {
		t.Errorf("the older page (%s) shows %v; want %v", addr, olderPage, want)
	}
	tab.Go(addr)
	if again := s.auditShown(t, tab); !slices.Equal(again, olderPage) {
		t.Errorf("the older page after a reload shows %v; want %v", again, olderPage)
	}
	accessible(t, tab, "the audit log's older page")
	tab.Go(s.console + "/admin/audit")
	s.auditShown(t, tab)
	screenshots(t, tab, "admin-audit")

	noProblems(t, tab)
	onlyAPI(t, tab, s.console)

	// An auditor (install.view, install.audit.read) reads the pages but is
	// offered no change: the policy is read-only, saying why, with no
	// preview or Save; adapters have no Add, Edit, Remove or Restart.
	s.must(t, "PUT", "/users/"+bobID+"/role", map[string]string{"role_id": "role_auditor"}, http.StatusOK, nil)
	bobTab := consoleTab(t, browse(t))
	s.signInTab(t, bobTab, "bob", "bob-password-93d1")
	bobTab.Go(s.console + "/admin/policy")
	waitText(t, bobTab, "install.policy.manage")
	var offered struct {
		Editable int `json:"editable"`
		Buttons  int `json:"buttons"`
	}
	bobTab.MustEval(`({editable: [...document.querySelectorAll(".settings-grid input, .settings-grid select, .settings-grid textarea")].filter((c) => !c.readOnly && !c.disabled).length,
  buttons: document.querySelectorAll(".policy button").length})`, &offered)
	if offered.Editable != 0 || offered.Buttons != 0 {
		t.Errorf("the auditor's policy page offers %d editable settings and %d buttons; want none", offered.Editable, offered.Buttons)
	}
	accessible(t, bobTab, "the policy page, read-only")
	screenshots(t, bobTab, "admin-policy-readonly")
	bobTab.Go(s.console + "/admin/adapters")
	waitFor(t, bobTab, "the adapters, read-only", `document.querySelector('[data-adapter="`+adapterID+`"]')`)
	waitText(t, bobTab, "install.adapters.manage")
	bobTab.MustEval(`({editable: 0, buttons: document.querySelectorAll(".adapters button").length})`, &offered)
	if offered.Buttons != 0 {
		t.Errorf("the auditor's adapters page offers %d buttons; want none", offered.Buttons)
	}
	bobTab.Go(s.console + "/admin/audit?action=session.")
	if shown := s.auditShown(t, bobTab); len(shown) == 0 {
		t.Errorf("the auditor's audit page shows no sign-in")
	}
	noProblems(t, bobTab)
	onlyAPI(t, bobTab, s.console)
}

// setFilters sets the audit page's filter fields (a time as RFC 3339, put
// in the field in the browser's time zone) and submits the form.
func setFilters(t *testing.T, tab *browsertest.Tab, fields map[string]string) {
	t.Helper()
	b, _ := json.Marshal(fields)
	var ok bool
	tab.MustEval(`(async () => {
  const form = document.querySelector("form.audit-filters");
  const p = (n) => String(n).padStart(2, "0");
  for (const [k, v] of Object.entries(`+string(b)+`)) {
    const el = form.querySelector('[name="' + k + '"]');
    if (!el) return false;
    if (el.type === "datetime-local") {
      const d = new Date(v);
      el.value = d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + "T" + p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds());
    } else {
      el.value = v;
    }
    el.dispatchEvent(new Event(el.tagName === "SELECT" ? "change" : "input", {bubbles: true}));
  }
  await new Promise((r) => setTimeout(r, 0));
  form.requestSubmit();
  return true;
})()`, &ok)
	if !ok {
		t.Fatalf("set the audit filters %v: a field is missing", fields)
	}
}

// setValue types value into the field selector names, as an input event.
func setValue(t *testing.T, tab *browsertest.Tab, selector, value string) {
	t.Helper()
	var ok bool
	tab.MustEval(`(() => { const e = document.querySelector(`+strconv.Quote(selector)+`); if (!e) return false; e.value = `+strconv.Quote(value)+`;
  e.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`, &ok)
	if !ok {
		t.Fatalf("no field %s at %s", selector, tab.URL())
	}
}

// auditShown waits until the audit page has answered its address's query
// and returns the IDs of the entries it shows, in order.
func (s *webServer) auditShown(t *testing.T, tab *browsertest.Tab) []string {
	t.Helper()
	waitFor(t, tab, "the audit page's answer", `(() => { const r = document.querySelector('.audit-results'); return r && r.dataset.loaded === (location.search || "?"); })()`)
	var ids []string
	tab.MustEval(`[...document.querySelectorAll('[data-table="audit"] tr[data-entry]')].map((r) => r.dataset.entry)`, &ids)
	return ids
}

// postgresAdapter is the ID of the configured postgres slots adapter, or "".
func (s *webServer) postgresAdapter(t *testing.T) string {
	t.Helper()
	var list struct {
		Items []struct {
			AdapterID string `json:"adapter_id"`
			Kind      string `json:"kind"`
		} `json:"items"`
	}
	s.must(t, "GET", "/adapters", nil, http.StatusOK, &list)
	for _, a := range list.Items {
		if a.Kind == "postgres" {
			return a.AdapterID
		}
	}
	return ""
}

// countGroups counts the distinct groups of the configuration page's rows.
func countGroups(rows map[string][]string) int {
	seen := map[string]bool{}
	for _, r := range rows {
		if len(r) > 0 {
			seen[r[0]] = true
		}
	}
	return len(seen)
}
