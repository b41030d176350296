package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/browsertest"
)

// The console's event pages in a real Chromium against the real binary:
// an app's Events tab and the installation's Events page. Run them with:
//
//	go test -count=1 -run 'TestConsoleEvents' ./internal/e2e/

// hookCall is one request a webhook receiver of the tests got.
type hookCall struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// hookReceiver is a webhook receiver: it records every request and
// answers 200, except 503 to the first request of each event type named in
// failFirst.
type hookReceiver struct {
	srv       *httptest.Server
	mu        sync.Mutex
	calls     []hookCall
	failFirst map[string]bool
}

func startHookReceiver(t *testing.T, failFirst ...string) *hookReceiver {
	t.Helper()
	r := &hookReceiver{failFirst: map[string]bool{}}
	for _, f := range failFirst {
		r.failFirst[f] = true
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		r.mu.Lock()
		r.calls = append(r.calls, hookCall{Method: req.Method, Path: req.URL.Path, Header: req.Header.Clone(), Body: body})
		ev := req.Header.Get("Svc-Event")
		fail := r.failFirst[ev]
		r.failFirst[ev] = false
		r.mu.Unlock()
		if fail {
			http.Error(w, "not now", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// of returns the requests to path carrying the event type.
func (r *hookReceiver) of(path, event string) []hookCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []hookCall
	for _, c := range r.calls {
		if c.Path == path && c.Header.Get("Svc-Event") == event {
			out = append(out, c)
		}
	}
	return out
}

// waitCalls waits until path has received n requests of the event type
// and returns them.
func (r *hookReceiver) waitCalls(t *testing.T, path, event string, n int) []hookCall {
	t.Helper()
	waitForAPI(t, strconv.Itoa(n)+" "+event+" at "+path, func() bool { return len(r.of(path, event)) >= n })
	return r.of(path, event)
}

// signedBy checks a request's signature the way a receiver does, written
// here apart from svc's own code: Svc-Signature holds v1=<hex HMAC-SHA256
// of "<Svc-Timestamp>.<raw body>" keyed by the signing key>, one per live
// key; the timestamp is within five minutes of now.
func signedBy(c hookCall, key string) bool {
	ts := c.Header.Get("Svc-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(ts + "."))
	mac.Write(c.Body)
	want := hex.EncodeToString(mac.Sum(nil))
	for _, part := range strings.Fields(c.Header.Get("Svc-Signature")) {
		if v, ok := strings.CutPrefix(part, "v1="); ok && hmac.Equal([]byte(v), []byte(want)) {
			return true
		}
	}
	return false
}

// subView is a subscription as the API shows it.
type subView struct {
	ID              string   `json:"id"`
	AppID           *string  `json:"app_id"`
	OwnerID         string   `json:"owner_id"`
	Events          []string `json:"events"`
	URL             *string  `json:"url"`
	Method          string   `json:"method"`
	HeaderNames     []string `json:"header_names"`
	PayloadTemplate *string  `json:"payload_template"`
	Enabled         bool     `json:"enabled"`
	FailingSince    *string  `json:"failing_since"`
	SigningKeys     []struct {
		RetiresAt *string `json:"retires_at"`
	} `json:"signing_keys"`
}

// deliveryView is a delivery as the API shows it.
type deliveryView struct {
	ID        string `json:"id"`
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`
	State     string `json:"state"`
	Attempts  []struct {
		StatusCode *int    `json:"status_code"`
		Error      *string `json:"error"`
	} `json:"attempts"`
}

func (s *webServer) subscription(t *testing.T, id string) subView {
	t.Helper()
	var out struct {
		Subscription subView `json:"subscription"`
	}
	s.must(t, "GET", "/subscriptions/"+id, nil, http.StatusOK, &out)
	return out.Subscription
}

func (s *webServer) subscriptions(t *testing.T) []subView {
	t.Helper()
	var out struct {
		Items []subView `json:"items"`
	}
	s.must(t, "GET", "/subscriptions?limit=200", nil, http.StatusOK, &out)
	return out.Items
}

func (s *webServer) deliveries(t *testing.T, subID string) []deliveryView {
	t.Helper()
	var out struct {
		Items []deliveryView `json:"items"`
	}
	s.must(t, "GET", "/subscriptions/"+subID+"/deliveries?limit=200", nil, http.StatusOK, &out)
	return out.Items
}

// createInPage opens the page's New subscription form, ticks the events'
// boxes, types the webhook's address and creates it; it returns the new
// subscription's ID (from the address the page goes to) and the signing key
// the page shows once.
func createInPage(t *testing.T, tab *browsertest.Tab, base string, events []string, hook string) (string, string) {
	t.Helper()
	openCreate(t, tab)
	for _, e := range events {
		click(t, tab, `form[data-form="new"] input[name="events"][value="`+e+`"]`)
	}
	fill(t, tab, map[string]string{"url": hook}, "url")
	addr := waitURL(t, tab, "the new subscription's page", func(a string) bool {
		return strings.HasPrefix(a, base+"/sub_")
	})
	id := strings.TrimPrefix(addr, base+"/")
	waitFor(t, tab, "the signing key shown once", `document.querySelector('[data-secret=signing_key]') && document.querySelector('[data-secret=signing_key]').innerText.includes("Shown once")`)
	key := waitSecret(t, tab, "signing_key")
	if !strings.HasPrefix(key, "whsec_") {
		t.Fatalf("the page shows the signing key %q", key)
	}
	return id, key
}

// openCreate opens the New subscription form and waits for the catalogue in it.
func openCreate(t *testing.T, tab *browsertest.Tab) {
	t.Helper()
	clickButton(t, tab, ".subscriptions .actions", "New subscription")
	waitFor(t, tab, "the form with the event catalogue", `document.querySelector('form[data-form="new"] fieldset.family')`)
}

// testDelivered waits for the page's test delivery to end delivered.
func testDelivered(t *testing.T, tab *browsertest.Tab) {
	t.Helper()
	waitFor(t, tab, "the test delivery delivered", `document.querySelector('.test-delivery[data-test-state="delivered"]') && document.querySelector('.test-delivery').innerText.includes("The receiver answered 200")`)
}

// TestConsoleEvents, on a server whose host policy allows private webhooks
// (the receiver is the test's, on loopback) with a fast retry schedule
// (200ms, 400ms), with a receiver that answers 503 to the first
// app.secret_changed:
//   - the app's Events tab is empty and says what to do; the form refuses
//     a subscription without events with the API's VALID_INVALID shown at
//     the events; the app form offers only the app's events (no user.*);
//     created with app.* and deploy.failed, the page shows the signing key
//     once, and the live test reaches the receiver as a subscription.test
//     signed under that key (checked with an HMAC computed here) and shows
//     delivered with the receiver's 200; the API has the subscription on the
//     app with those filters;
//   - a secret set through the API makes app.secret_changed, which the log
//     shows delivered after two attempts (503, then 200), each in the
//     expanded attempts; its body never carries the secret's value; Resend
//     delivers it again with the same Svc-Event-Id and body;
//   - Rotate key (confirmed) shows a new key once; the API has two keys, the
//     old one retiring; the next test is signed under both keys;
//   - Edit shapes the request (PUT, an extra header, a template): the API
//     has them (the header by name), the next test arrives as PUT with the
//     header, and the header's value is nowhere in the page after saving;
//   - the switch turns it off (an event meanwhile is never sent) and on
//     again (the API's enabled and failing_since follow);
//   - with more than a page of deliveries (20), the subscription's page
//     opened by its address shows the first page, and More the rest, as the
//     API has them, newest first;
//   - /admin/events: the admin makes an install-wide subscription to user.*
//     (no notification adapter is configured: the choice says so), its test
//     is delivered, and a sign-in reaches it as user.signed_in;
//   - a member holding only app.view on the app (a custom role) sees the
//     Events tab without the admin's subscription, is offered no adapter
//     (no install.view), makes a webhook subscription of their own, and on
//     /admin/events sees only theirs and gets the API's PERM_VERB_REQUIRED
//     for an install-wide one, which the API does not have;
//   - the admin's page lists all three; deleting the app's subscription
//     (confirmed) removes it (404).
//
// All through: no layout shift as data arrives, only /api/v1, no problem,
// axe-core clean in light and dark; screenshots go to SVC_SCREENSHOTS.
func TestConsoleEvents(t *testing.T) {
	hooks := startHookReceiver(t, "app.secret_changed")
	s := startWebServer(t, "port", "SVC_RUNTIME_ISOLATION=none", "SVC_POLICY_ALLOW_PRIVATE_WEBHOOKS=true", "SVC_EVENTS_RETRY_SCHEDULE=200ms,400ms")
	appID := s.createApp(t, "Ledger")
	var me struct {
		User struct{ ID string } `json:"user"`
	}
	s.must(t, "GET", "/me", nil, http.StatusOK, &me)

	tab := consoleTab(t, browse(t))
	watchLayoutShift(tab)
	s.signInTab(t, tab, "admin", adminPassword)
	tab.Go(s.console + "/apps/" + appID)
	waitFor(t, tab, "the app's tabs", `document.querySelector('nav.tabs a[href$="/events"]')`)
	click(t, tab, `nav.tabs a[href$="/events"]`)
	base := s.console + "/apps/" + appID + "/events"
	waitURL(t, tab, "the Events tab", func(a string) bool { return a == base })
	waitText(t, tab, "No subscriptions to this app’s events yet.")
	tab.Go(base)
	waitText(t, tab, "No subscriptions to this app’s events yet.")
	noLayoutShift(t, tab, "the empty Events tab")
	accessible(t, tab, "the empty Events tab")
	screenshots(t, tab, "app-events-empty")

	// The form: the app's events only; no events is refused at the events.
	openCreate(t, tab)
	var offered struct{ User, Deploy, Every bool }
	tab.MustEval(`({user: !!document.querySelector('form[data-form="new"] input[value="user.*"]'), deploy: !!document.querySelector('form[data-form="new"] input[value="deploy.failed"]'), every: !!document.querySelector('form[data-form="new"] input[value="*"]')})`, &offered)
	if offered.User || !offered.Deploy || !offered.Every {
		t.Errorf("the app's form offers %+v; want deploy.failed and *, and no install event (user.*)", offered)
	}
	hook := hooks.srv.URL + "/app"
	fill(t, tab, map[string]string{"url": hook}, "url")
	waitFor(t, tab, "the refusal at the events", `document.querySelector('#new-events-error .code')`)
	var refused string
	tab.MustEval(`document.querySelector('#new-events-error').innerText`, &refused)
	if !strings.Contains(refused, "VALID_INVALID") {
		t.Errorf("a subscription without events shows %q at the events; want the API's VALID_INVALID", refused)
	}
	accessible(t, tab, "the new subscription form with a refusal")
	screenshots(t, tab, "app-events-form")
	if n := len(s.subscriptions(t)); n != 0 {
		t.Fatalf("the refused form made %d subscriptions", n)
	}
	clickButton(t, tab, ".subscriptions .actions", "New subscription") // closed, and opened afresh below

	subID, key := createInPage(t, tab, base, []string{"app.*", "deploy.failed"}, hook)
	tests := hooks.waitCalls(t, "/app", "subscription.test", 1)
	if !signedBy(tests[0], key) {
		t.Errorf("the test delivery is not signed under the key the page showed: Svc-Signature %q", tests[0].Header.Get("Svc-Signature"))
	}
	testDelivered(t, tab)
	got := s.subscription(t, subID)
	if got.AppID == nil || *got.AppID != appID || got.URL == nil || *got.URL != hook || !slices.Equal(got.Events, []string{"app.*", "deploy.failed"}) || !got.Enabled || got.OwnerID != me.User.ID {
		t.Errorf("the API has the subscription made in the page as %+v", got)
	}
	waitFor(t, tab, "the test in the delivery log", `document.querySelector('[data-table="deliveries"] tr[data-event="subscription.test"][data-state="delivered"]')`)
	accessible(t, tab, "a new subscription with its key and test")
	screenshots(t, tab, "app-events-created")

	// An app event: delivered at the second attempt; resent.
	const secretValue = "s3cret-value-never-sent-9d2c"
	s.must(t, "PUT", "/apps/"+appID+"/secrets/API_TOKEN", map[string]any{"value": secretValue}, http.StatusOK, nil)
	row := `[data-table="deliveries"] tr[data-event="app.secret_changed"]`
	waitFor(t, tab, "app.secret_changed delivered in the log", `document.querySelector('`+row+`[data-state="delivered"]')`)
	clickButton(t, tab, row, "Attempts (2)")
	waitFor(t, tab, "its two attempts", `document.querySelectorAll('tr.attempts-row [data-attempt]').length === 2`)
	var attempts []string
	tab.MustEval(`[...document.querySelectorAll('tr.attempts-row [data-attempt]')].map((r) => r.innerText)`, &attempts)
	if len(attempts) != 2 || !strings.Contains(attempts[0], "503") || !strings.Contains(attempts[1], "200") || !strings.Contains(attempts[0], "ms") {
		t.Errorf("the attempts shown: %q; want 503 (with its error and duration), then 200", attempts)
	}
	accessible(t, tab, "the delivery log with attempts")
	screenshots(t, tab, "app-events-log")
	changed := hooks.waitCalls(t, "/app", "app.secret_changed", 2)
	for _, c := range changed {
		if strings.Contains(string(c.Body), secretValue) {
			t.Errorf("the secret's value was sent to the webhook: %s", c.Body)
		}
		if !signedBy(c, key) {
			t.Errorf("app.secret_changed is not signed under the key")
		}
	}
	clickButton(t, tab, row, "Resend")
	waitText(t, tab, "Resent app.secret_changed")
	changed = hooks.waitCalls(t, "/app", "app.secret_changed", 3)
	eventID := changed[0].Header.Get("Svc-Event-Id")
	for _, c := range changed {
		if c.Header.Get("Svc-Event-Id") != eventID || string(c.Body) != string(changed[0].Body) {
			t.Errorf("a redelivery differs: Svc-Event-Id %s (want %s), body %s (want %s)", c.Header.Get("Svc-Event-Id"), eventID, c.Body, changed[0].Body)
		}
	}
	waitForAPI(t, "the resend's attempt in the API", func() bool {
		for _, d := range s.deliveries(t, subID) {
			if d.EventType == "app.secret_changed" {
				return len(d.Attempts) == 3 && d.State == "delivered" && d.EventID == eventID
			}
		}
		return false
	})
	waitFor(t, tab, "the resend's attempt in the log", `[...document.querySelectorAll('`+row+` button')].some((b) => b.innerText.trim() === "Attempts (3)")`)

	// Rotate: a new key shown once; the next test is signed under both.
	clickButton(t, tab, ".sub-actions", "Rotate key")
	clickButton(t, tab, "dialog.confirm", "Rotate key")
	waitFor(t, tab, "the new key", `document.querySelector('[data-secret=signing_key]') && document.querySelector('[data-secret=signing_key]').innerText.includes("The new signing key") && document.querySelector('[data-secret=signing_key] input[name="signing_key"]').value !== `+strconv.Quote(key))
	var newKey string
	tab.MustEval(`document.querySelector('[data-secret=signing_key] input[name="signing_key"]').value`, &newKey)
	if keys := s.subscription(t, subID).SigningKeys; len(keys) != 2 || keys[0].RetiresAt != nil || keys[1].RetiresAt == nil {
		t.Errorf("after the rotation the API has the keys %+v; want the new one and the old one retiring", keys)
	}
	screenshots(t, tab, "app-events-rotated")
	clickButton(t, tab, "[data-secret=signing_key]", "Done, hide it")
	waitFor(t, tab, "the key hidden", `!document.querySelector('[data-secret=signing_key]')`)
	clickButton(t, tab, ".sub-actions", "Send test")
	tests = hooks.waitCalls(t, "/app", "subscription.test", 2)
	if last := tests[len(tests)-1]; !signedBy(last, newKey) || !signedBy(last, key) || len(strings.Fields(last.Header.Get("Svc-Signature"))) != 2 {
		t.Errorf("the test after the rotation: Svc-Signature %q; want v1= under the new key and under the old", last.Header.Get("Svc-Signature"))
	}
	testDelivered(t, tab)

	// Edit: shape the request (PUT, a header whose value is write-only, a
	// template); the next test is sent so.
	const headerValue = "header-value-write-only-4e1a"
	clickButton(t, tab, ".sub-actions", "Edit")
	waitFor(t, tab, "the edit form", `document.querySelector('#sub-edit form[data-form="edit"]')`)
	clickButton(t, tab, "#sub-edit", "Shape the request")
	choose(t, tab, "#edit-method", "PUT")
	click(t, tab, `#sub-edit input[name="replace_headers"]`)
	clickButton(t, tab, "#sub-edit", "Add a header")
	typeInto(t, tab, "header_name", "X-Env")
	typeInto(t, tab, "header_value", headerValue)
	setValue(t, tab, "#edit-template", `{"type": {{json .Type}}, "id": {{json .ID}}, "data": {{json .Data}}}`)
	accessible(t, tab, "the edit form, shaping the request")
	screenshots(t, tab, "app-events-edit")
	clickButton(t, tab, "#sub-edit", "Save changes")
	waitFor(t, tab, "the change saved", `!document.querySelector('#sub-edit') && document.body.innerText.includes("PUT application/json, extra headers X-Env, shaped by a template")`)
	if v := s.subscription(t, subID); v.Method != "PUT" || !slices.Equal(v.HeaderNames, []string{"X-Env"}) || v.PayloadTemplate == nil {
		t.Errorf("after the edit the API has %+v", v)
	}
	clickButton(t, tab, ".sub-actions", "Send test")
	tests = hooks.waitCalls(t, "/app", "subscription.test", 3)
	if last := tests[len(tests)-1]; last.Method != "PUT" || last.Header.Get("X-Env") != headerValue || !signedBy(last, newKey) {
		t.Errorf("the test after the edit: %s with X-Env %q (signed %v); want PUT with the header, signed", last.Method, last.Header.Get("X-Env"), signedBy(last, newKey))
	}
	var shaped map[string]any
	if err := json.Unmarshal(tests[len(tests)-1].Body, &shaped); err != nil || len(shaped) != 3 || shaped["type"] != "subscription.test" || shaped["data"] == nil {
		t.Errorf("the test after the edit has the body %s; want the template's (type, id, data)", tests[len(tests)-1].Body)
	}
	testDelivered(t, tab)
	notInPage(t, tab, headerValue)

	// Off: an event meanwhile is never sent; on again.
	click(t, tab, "#sub-enabled")
	waitFor(t, tab, "the switch off", `document.querySelector('#sub-enabled').getAttribute("aria-checked") === "false" && document.body.innerText.includes("Turned off")`)
	if s.subscription(t, subID).Enabled {
		t.Errorf("the switch turned off, the API has the subscription on")
	}
	// The dispatcher decides who receives an event when it reads it from
	// the outbox, for every subscription in one write: once a second
	// subscription (made through the API, then deleted) has WHILE_OFF's
	// event, it was passed over for the one turned off.
	var probe struct {
		Subscription subView `json:"subscription"`
	}
	s.must(t, "POST", "/subscriptions", map[string]any{"app_id": appID, "events": []string{"app.secret_changed"}, "url": hooks.srv.URL + "/probe"}, http.StatusCreated, &probe)
	s.must(t, "PUT", "/apps/"+appID+"/secrets/WHILE_OFF", map[string]any{"value": "x"}, http.StatusOK, nil)
	hooks.waitCalls(t, "/probe", "app.secret_changed", 1)
	s.must(t, "DELETE", "/subscriptions/"+probe.Subscription.ID, nil, http.StatusNoContent, nil)
	click(t, tab, "#sub-enabled")
	waitFor(t, tab, "the switch on", `document.querySelector('#sub-enabled').getAttribute("aria-checked") === "true" && document.body.innerText.includes("Turned on")`)
	if v := s.subscription(t, subID); !v.Enabled || v.FailingSince != nil {
		t.Errorf("the switch turned on, the API has %+v", v)
	}
	s.must(t, "PUT", "/apps/"+appID+"/secrets/WHILE_ON", map[string]any{"value": "x"}, http.StatusOK, nil)
	waitForAPI(t, "WHILE_ON's event", func() bool {
		for _, c := range hooks.of("/app", "app.secret_changed") {
			if strings.Contains(string(c.Body), "WHILE_ON") {
				return true
			}
		}
		return false
	})
	for _, c := range hooks.of("/app", "app.secret_changed") {
		if strings.Contains(string(c.Body), "WHILE_OFF") {
			t.Errorf("an event of while the subscription was off was sent: %s", c.Body)
		}
	}

	// More than a page of deliveries (20 a page).
	for i := range 18 {
		s.must(t, "PUT", "/apps/"+appID+"/secrets/BULK_"+strconv.Itoa(i), map[string]any{"value": "x"}, http.StatusOK, nil)
	}
	var total int
	waitForAPI(t, "every delivery made", func() bool {
		ds := s.deliveries(t, subID)
		total = len(ds)
		return total >= 23 && !slices.ContainsFunc(ds, func(d deliveryView) bool { return d.State != "delivered" })
	})

	// A subscription's page opened by its address: no shift as it arrives;
	// the log's next page with More.
	tab.Go(base + "/" + subID)
	waitFor(t, tab, "the subscription's page", `document.querySelector('[data-subscription-detail] .sub-facts') && document.querySelectorAll('[data-table="deliveries"] tr[data-delivery]').length === 20 && document.querySelector('[data-table="subscriptions"] tr[data-subscription]')`)
	noLayoutShift(t, tab, "a subscription's page")
	clickButton(t, tab, ".delivery-log", "More deliveries")
	waitFor(t, tab, "every delivery in the log", `document.querySelectorAll('[data-table="deliveries"] tr[data-delivery]').length === `+strconv.Itoa(total)+` && ![...document.querySelectorAll('.delivery-log button')].some((b) => b.innerText.includes("More"))`)
	var shown []string
	tab.MustEval(`[...document.querySelectorAll('[data-table="deliveries"] tr[data-delivery]')].map((r) => r.dataset.delivery)`, &shown)
	var want []string
	for _, d := range s.deliveries(t, subID) {
		want = append(want, d.ID)
	}
	if !slices.Equal(shown, want) {
		t.Errorf("the log shows, after More, %q; the API has %q", shown, want)
	}
	accessible(t, tab, "a subscription's page")
	screenshots(t, tab, "app-events-detail")

	// The installation's page: an install-wide subscription.
	click(t, tab, `.top nav a[href="/admin/"]`)
	waitFor(t, tab, "the admin's side list", `document.querySelector('nav.side a[href="/admin/events"]')`)
	click(t, tab, `nav.side a[href="/admin/events"]`)
	adminBase := s.console + "/admin/events"
	waitURL(t, tab, "/admin/events", func(a string) bool { return a == adminBase })
	waitFor(t, tab, "the admin's list", `document.querySelector('[data-table="subscriptions"] tr[data-subscription="`+subID+`"]')`)
	openCreate(t, tab)
	waitText(t, tab, "No notification adapter is configured yet")
	var adapterOff bool
	tab.MustEval(`document.querySelector('input[name="new_target"][value="adapter"]').disabled`, &adapterOff)
	if !adapterOff {
		t.Errorf("with no notification adapter the adapter choice is enabled")
	}
	clickButton(t, tab, ".subscriptions .actions", "New subscription")
	installHook := hooks.srv.URL + "/install"
	installID, installKey := createInPage(t, tab, adminBase, []string{"user.*"}, installHook)
	if tests := hooks.waitCalls(t, "/install", "subscription.test", 1); !signedBy(tests[0], installKey) {
		t.Errorf("the install-wide test is not signed under its key")
	}
	testDelivered(t, tab)
	if v := s.subscription(t, installID); v.AppID != nil || !slices.Equal(v.Events, []string{"user.*"}) {
		t.Errorf("the API has the install-wide subscription as %+v", v)
	}
	accessible(t, tab, "the installation's Events page")
	screenshots(t, tab, "admin-events")

	// A member with only app.view on the app.
	var role struct {
		Role struct{ ID string } `json:"role"`
	}
	s.must(t, "POST", "/roles", map[string]any{"name": "watcher", "scope": "app", "verbs": []string{"app.view"}}, http.StatusCreated, &role)
	var mia struct {
		User struct{ ID string } `json:"user"`
	}
	s.must(t, "POST", "/users", map[string]any{"username": "mia", "display_name": "Mia Member", "password": "mia-password-5150-x"}, http.StatusCreated, &mia)
	s.must(t, "POST", "/apps/"+appID+"/grants", map[string]any{"plane": "control", "principal_kind": "user", "principal_id": mia.User.ID, "role_id": role.Role.ID}, http.StatusCreated, nil)
	miaTab := consoleTab(t, browse(t))
	s.signInTab(t, miaTab, "mia", "mia-password-5150-x")
	signedIn := hooks.waitCalls(t, "/install", "user.signed_in", 1)
	if !signedBy(signedIn[0], installKey) || !strings.Contains(string(signedIn[0].Body), mia.User.ID) {
		t.Errorf("mia's sign-in reached the install-wide subscription as %s", signedIn[0].Body)
	}
	miaTab.Go(base)
	waitText(t, miaTab, "No subscriptions to this app’s events yet.")
	var miaSees string
	miaTab.MustEval(`document.body.innerHTML`, &miaSees)
	if strings.Contains(miaSees, subID) || strings.Contains(miaSees, installID) {
		t.Errorf("mia's Events tab shows the admin's subscriptions")
	}
	openCreate(t, miaTab)
	var radios int
	miaTab.MustEval(`document.querySelectorAll('input[name="new_target"]').length`, &radios)
	if radios != 0 {
		t.Errorf("mia (no install.view) is offered a choice of adapters")
	}
	clickButton(t, miaTab, ".subscriptions .actions", "New subscription")
	miaID, miaKey := createInPage(t, miaTab, base, []string{"deploy.*"}, hooks.srv.URL+"/mia")
	if tests := hooks.waitCalls(t, "/mia", "subscription.test", 1); !signedBy(tests[0], miaKey) {
		t.Errorf("mia's test is not signed under her key")
	}
	testDelivered(t, miaTab)
	if v := s.subscription(t, miaID); v.OwnerID != mia.User.ID || v.AppID == nil || *v.AppID != appID {
		t.Errorf("the API has mia's subscription as %+v", v)
	}
	miaTab.Go(s.console + "/admin/events")
	waitFor(t, miaTab, "mia's own subscription on the installation's page", `document.querySelector('[data-table="subscriptions"] tr[data-subscription="`+miaID+`"]')`)
	var rows int
	miaTab.MustEval(`document.querySelectorAll('[data-table="subscriptions"] tr[data-subscription]').length`, &rows)
	if rows != 1 {
		t.Errorf("mia's installation page lists %d subscriptions; want only hers", rows)
	}
	openCreate(t, miaTab)
	click(t, miaTab, `form[data-form="new"] input[name="events"][value="*"]`)
	fill(t, miaTab, map[string]string{"url": hooks.srv.URL + "/mia-all"}, "url")
	waitFor(t, miaTab, "the refusal of an install-wide subscription", `document.querySelector('#new-form-error .code')`)
	miaTab.MustEval(`document.querySelector('#new-form-error').innerText`, &refused)
	if !strings.Contains(refused, "PERM_VERB_REQUIRED") || !strings.Contains(refused, "install.events.manage") {
		t.Errorf("mia's install-wide subscription shows %q; want the API's PERM_VERB_REQUIRED naming install.events.manage", refused)
	}
	accessible(t, miaTab, "a member's installation Events page with a refusal")
	screenshots(t, miaTab, "admin-events-member")
	all := s.subscriptions(t)
	if len(all) != 3 || slices.ContainsFunc(all, func(v subView) bool { return v.OwnerID == mia.User.ID && v.AppID == nil }) {
		t.Errorf("the API has the subscriptions %+v; want the admin's two and mia's one on the app", all)
	}

	// The admin sees all three; deletes the app's subscription.
	tab.Go(adminBase)
	waitFor(t, tab, "three subscriptions", `document.querySelectorAll('[data-table="subscriptions"] tr[data-subscription]').length === 3 && document.querySelector('[data-table="subscriptions"] tr[data-subscription="`+miaID+`"]').innerText.includes(`+strconv.Quote(mia.User.ID)+`) && document.querySelector('[data-table="subscriptions"] tr[data-subscription="`+subID+`"]').innerText.includes("Ledger")`)
	noLayoutShift(t, tab, "the installation's Events page")
	tab.Go(base + "/" + subID)
	clickButton(t, tab, ".sub-actions", "Delete")
	clickButton(t, tab, "dialog.confirm", "Delete subscription")
	waitURL(t, tab, "back to the list", func(a string) bool { return a == base })
	waitFor(t, tab, "the subscription gone", `document.querySelector('[data-table="subscriptions"]') && !document.querySelector('tr[data-subscription="`+subID+`"]') && document.querySelector('tr[data-subscription="`+miaID+`"]')`)
	if r := s.call(t, "GET", "/subscriptions/"+subID, nil); r.status != http.StatusNotFound {
		t.Errorf("GET the deleted subscription: %d %s; want 404", r.status, r.body)
	}

	noProblems(t, tab)
	noProblems(t, miaTab)
	onlyAPI(t, tab, s.console)
	onlyAPI(t, miaTab, s.console)
}
