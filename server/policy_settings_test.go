package server

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/plan"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/subscriptions"
)

// The tests of this file walk host policy's settings (docs/policy.md,
// "What each setting does"): each shows, through the API of a real
// server, the setting's effect when it is set and its absence when it is
// not. Settings whose tests live elsewhere are named in that table:
// min_security_score, insecure_action, insecure_grace_hours and
// ignore_unfixable_findings (security_api_test.go), the sandbox's side of
// egress_allowlist (scheduler/process), disable_ai_screening (scanners/ai).

// policyRefusal checks a refusal's code, status, that its message names
// what refused and that it carries a remedy.
func policyRefusal(t *testing.T, what string, a answer, status int, code errcode.Code, mention string) envelope {
	t.Helper()
	e := wantError(t, what, a, status, code)
	if !strings.Contains(e.Message, mention) {
		t.Errorf("%s: message %q does not mention %q", what, e.Message, mention)
	}
	if e.Remedy == "" {
		t.Errorf("%s: no remedy: %s", what, a.body)
	}
	return e
}

// refusalOf is the plan's refusal with the code, nil when none.
func refusalOf(r plan.Result, code errcode.Code) *errcode.Error {
	for _, e := range r.Refusals {
		if e.Code == code {
			return e
		}
	}
	return nil
}

// TestPolicySourceAllowlist: a non-empty source_allowlist refuses an
// uploaded archive (POLICY_SOURCE_NOT_ALLOWED) unless it names archive:;
// an archive app taken before the list was set is refused by the plan and
// the deploy, and the preview names it; an empty list allows everything.
func TestPolicySourceAllowlist(t *testing.T) {
	h := newHarness(t)
	before := h.pinnedApp(t, "Uploaded Before", siteSpec("", 0))
	if r := h.plan(t, before); !r.Deployable {
		t.Fatalf("no allowlist: plan %+v", r.Refusals)
	}

	list := map[string]any{"source_allowlist": []string{"github.com/acme/"}}
	p := decodeAs[struct{ Blocked []plan.Blocked }](t, h.send("POST", api+"/policy/preview", jsonOf(map[string]any{"policy": list})))
	if !slices.ContainsFunc(p.Blocked, func(b plan.Blocked) bool {
		return b.AppID == before && slices.ContainsFunc(b.Reasons, func(e *errcode.Error) bool { return e.Code == errcode.PolicySourceNotAllow })
	}) {
		t.Errorf("the preview of an allowlist without archive: does not block the archive app: %+v", p.Blocked)
	}
	h.setPolicy(t, list)

	app := h.app(t, "Uploaded After")
	e := policyRefusal(t, "an upload under an allowlist", h.upload(api+"/apps/"+app+"/source", "application/gzip", siteSource(t)),
		http.StatusForbidden, errcode.PolicySourceNotAllow, "archives")
	if !strings.Contains(e.Remedy, "archive:") {
		t.Errorf("the remedy %q does not name the archive: entry", e.Remedy)
	}
	if got := h.getApp(t, app); got.Source != nil {
		t.Errorf("a refused upload recorded a source: %+v", got.Source)
	}
	r := h.plan(t, before)
	if e := refusalOf(r, errcode.PolicySourceNotAllow); e == nil || r.Deployable {
		t.Errorf("plan of the archive app under the allowlist: %+v", r.Refusals)
	}
	wantError(t, "deploy of the archive app under the allowlist", h.send("POST", api+"/apps/"+before+"/deployments", `{}`),
		http.StatusForbidden, errcode.PolicySourceNotAllow)

	h.setPolicy(t, map[string]any{"source_allowlist": []string{"github.com/acme/", "archive:"}})
	wantStatus(t, "an upload under an allowlist naming archive:", h.upload(api+"/apps/"+app+"/source", "application/gzip", siteSource(t)), http.StatusAccepted)
	if r := h.plan(t, before); refusalOf(r, errcode.PolicySourceNotAllow) != nil {
		t.Errorf("plan under an allowlist naming archive: %+v", r.Refusals)
	}

	h.setPolicy(t, map[string]any{})
	wantStatus(t, "an upload with no allowlist", h.upload(api+"/apps/"+app+"/source", "application/gzip", siteSource(t)), http.StatusAccepted)
}

// TestPolicyDisabledVerbs: a verb in disabled_verbs is refused to
// everyone, the administrator included; taken out, it is allowed again.
func TestPolicyDisabledVerbs(t *testing.T) {
	h := newHarness(t)
	app := h.app(t, "Undeletable")
	h.setPolicy(t, map[string]any{"disabled_verbs": []string{"app.delete"}})
	e := policyRefusal(t, "app.delete disabled, the administrator", h.send("DELETE", api+"/apps/"+app, ""), http.StatusForbidden, errcode.PermVerbRequired, "host policy")
	if e.Details["verb"] != "app.delete" || e.Details["policy"] != "disabled_verbs" {
		t.Errorf("details = %v", e.Details)
	}
	h.setPolicy(t, map[string]any{})
	wantStatus(t, "app.delete allowed again", h.send("DELETE", api+"/apps/"+app, ""), http.StatusNoContent)
}

// TestPolicyAgentDisabledVerbs: a verb in agent_disabled_verbs is refused
// to an agent token and allowed to the same account's ordinary token;
// taken out, the agent token may use it.
func TestPolicyAgentDisabledVerbs(t *testing.T) {
	h := newHarness(t)
	a := h.send("POST", api+"/tokens", `{"name":"assistant","agent":true}`)
	wantStatus(t, "mint an agent token", a, http.StatusCreated)
	agent := (&principal{token: decodeAs[tokenAnswer](t, a).Secret}).bearer()
	first, second, third := h.app(t, "First"), h.app(t, "Second"), h.app(t, "Third")

	h.setPolicy(t, map[string]any{"agent_disabled_verbs": []string{"app.delete"}})
	e := policyRefusal(t, "app.delete, an agent token", h.send("DELETE", api+"/apps/"+first, "", agent...), http.StatusForbidden, errcode.PermVerbRequired, "agent tokens")
	if e.Details["verb"] != "app.delete" || e.Details["policy"] != "agent_disabled_verbs" {
		t.Errorf("details = %v", e.Details)
	}
	wantStatus(t, "app.delete, the same account's own token", h.send("DELETE", api+"/apps/"+second, ""), http.StatusNoContent)

	h.setPolicy(t, map[string]any{})
	wantStatus(t, "app.delete, an agent token, not disabled", h.send("DELETE", api+"/apps/"+third, "", agent...), http.StatusNoContent)
	wantStatus(t, "the first app is still there", h.send("GET", api+"/apps/"+first, ""), http.StatusOK)
}

// shareWithEveryone asks for the grant to everyone, with a passcode when
// code is not empty.
func (h *harness) shareWithEveryone(app, code string) answer {
	body := map[string]string{"plane": "data", "principal_kind": "anonymous"}
	if code != "" {
		body["passcode"] = code
	}
	return h.send("POST", api+"/apps/"+app+"/grants", jsonOf(body))
}

// TestPolicyPublicSharing: public_sharing none refuses the grant to
// everyone, passcode_only refuses it without a passcode and allows it
// with one, allowed allows both (POLICY_ANONYMOUS_GRANT_FORBIDDEN). Each
// is fixed at startup (SVC_POLICY_PUBLIC_SHARING), which PUT /policy
// cannot change.
func TestPolicyPublicSharing(t *testing.T) {
	for _, c := range []struct {
		sharing            string
		open, withPasscode bool
	}{{policy.SharingNone, false, false}, {policy.SharingPasscodeOnly, false, true}, {policy.SharingAllowed, true, true}} {
		t.Run(c.sharing, func(t *testing.T) {
			h := newHarnessWith(t, harnessOptions{adminPassword: adminPassword, env: []string{"SVC_POLICY_PUBLIC_SHARING=" + c.sharing}})
			for _, s := range []struct {
				code    string
				allowed bool
			}{{"", c.open}, {"correct-horse-passcode", c.withPasscode}} {
				what := fmt.Sprintf("public_sharing %s, passcode %v", c.sharing, s.code != "")
				a := h.shareWithEveryone(h.app(t, "Shared"), s.code)
				if s.allowed {
					wantStatus(t, what, a, http.StatusCreated)
				} else {
					policyRefusal(t, what, a, http.StatusForbidden, errcode.PolicyAnonymousGrant, "")
				}
			}
			other := policy.SharingAllowed
			if c.sharing == other {
				other = policy.SharingNone
			}
			wantError(t, "PUT a change to a fixed public_sharing", h.send("PUT", api+"/policy", jsonOf(map[string]any{"policy": map[string]any{"public_sharing": other}})),
				http.StatusConflict, errcode.StateInvalid)
		})
	}
}

// TestPolicyAllowAnonymousGrants: with public_sharing unset,
// allow_anonymous_grants false refuses the grant to everyone
// (POLICY_ANONYMOUS_GRANT_FORBIDDEN) and true allows it.
func TestPolicyAllowAnonymousGrants(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{adminPassword: adminPassword, env: []string{"SVC_POLICY_PUBLIC_SHARING="}})
	if got := decodeAs[struct{ Policy map[string]any }](t, h.send("GET", api+"/policy", "")).Policy["public_sharing"]; got != "" {
		t.Fatalf("public_sharing = %v, want unset", got)
	}
	h.setPolicy(t, map[string]any{"allow_anonymous_grants": false})
	policyRefusal(t, "allow_anonymous_grants false", h.shareWithEveryone(h.app(t, "Closed"), "correct-horse-passcode"),
		http.StatusForbidden, errcode.PolicyAnonymousGrant, "")
	h.setPolicy(t, map[string]any{"allow_anonymous_grants": true})
	wantStatus(t, "allow_anonymous_grants true", h.shareWithEveryone(h.app(t, "Open"), ""), http.StatusCreated)
}

// TestPolicyIsolationMinimums: min_build_isolation and
// min_runtime_isolation above what the runtime offers refuse the plan and
// the deploy with PLAN_NO_ADAPTER_MEETS_POLICY, naming the setting and
// each runtime's level; at none the app is deployable.
func TestPolicyIsolationMinimums(t *testing.T) {
	h := newHarness(t)
	app := h.pinnedApp(t, "Isolated", siteSpec("", 0))
	for _, setting := range []string{"min_build_isolation", "min_runtime_isolation"} {
		t.Run(setting, func(t *testing.T) {
			h.setPolicy(t, map[string]any{setting: policy.IsolationVM})
			r := h.plan(t, app)
			e := refusalOf(r, errcode.PlanNoAdapterPolicy)
			if e == nil || r.Deployable || e.Details[setting] != policy.IsolationVM || e.Remedy == "" {
				t.Fatalf("plan under %s vm: %+v", setting, r.Refusals)
			}
			wantError(t, "deploy under "+setting+" vm", h.send("POST", api+"/apps/"+app+"/deployments", `{}`), http.StatusConflict, errcode.PlanNoAdapterPolicy)
			h.setPolicy(t, map[string]any{setting: policy.IsolationNone})
			if r := h.plan(t, app); !r.Deployable {
				t.Fatalf("plan under %s none: %+v", setting, r.Refusals)
			}
		})
	}
}

// TestPolicyEgressAllowlist: an egress list is enforced only in a
// sandbox, so it raises both isolation minimums to sandbox: the plan
// chooses a runtime that offers it, or refuses; the list's effect inside
// the sandbox is TestSandboxEgress's (scheduler/process). Without a list
// nothing is asked.
func TestPolicyEgressAllowlist(t *testing.T) {
	h := newHarness(t)
	app := h.pinnedApp(t, "Egress", siteSpec("", 0))
	h.setPolicy(t, map[string]any{"egress_allowlist": []string{"api.example.com"}})
	r := h.plan(t, app)
	if err := h.procs.SandboxError(); err != nil {
		e := refusalOf(r, errcode.PlanNoAdapterPolicy)
		if e == nil || e.Details["min_runtime_isolation"] != policy.IsolationSandbox || e.Details["min_build_isolation"] != policy.IsolationSandbox {
			t.Fatalf("no sandbox on this host (%v): plan under an egress list %+v, want PLAN_NO_ADAPTER_MEETS_POLICY at sandbox", err, r.Refusals)
		}
	} else if !r.Deployable {
		t.Fatalf("a sandboxing runtime: plan under an egress list %+v", r.Refusals)
	}
	h.setPolicy(t, map[string]any{"min_runtime_isolation": policy.IsolationSandbox, "egress_allowlist": []string{}})
	if r := h.plan(t, app); r.Deployable == (h.procs.SandboxError() != nil) {
		t.Fatalf("min_runtime_isolation sandbox alone: %+v", r.Refusals)
	}
	h.setPolicy(t, map[string]any{})
	if r := h.plan(t, app); !r.Deployable {
		t.Fatalf("no egress list: %+v", r.Refusals)
	}
}

// TestPolicyRequireBackupBeforeDestroy: with the setting, deleting an app
// with storage with force=true is refused (POLICY_BACKUP_REQUIRED) and
// backup=true goes; its kept volume is deleted because its final copy
// holds it (a volume with no such copy is refused:
// TestRequireFinalCopy, internal/backups). Without it, force=true goes.
func TestPolicyRequireBackupBeforeDestroy(t *testing.T) {
	h := newHarness(t)
	withVolume := func(name string) string {
		app := h.app(t, name)
		h.specRevision(t, app)
		wantStatus(t, "declare a volume", h.send("POST", api+"/apps/"+app+"/volumes", `{"name":"files","path":"/files"}`), http.StatusCreated)
		return app
	}
	kept := withVolume("Kept")
	h.setPolicy(t, map[string]any{"require_backup_before_destroy": true})
	policyRefusal(t, "force under the policy", h.send("DELETE", api+"/apps/"+kept+"?force=true", ""), http.StatusForbidden, errcode.PolicyBackupRequired, "backup")
	wantStatus(t, "backup under the policy", h.send("DELETE", api+"/apps/"+kept+"?backup=true", ""), http.StatusNoContent)
	var volID string
	for _, v := range decodeAs[volumeListDTO](t, h.send("GET", api+"/volumes", "")).Items {
		if v.AppID == kept {
			volID = *v.ID
		}
	}
	if volID == "" {
		t.Fatal("the deleted app's volume is not kept")
	}
	wantStatus(t, "delete a kept volume its final copy holds", h.send("DELETE", api+"/volumes/"+volID, ""), http.StatusNoContent)

	h.setPolicy(t, map[string]any{})
	wantStatus(t, "force without the policy", h.send("DELETE", api+"/apps/"+withVolume("Discarded")+"?force=true", ""), http.StatusNoContent)
}

// TestPolicyMaxTokenLifetimeDays: under a cap a longer token is refused
// (POLICY_TOKEN_LIFETIME_EXCEEDED) and one that names no lifetime gets
// the cap; without it tokens live as asked, or forever. (A cap also ends
// tokens minted before it: TestTokenLifetimeCapAppliesToOlderTokens,
// internal/identity, with a fake clock.)
func TestPolicyMaxTokenLifetimeDays(t *testing.T) {
	h := newHarness(t)
	mint := func(body string) answer { return h.send("POST", api+"/tokens", body) }
	expiry := func(a answer) *time.Time { return decodeAs[tokenAnswer](t, a).Token.ExpiresAt }
	near := func(at *time.Time, days int) bool {
		return at != nil && at.Sub(time.Now().Add(time.Duration(days)*24*time.Hour)).Abs() < time.Hour
	}

	h.setPolicy(t, map[string]any{"max_token_lifetime_days": 7})
	policyRefusal(t, "30 days under a 7-day cap", mint(`{"name":"long","expires_in_days":30}`), http.StatusForbidden, errcode.PolicyTokenLifetime, "7 days")
	a := mint(`{"name":"unsaid"}`)
	wantStatus(t, "no lifetime under a cap", a, http.StatusCreated)
	if at := expiry(a); !near(at, 7) {
		t.Errorf("a token naming no lifetime under a 7-day cap expires at %v", at)
	}

	h.setPolicy(t, map[string]any{})
	a = mint(`{"name":"long","expires_in_days":30}`)
	wantStatus(t, "30 days, no cap", a, http.StatusCreated)
	if at := expiry(a); !near(at, 30) {
		t.Errorf("a 30-day token expires at %v", at)
	}
	if a := mint(`{"name":"forever"}`); expiry(a) != nil {
		t.Errorf("no lifetime and no cap: expires at %v", expiry(a))
	}
}

// chattyServer prints lines numbered from 0 to 2999 (about 100 bytes
// each, 300 KB in all), then serves.
const chattyServer = `for (let i = 0; i < 3000; i++) console.log('line ' + String(i).padStart(4, '0') + ' ' + 'x'.repeat(90));
require('http').createServer((q, r) => r.end('hi')).listen(process.env.PORT, () => console.log('listening pid=' + process.pid));
`

// logBytes is the size of a job's kept log files on the runtime's disk.
func (h *harness) logBytes(t *testing.T, jobID string) int64 {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(h.dir, "runtime", "logs", jobID, "*"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no log files of job %s (%v)", jobID, err)
	}
	var n int64
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// TestPolicyMaxLogDiskBytes: under max_log_disk_bytes an app's kept log
// on the runtime's disk stays within the cap, its oldest lines dropped and
// its newest kept, and a new release's deploy removes the replaced job's
// logs; without the setting the same output is kept whole.
func TestPolicyMaxLogDiskBytes(t *testing.T) {
	h := newHarness(t)
	const capBytes = 16 << 10
	chatty := func(name string) (app, jobID string) {
		app = h.app(t, name)
		src := tarGz(t, tarFile{name: "server.js", body: chattyServer})
		wantStatus(t, "upload", h.upload(api+"/apps/"+app+"/source", "application/gzip", src), http.StatusAccepted)
		h.pinSpec(t, app, h.writeSpec(t, app, nodeSpec("echo nothing to build")))
		d := h.deployed(t, app)
		h.waitAppState(t, app, apps.StateRunning)
		waitFor(t, name+"'s last line", func() bool {
			l := h.appLogs(t, app, "").Lines
			return len(l) > 0 && strings.HasPrefix(l[len(l)-1], "listening")
		})
		return app, d.ID
	}

	h.setPolicy(t, map[string]any{"max_log_disk_bytes": capBytes})
	app, job := chatty("Capped")
	if n := h.logBytes(t, job); n > capBytes {
		t.Errorf("under a %d-byte cap the app's logs take %d bytes on disk", capBytes, n)
	}
	lines := h.appLogs(t, app, "?tail=10000").Lines
	if slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "line 0000 ") }) ||
		!slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "line 2999 ") }) {
		t.Errorf("under the cap the kept lines are not the newest: %d lines from %q", len(lines), lines[0])
	}

	// A new release: the one it replaced leaves no logs behind.
	again := h.deployed(t, app)
	h.waitAppState(t, app, apps.StateRunning)
	waitFor(t, "the replaced job "+job+"'s logs to go, beside the new release "+again.ID+"'s", func() bool {
		_, err := os.Stat(filepath.Join(h.dir, "runtime", "logs", job))
		return os.IsNotExist(err)
	})

	h.setPolicy(t, map[string]any{})
	app, job = chatty("Uncapped")
	if n := h.logBytes(t, job); n <= capBytes {
		t.Errorf("without a cap the app's 300 KB of logs take %d bytes", n)
	}
	if lines := h.appLogs(t, app, "?tail=10000").Lines; !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "line 0000 ") }) {
		t.Errorf("without a cap the first line is gone: %d lines", len(lines))
	}
}

// TestPolicyAllowPrivateWebhooks: off, a literal loopback webhook URL is
// refused when saved (VALID_INVALID), and one saved while the setting was
// on is refused at delivery, on the address connected to, the receiver
// never reached (the attempt's error says why); on, it is delivered.
func TestPolicyAllowPrivateWebhooks(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{adminPassword: adminPassword, env: []string{"SVC_EVENTS_RETRY_SCHEDULE=300ms"}})
	rc := newReceiver(t)
	body := jsonOf(map[string]any{"events": []string{"policy.updated"}, "url": rc.srv.URL})
	wantError(t, "a literal loopback URL, off", h.send("POST", api+"/subscriptions", body), http.StatusBadRequest, errcode.ValidInvalid)
	h.setPolicy(t, map[string]any{"allow_private_webhooks": true})
	a := h.send("POST", api+"/subscriptions", body)
	wantStatus(t, "a literal loopback URL, on", a, http.StatusCreated)
	sub := decodeAs[subscriptions.Created](t, a)
	test := func() string {
		a := h.send("POST", api+"/subscriptions/"+sub.Subscription.ID+"/test", "")
		wantStatus(t, "test delivery", a, http.StatusAccepted)
		return decodeAs[deliveryAnswer](t, a).Delivery.ID
	}
	delivery := func(id string) subscriptions.DeliveryView {
		return decodeAs[deliveryAnswer](t, h.send("GET", api+"/subscriptions/"+sub.Subscription.ID+"/deliveries/"+id, "")).Delivery
	}
	on := test()
	waitFor(t, "the delivery, on", func() bool { return delivery(on).State == subscriptions.StateDelivered })
	if n := len(rc.all()); n != 1 {
		t.Fatalf("the receiver got %d requests, want 1", n)
	}

	h.setPolicy(t, map[string]any{"allow_private_webhooks": false})
	off := test()
	waitFor(t, "the refused attempt", func() bool { return len(delivery(off).Attempts) > 0 })
	if d := delivery(off); d.State == subscriptions.StateDelivered || d.Attempts[0].StatusCode != nil || d.Attempts[0].Error == nil ||
		!strings.Contains(*d.Attempts[0].Error, "loopback") {
		t.Errorf("a delivery to loopback, off: %+v", d)
	}
	if n := len(rc.all()); n != 1 {
		t.Fatalf("the loopback receiver got %d requests; the one with allow_private_webhooks off must not have reached it", n)
	}
}

// TestPolicyFixedAtStartup: a setting fixed as SVC_POLICY_<SETTING>
// applies (the verb is refused), is listed as fixed, cannot be changed by
// PUT /policy (STATE_INVALID, details.fixed) though its own value may be
// sent, is never saved: without it after a restart the saved value is in
// force again.
func TestPolicyFixedAtStartup(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{adminPassword: adminPassword, env: []string{"SVC_POLICY_DISABLED_VERBS=app.delete"}})
	app := h.app(t, "Fixed")
	wantError(t, "a verb disabled at startup", h.send("DELETE", api+"/apps/"+app, ""), http.StatusForbidden, errcode.PermVerbRequired)
	got := decodeAs[struct {
		Policy map[string]any
		Fixed  []string
	}](t, h.send("GET", api+"/policy", ""))
	if !slices.Contains(got.Fixed, "disabled_verbs") || fmt.Sprint(got.Policy["disabled_verbs"]) != "[app.delete]" {
		t.Fatalf("GET /policy = %+v", got)
	}
	e := wantError(t, "PUT a change to a fixed setting", h.send("PUT", api+"/policy", `{"policy":{"disabled_verbs":[]}}`), http.StatusConflict, errcode.StateInvalid)
	if fmt.Sprint(e.Details["fixed"]) != "[disabled_verbs]" || e.Remedy == "" {
		t.Errorf("refusal %+v", e)
	}
	h.setPolicy(t, map[string]any{"disabled_verbs": []string{"app.delete"}, "max_token_lifetime_days": 3})

	h.opts.env = nil
	h.restart()
	wantStatus(t, "the verb once the setting is no longer fixed", h.send("DELETE", api+"/apps/"+app, ""), http.StatusNoContent)
	got = decodeAs[struct {
		Policy map[string]any
		Fixed  []string
	}](t, h.send("GET", api+"/policy", ""))
	if fmt.Sprint(got.Policy["disabled_verbs"]) != "[]" || fmt.Sprint(got.Policy["max_token_lifetime_days"]) != "3" {
		t.Errorf("after the restart GET /policy = %+v; the fixed value must not have been saved, the other setting must", got.Policy)
	}
}
