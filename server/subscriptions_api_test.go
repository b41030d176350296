package server

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

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/subscriptions"
	"github.com/svchost/svc/raftstore"
)

// receiver is a webhook receiver that verifies every request with its own
// implementation of the signature scheme (written from the specification's
// text, not the webhook package's), and answers as status says.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	keys   []string
	status func(n int) int // the answer to the n-th request (from 1)
	hold   chan struct{}   // when set, requests wait for it to close
}

type received struct {
	at       time.Time
	header   http.Header
	body     []byte
	verified []string // the keys that verify it
}

func newReceiver(t *testing.T, keys ...string) *receiver {
	t.Helper()
	rc := &receiver{keys: keys, status: func(int) int { return http.StatusNoContent }}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rec := received{at: time.Now(), header: r.Header.Clone(), body: body}
		for _, k := range rc.keys {
			if verifySignature(k, r.Header.Get("Svc-Timestamp"), body, r.Header.Get("Svc-Signature"), time.Now()) {
				rec.verified = append(rec.verified, k)
			}
		}
		rc.got = append(rc.got, rec)
		n, hold := len(rc.got), rc.hold
		rc.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				panic(http.ErrAbortHandler) // no answer, not a late 200
			}
		}
		w.WriteHeader(rc.status(n))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) setKeys(keys ...string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.keys = keys
}

func (rc *receiver) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// verifySignature is the receiver's side of the scheme, as the
// specification states it: HMAC-SHA256 keyed by the signing key over the
// timestamp, a full stop and the raw body, hex, after "v1="; compared in
// constant time; a timestamp more than five minutes from the receiver's
// clock is refused.
func verifySignature(key, ts string, body []byte, header string, now time.Time) bool {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ts != strconv.FormatInt(sec, 10) {
		return false
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	want := []byte(hex.EncodeToString(mac.Sum(nil)))
	ok := false
	for _, part := range strings.Split(header, " ") {
		if v, found := strings.CutPrefix(part, "v1="); found && hmac.Equal([]byte(v), want) {
			ok = true
		}
	}
	return ok
}

// envelopeBody is the standard webhook body.
type envelopeBody struct {
	ID         string    `json:"id"`
	Type       string    `json:"type"`
	OccurredAt time.Time `json:"occurred_at"`
	App        *struct{ ID, Name, Slug string }
	Actor      struct{ Kind string }
	Data       map[string]any `json:"data"`
}

// eventsHarness is a harness whose webhooks may reach the loopback
// receivers, with the given retry settings.
func eventsHarness(t testing.TB, env ...string) *harness {
	t.Helper()
	return newHarnessWith(t, harnessOptions{adminPassword: adminPassword,
		env: append([]string{"SVC_POLICY_ALLOW_PRIVATE_WEBHOOKS=true", "SVC_EVENTS_RETRY_SCHEDULE=300ms,600ms,900ms"}, env...)})
}

func (h *harness) subscribe(t testing.TB, body map[string]any, auth ...string) subscriptions.Created {
	t.Helper()
	a := h.send("POST", api+"/subscriptions", jsonOf(body), auth...)
	if a.status != http.StatusCreated {
		t.Fatalf("subscribe %v: %d %s", body, a.status, a.body)
	}
	return decodeAs[subscriptions.Created](t, a)
}

func (h *harness) deliveries(t *testing.T, subID string, auth ...string) []subscriptions.DeliveryView {
	t.Helper()
	a := h.send("GET", api+"/subscriptions/"+subID+"/deliveries?limit=500", "", auth...)
	if a.status != http.StatusOK {
		t.Fatalf("deliveries of %s: %d %s", subID, a.status, a.body)
	}
	return decodeAs[list[subscriptions.DeliveryView]](t, a).Items
}

func (h *harness) subscription(t *testing.T, subID string) subscriptions.View {
	t.Helper()
	a := h.send("GET", api+"/subscriptions/"+subID, "")
	if a.status != http.StatusOK {
		t.Fatalf("get %s: %d %s", subID, a.status, a.body)
	}
	return decodeAs[subscriptionAnswer](t, a).Subscription
}

// TestSubscriptionsDeliverSignedWebhooks: an app's subscription gets its
// app's events and no other's, an install-wide one gets app and install
// events; each request has the body and headers of the specification and
// verifies with the signing key shown at creation.
func TestSubscriptionsDeliverSignedWebhooks(t *testing.T) {
	h := eventsHarness(t)
	web, other := h.app(t, "Web"), h.app(t, "Other")
	appRc, allRc := newReceiver(t), newReceiver(t)
	appSub := h.subscribe(t, map[string]any{"app_id": web, "events": []string{"app.secret_changed"}, "url": appRc.srv.URL + "/hook"})
	allSub := h.subscribe(t, map[string]any{"events": []string{"app.secret_changed", "token.*"}, "url": allRc.srv.URL})
	if !strings.HasPrefix(appSub.SigningKey, "whsec_") || appSub.SigningKey == allSub.SigningKey {
		t.Fatalf("signing keys %q and %q", appSub.SigningKey, allSub.SigningKey)
	}
	appRc.setKeys(appSub.SigningKey)
	allRc.setKeys(allSub.SigningKey)
	h.putSecret(t, other, "OTHER_KEY", "v")
	h.putSecret(t, web, "WEB_KEY", "v")
	h.delegatedToken(t, h.adminID, false) // token.created, an install event
	waitFor(t, "the app's subscription to get its event", func() bool { return len(appRc.all()) >= 1 })
	waitFor(t, "the install-wide subscription to get three events", func() bool { return len(allRc.all()) >= 3 })

	got := appRc.all()[0]
	var body envelopeBody
	if err := json.Unmarshal(got.body, &body); err != nil {
		t.Fatalf("body %s: %v", got.body, err)
	}
	if body.Type != "app.secret_changed" || body.App == nil || body.App.ID != web || body.App.Name != "Web" || body.Data["key"] != "WEB_KEY" ||
		body.Actor.Kind != authz.KindToken || !strings.HasPrefix(body.ID, "evt_") || body.OccurredAt.IsZero() {
		t.Errorf("body = %s", got.body)
	}
	if len(got.verified) != 1 {
		t.Errorf("the signature %q does not verify with the subscription's key", got.header.Get("Svc-Signature"))
	}
	for name, want := range map[string]string{"Svc-Event": "app.secret_changed", "Svc-Event-Id": body.ID, "Content-Type": "application/json"} {
		if v := got.header.Get(name); v != want {
			t.Errorf("%s = %q; want %q", name, v, want)
		}
	}
	dlv := h.deliveries(t, appSub.Subscription.ID)
	if len(dlv) != 1 || got.header.Get("Svc-Delivery-Id") != dlv[0].ID || dlv[0].EventID != body.ID {
		t.Fatalf("delivery log %+v; header Svc-Delivery-Id %q", dlv, got.header.Get("Svc-Delivery-Id"))
	}
	waitFor(t, "the delivery to be recorded as delivered", func() bool {
		d := h.deliveries(t, appSub.Subscription.ID)[0]
		return d.State == subscriptions.StateDelivered && len(d.Attempts) == 1 && d.Attempts[0].StatusCode != nil && *d.Attempts[0].StatusCode == 204
	})
	var types []string
	for _, r := range allRc.all() {
		var b envelopeBody
		_ = json.Unmarshal(r.body, &b)
		types = append(types, b.Type)
		if b.Type == "app.secret_changed" && (b.App == nil || b.App.ID == "") {
			t.Errorf("app event without its app: %s", r.body)
		}
		if b.Type == "token.created" && b.App != nil {
			t.Errorf("install event with an app: %s", r.body)
		}
		if len(r.verified) != 1 {
			t.Errorf("%s does not verify", b.Type)
		}
	}
	slices.Sort(types)
	if want := []string{"app.secret_changed", "app.secret_changed", "token.created"}; !slices.Equal(types[:3], want) {
		t.Errorf("install-wide subscription got %v; want %v", types, want)
	}
}

// TestSubscriptionRetriesFollowTheSchedule: a failing receiver is retried
// after each wait of the schedule (within 10%), then the delivery is
// failed; a redirect is a failure and is not followed.
func TestSubscriptionRetriesFollowTheSchedule(t *testing.T) {
	h := eventsHarness(t, "SVC_EVENTS_RETRY_SCHEDULE=1s,2s,3s")
	canary := newReceiver(t)
	rc := newReceiver(t)
	rc.status = func(int) int { return http.StatusServiceUnavailable }
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, canary.srv.URL+"/internal", http.StatusFound)
	}))
	t.Cleanup(redirect.Close)
	app := h.app(t, "Flaky")
	failing := h.subscribe(t, map[string]any{"app_id": app, "events": []string{"app.secret_changed"}, "url": rc.srv.URL})
	redirected := h.subscribe(t, map[string]any{"app_id": app, "events": []string{"app.secret_changed"}, "url": redirect.URL})
	h.putSecret(t, app, "K", "v")
	waitFor(t, "four attempts", func() bool { return len(rc.all()) >= 4 })
	waitFor(t, "the delivery to fail", func() bool {
		d := h.deliveries(t, failing.Subscription.ID)
		return len(d) == 1 && d[0].State == subscriptions.StateFailed
	})
	got := rc.all()
	if len(got) != 4 {
		t.Fatalf("%d attempts; want 4 (the first and three retries)", len(got))
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second} {
		gap := got[i+1].at.Sub(got[i].at)
		// The schedule counts from each attempt's start; the receiver sees
		// it a connection later, so a gap may fall a little short too.
		if gap < want-want/10 || gap > want+want/10 {
			t.Errorf("retry %d came %s after the attempt before; want %s within 10%%", i+1, gap, want)
		}
		if got[i+1].header.Get("Svc-Event-Id") != got[0].header.Get("Svc-Event-Id") || string(got[i+1].body) != string(got[0].body) {
			t.Errorf("retry %d is not the same event and body", i+1)
		}
	}
	d := h.deliveries(t, failing.Subscription.ID)[0]
	if len(d.Attempts) != 4 || d.NextAttemptAt != nil || d.Attempts[3].StatusCode == nil || *d.Attempts[3].StatusCode != 503 ||
		d.Attempts[3].Error == nil || !strings.Contains(*d.Attempts[3].Error, "503") {
		t.Errorf("delivery = %+v", d)
	}
	waitFor(t, "the redirected delivery's first attempt", func() bool {
		d := h.deliveries(t, redirected.Subscription.ID)
		return len(d) == 1 && len(d[0].Attempts) >= 1
	})
	rd := h.deliveries(t, redirected.Subscription.ID)[0]
	if rd.State == subscriptions.StateDelivered || rd.Attempts[0].StatusCode == nil || *rd.Attempts[0].StatusCode != http.StatusFound {
		t.Errorf("a redirect counted as %+v; want a failure with status 302", rd)
	}
	if n := len(canary.all()); n != 0 {
		t.Errorf("the redirect's target got %d requests; redirects are never followed", n)
	}
}

// TestSubscriptionTurnedOffAfterFailingAllDay: a subscription whose every
// attempt fails for disable_after is turned off and subscription.disabled
// is emitted with its fields; turning it back on clears the record.
func TestSubscriptionTurnedOffAfterFailingAllDay(t *testing.T) {
	h := eventsHarness(t, "SVC_EVENTS_RETRY_SCHEDULE=200ms,200ms,200ms,200ms,200ms,200ms", "SVC_EVENTS_DISABLE_AFTER=700ms")
	rc := newReceiver(t)
	rc.status = func(int) int { return http.StatusInternalServerError }
	watcher := newReceiver(t)
	app := h.app(t, "Down")
	sub := h.subscribe(t, map[string]any{"app_id": app, "events": []string{"app.secret_changed"}, "url": rc.srv.URL})
	h.subscribe(t, map[string]any{"events": []string{"subscription.disabled"}, "url": watcher.srv.URL})
	h.putSecret(t, app, "K", "v")
	waitFor(t, "the subscription to be turned off", func() bool { return !h.subscription(t, sub.Subscription.ID).Enabled })
	v := h.subscription(t, sub.Subscription.ID)
	if v.DisabledReason == nil || !strings.Contains(*v.DisabledReason, "500") || v.FailingSince == nil {
		t.Errorf("turned off with reason %v, failing since %v", v.DisabledReason, v.FailingSince)
	}
	waitFor(t, "subscription.disabled to reach the watcher", func() bool { return len(watcher.all()) >= 1 })
	var body envelopeBody
	_ = json.Unmarshal(watcher.all()[0].body, &body)
	if body.Type != "subscription.disabled" || body.Data["subscription_id"] != sub.Subscription.ID || body.Data["reason"] == "" ||
		body.App == nil || body.App.ID != app {
		t.Errorf("subscription.disabled = %s", watcher.all()[0].body)
	}
	on := h.send("PATCH", api+"/subscriptions/"+sub.Subscription.ID, `{"enabled":true}`)
	if on.status != http.StatusOK {
		t.Fatalf("turn back on: %d %s", on.status, on.body)
	}
	if v := decodeAs[subscriptionAnswer](t, on).Subscription; !v.Enabled || v.FailingSince != nil || v.DisabledReason != nil {
		t.Errorf("back on: %+v", v)
	}
}

// TestSubscriptionAccessIsCheckedAtSending: a member subscribed to an app
// it views; once its grant is gone, nothing more reaches its receiver and
// the delivery log says why.
func TestSubscriptionAccessIsCheckedAtSending(t *testing.T) {
	h := eventsHarness(t)
	app := h.app(t, "Private")
	member := h.account(t, "member", nil, true)
	h.grantApp(t, app, authz.KindUser, member.userID, authz.RoleViewer)
	rc := newReceiver(t)
	sub := h.subscribe(t, map[string]any{"app_id": app, "events": []string{"app.secret_changed"}, "url": rc.srv.URL}, member.bearer()...)
	h.putSecret(t, app, "FIRST", "v")
	waitFor(t, "the first event", func() bool { return len(rc.all()) == 1 })
	gs, _ := identity.Grants.List(h.store.Read(), raftstore.Query{Index: "app", Key: app})
	revoked := 0
	for _, g := range gs {
		if g.Value.PrincipalID == member.userID {
			if d := h.send("DELETE", api+"/apps/"+app+"/grants/"+g.Value.ID, ""); d.status != http.StatusNoContent {
				t.Fatalf("revoke: %d %s", d.status, d.body)
			}
			revoked++
		}
	}
	if revoked != 1 {
		t.Fatalf("revoked %d grants of the member; want 1", revoked)
	}
	h.putSecret(t, app, "SECOND", "v")
	waitFor(t, "the second delivery to end", func() bool {
		ds := h.deliveries(t, sub.Subscription.ID) // the administrator manages every subscription
		return len(ds) == 2 && ds[0].State == subscriptions.StateFailed
	})
	d := h.deliveries(t, sub.Subscription.ID)[0]
	if d.Attempts[0].Error == nil || !strings.Contains(*d.Attempts[0].Error, "app.view") {
		t.Errorf("the refused delivery says %+v", d.Attempts)
	}
	if n := len(rc.all()); n != 1 {
		t.Errorf("the receiver got %d requests; the second event must not reach an owner who lost sight of the app", n)
	}
	// The member no longer manages it either? It still owns it: it may
	// read its log, and delete it.
	if a := h.send("GET", api+"/subscriptions/"+sub.Subscription.ID, "", member.bearer()...); a.status != http.StatusOK {
		t.Errorf("the owner reads its subscription: %d %s", a.status, a.body)
	}
}

// TestSubscriptionTestResendRotate: a test event goes to the subscription
// tested only, whatever its filter; a resend is the same event and body;
// after a rotation both keys sign for the overlap.
func TestSubscriptionTestResendRotate(t *testing.T) {
	h := eventsHarness(t)
	rc, bystander := newReceiver(t), newReceiver(t)
	sub := h.subscribe(t, map[string]any{"events": []string{"policy.updated"}, "url": rc.srv.URL})
	h.subscribe(t, map[string]any{"events": []string{"*"}, "url": bystander.srv.URL})
	rc.setKeys(sub.SigningKey)
	a := h.send("POST", api+"/subscriptions/"+sub.Subscription.ID+"/test", "")
	if a.status != http.StatusAccepted {
		t.Fatalf("test: %d %s", a.status, a.body)
	}
	dlv := decodeAs[deliveryAnswer](t, a).Delivery
	waitFor(t, "the test delivery", func() bool { return len(rc.all()) == 1 })
	var body envelopeBody
	_ = json.Unmarshal(rc.all()[0].body, &body)
	if body.Type != "subscription.test" || body.Data["subscription_id"] != sub.Subscription.ID || body.App != nil {
		t.Errorf("test body %s", rc.all()[0].body)
	}
	waitFor(t, "the test delivery to be delivered", func() bool {
		a := h.send("GET", api+"/subscriptions/"+sub.Subscription.ID+"/deliveries/"+dlv.ID, "")
		return decodeAs[deliveryAnswer](t, a).Delivery.State == subscriptions.StateDelivered
	})
	r := h.send("POST", api+"/subscriptions/"+sub.Subscription.ID+"/deliveries/"+dlv.ID+"/resend", "")
	if r.status != http.StatusAccepted {
		t.Fatalf("resend: %d %s", r.status, r.body)
	}
	waitFor(t, "the resent delivery", func() bool { return len(rc.all()) == 2 })
	first, again := rc.all()[0], rc.all()[1]
	if again.header.Get("Svc-Event-Id") != first.header.Get("Svc-Event-Id") || string(again.body) != string(first.body) ||
		again.header.Get("Svc-Delivery-Id") != dlv.ID {
		t.Errorf("the resend differs: %v %s", again.header, again.body)
	}
	rot := h.send("POST", api+"/subscriptions/"+sub.Subscription.ID+"/rotate-key", "")
	if rot.status != http.StatusOK {
		t.Fatalf("rotate: %d %s", rot.status, rot.body)
	}
	newKey := decodeAs[subscriptions.RotatedKey](t, rot).SigningKey
	if newKey == sub.SigningKey || !strings.HasPrefix(newKey, "whsec_") {
		t.Fatalf("rotated to %q", newKey)
	}
	rc.setKeys(newKey, sub.SigningKey)
	h.send("POST", api+"/subscriptions/"+sub.Subscription.ID+"/test", "")
	waitFor(t, "a delivery after the rotation", func() bool { return len(rc.all()) == 3 })
	after := rc.all()[2]
	if len(after.verified) != 2 || len(strings.Fields(after.header.Get("Svc-Signature"))) != 2 {
		t.Errorf("after a rotation: signature %q verified by %d keys; want both", after.header.Get("Svc-Signature"), len(after.verified))
	}
	if keys := h.subscription(t, sub.Subscription.ID).SigningKeys; len(keys) != 2 || keys[0].RetiresAt != nil || keys[1].RetiresAt == nil {
		t.Errorf("signing keys %+v; want the new one and the old one retiring", keys)
	}
	time.Sleep(200 * time.Millisecond) // a bystander delivery would have been sent by now
	for _, r := range bystander.all() {
		if strings.Contains(string(r.body), "subscription.test") {
			t.Errorf("a test event reached another subscription: %s", r.body)
		}
	}
}

// TestSubscriptionRefusals: what a subscription saves is checked, and who
// may have or manage one.
func TestSubscriptionRefusals(t *testing.T) {
	h := eventsHarness(t)
	app := h.app(t, "Guarded")
	member := h.account(t, "member", nil, true)
	stranger := h.account(t, "stranger", nil, true)
	h.grantApp(t, app, authz.KindUser, member.userID, authz.RoleViewer)
	cases := []struct {
		name   string
		body   map[string]any
		auth   []string
		status int
		code   errcode.Code
		field  string
	}{
		{"a filter matching nothing", map[string]any{"events": []string{"deploy.*", "nope.*"}, "url": "https://example.com/h"}, nil, 400, errcode.ValidInvalid, "events"},
		{"no events", map[string]any{"url": "https://example.com/h"}, nil, 400, errcode.ValidInvalid, "events"},
		{"no target", map[string]any{"events": []string{"*"}}, nil, 400, errcode.ValidInvalid, "url"},
		{"two targets", map[string]any{"events": []string{"*"}, "url": "https://example.com/h", "adapter_id": "adp_x"}, nil, 400, errcode.ValidInvalid, "url"},
		{"an adapter that is not one", map[string]any{"events": []string{"*"}, "adapter_id": "adp_01HZZZZZZZZZZZZZZZZZZZZZZZ"}, nil, 400, errcode.ValidInvalid, "adapter_id"},
		{"not a URL", map[string]any{"events": []string{"*"}, "url": "ftp://example.com"}, nil, 400, errcode.ValidInvalid, "url"},
		{"install-wide without the verb", map[string]any{"events": []string{"*"}, "url": "https://example.com/h"}, member.bearer(), 403, errcode.PermVerbRequired, ""},
		{"an app the caller cannot see", map[string]any{"app_id": app, "events": []string{"*"}, "url": "https://example.com/h"}, stranger.bearer(), 404, errcode.NotFound, "app_id"},
		{"enabled on create", map[string]any{"events": []string{"*"}, "url": "https://example.com/h", "enabled": false}, nil, 400, errcode.ValidInvalid, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := wantError(t, c.name, h.send("POST", api+"/subscriptions", jsonOf(c.body), c.auth...), c.status, c.code)
			if c.field != "" && e.Details["field"] != c.field {
				t.Errorf("details.field = %v; want %s", e.Details["field"], c.field)
			}
		})
	}
	// A member's own subscription: headers are write-only, the key is
	// shown once, and another member may not touch it.
	sub := h.subscribe(t, map[string]any{"app_id": app, "events": []string{"app.*"}, "url": "https://example.com/h",
		"headers": map[string]string{"Authorization": "Bearer " + canary}}, member.bearer()...)
	for _, path := range []string{"/subscriptions/" + sub.Subscription.ID, "/subscriptions"} {
		a := h.send("GET", api+path, "", member.bearer()...)
		if a.status != http.StatusOK || strings.Contains(string(a.body), canary) || strings.Contains(string(a.body), sub.SigningKey) || !strings.Contains(string(a.body), `"Authorization"`) {
			t.Errorf("GET %s: %d %s", path, a.status, a.body)
		}
	}
	for _, e := range h.auditEntries(t) {
		if b, _ := json.Marshal(e); strings.Contains(string(b), canary) || strings.Contains(string(b), sub.SigningKey) {
			t.Errorf("an audit entry carries a secret: %s", b)
		}
	}
	for _, e := range h.allEvents(t) {
		if b, _ := json.Marshal(e); strings.Contains(string(b), canary) || strings.Contains(string(b), sub.SigningKey) {
			t.Errorf("an event carries a secret: %s", b)
		}
	}
	if logs := h.logs.String(); strings.Contains(logs, canary) || strings.Contains(logs, sub.SigningKey) {
		t.Error("the log carries a secret")
	}
	h.grantApp(t, app, authz.KindUser, stranger.userID, authz.RoleViewer)
	for _, call := range [][2]string{{"GET", ""}, {"PATCH", ""}, {"DELETE", ""}, {"POST", "/rotate-key"}, {"POST", "/test"}, {"GET", "/deliveries"}} {
		wantError(t, "another member "+call[0]+call[1], h.send(call[0], api+"/subscriptions/"+sub.Subscription.ID+call[1], `{}`, stranger.bearer()...),
			http.StatusForbidden, errcode.PermVerbRequired)
	}
	if ls := decodeAs[list[subscriptions.View]](t, h.send("GET", api+"/subscriptions", "", stranger.bearer()...)); len(ls.Items) != 0 {
		t.Errorf("another member lists %d subscriptions; want none of someone else's", len(ls.Items))
	}
	if ls := decodeAs[list[subscriptions.View]](t, h.send("GET", api+"/subscriptions?app_id="+app, "")); len(ls.Items) != 1 {
		t.Errorf("the administrator lists %d of the app's subscriptions; want 1", len(ls.Items))
	}
	kinds := decodeAs[list[struct{ Name string }]](t, h.send("GET", api+"/events", "", stranger.bearer()...))
	if len(kinds.Items) != 43 {
		t.Errorf("the catalogue lists %d events; want 43", len(kinds.Items))
	}
}

// TestSlowReceiverHoldsOnlyItself: a receiver that never answers takes at
// most its subscription's share of the dispatcher; another subscription's
// deliveries go on meanwhile.
func TestSlowReceiverHoldsOnlyItself(t *testing.T) {
	h := eventsHarness(t, "SVC_EVENTS_ATTEMPT_TIMEOUT=30s")
	slow, fast := newReceiver(t), newReceiver(t)
	slow.hold = make(chan struct{})
	t.Cleanup(func() { close(slow.hold) })
	app := h.app(t, "Busy")
	h.subscribe(t, map[string]any{"app_id": app, "events": []string{"app.secret_changed"}, "url": slow.srv.URL})
	h.subscribe(t, map[string]any{"app_id": app, "events": []string{"app.secret_changed"}, "url": fast.srv.URL})
	for i := range 20 {
		h.putSecret(t, app, "K"+strconv.Itoa(i), "v")
	}
	waitFor(t, "the fast receiver to get all 20 events while the slow one holds its requests", func() bool { return len(fast.all()) == 20 })
	if n := len(slow.all()); n > 4 {
		t.Errorf("the slow receiver has %d requests in flight; a subscription's share is 4", n)
	}
}
