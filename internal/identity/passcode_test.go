package identity

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/throttle"
)

const (
	firstCode  = "canary-passcode-one-7c1e"
	secondCode = "canary-passcode-two-90ab"
)

// passcodeApp declares an app shared with everyone behind code.
func (e *shareEnv) passcodeApp(t *testing.T, name, code string) (appID, grantID string) {
	t.Helper()
	appID = e.app(t, name, e.admin.ID)
	g := e.create(t, e.adminCaller(), appID, NewGrant{Plane: PlaneData, PrincipalKind: authz.KindAnonymous, Passcode: &code})
	return appID, g.ID
}

var visitor = Client{IP: "198.51.100.7"}

// anonymousCtx is a request's context without a credential.
var anonymousCtx = actor.With(bg, actor.Actor{Kind: authz.KindAnonymous, RequestID: "req_test"})

func (e *shareEnv) enter(t *testing.T, appID, code string) Admission {
	t.Helper()
	a, err := e.sh.EnterPasscode(anonymousCtx, appID, code, visitor)
	must(t, "enter the passcode", err)
	return a
}

func TestPasscodeGenerationsAndAdmissions(t *testing.T) {
	e := newShareEnv(t)
	app, grant := e.passcodeApp(t, "Guarded", firstCode)
	g := e.getGrant(t, grant)
	if !g.Passcode || g.PasscodeGeneration != 1 || len(g.PasscodeKey) == 0 || !strings.HasPrefix(g.PasscodeHash, "$argon2id$") {
		t.Fatalf("the grant's passcode = gen %d, hash %q, key %d bytes", g.PasscodeGeneration, g.PasscodeHash, len(g.PasscodeKey))
	}
	other, _ := e.passcodeApp(t, "Other", firstCode)

	m := e.mark()
	a := e.enter(t, app, firstCode)
	if !a.ExpiresAt.Equal(e.now.Add(AdmissionTTL)) {
		t.Errorf("expires at %v, want a day from now", a.ExpiresAt)
	}
	entry := e.oneAudit(t, m, "passcode.admit")
	if *entry.Value.AppID != app || *entry.Value.TargetID != grant || entry.Value.PrincipalKind != "anonymous" || entry.Value.PrincipalID != "" {
		t.Errorf("entry = %+v", entry.Value)
	}
	wantData(t, "passcode.admit", entry.Value.Details, map[string]any{"passcode_generation": 1, "client_ip": visitor.IP})
	if len(e.eventsSince(m, "")) != 0 {
		t.Error("an admission emitted an event")
	}

	if !e.sh.Admitted(app, a.Cookie) {
		t.Fatal("a fresh admission is refused")
	}
	if e.sh.Admitted(other, a.Cookie) {
		t.Error("an admission for one app admits to another")
	}
	e.now = e.now.Add(AdmissionTTL - time.Second)
	if !e.sh.Admitted(app, a.Cookie) {
		t.Error("an admission is refused before a day is over")
	}
	e.now = e.now.Add(time.Second)
	if e.sh.Admitted(app, a.Cookie) {
		t.Error("an admission a day old is accepted")
	}

	// A new passcode is a new generation: earlier admissions end.
	a = e.enter(t, app, firstCode)
	_, err := e.sh.UpdateGrant(bg, e.adminCaller(), app, grant, GrantPatch{Passcode: ptr(secondCode)})
	must(t, "new passcode", err)
	if g := e.getGrant(t, grant); g.PasscodeGeneration != 2 {
		t.Errorf("generation %d after a new passcode, want 2", g.PasscodeGeneration)
	}
	if e.sh.Admitted(app, a.Cookie) {
		t.Error("an admission of the old passcode is accepted")
	}
	_, err = e.sh.EnterPasscode(bg, app, firstCode, visitor)
	wantCode(t, "the old passcode", err, errcode.PermPasscodeRequired)
	a2 := e.enter(t, app, secondCode)
	if !e.sh.Admitted(app, a2.Cookie) {
		t.Error("an admission of the new passcode is refused")
	}

	// The same passcode again is a new generation too.
	_, err = e.sh.UpdateGrant(bg, e.adminCaller(), app, grant, GrantPatch{Passcode: ptr(secondCode)})
	must(t, "same passcode again", err)
	if e.sh.Admitted(app, a2.Cookie) {
		t.Error("an admission survives the passcode being set again")
	}

	// Removed: the app is open to everyone, no admission is needed nor
	// accepted, and the passcode page is gone; set again, the generation
	// goes on from where it was.
	a3 := e.enter(t, app, secondCode)
	m = e.mark()
	_, err = e.sh.UpdateGrant(bg, e.adminCaller(), app, grant, GrantPatch{Passcode: ptr("")})
	must(t, "remove the passcode", err)
	wantData(t, "grant.update", e.oneAudit(t, m, "grant.update").Value.Details, map[string]any{"passcode": "removed"})
	g = e.getGrant(t, grant)
	if g.Passcode || g.PasscodeHash != "" || len(g.PasscodeKey) != 0 || g.PasscodeGeneration != 3 {
		t.Errorf("after removal: passcode %v, hash %q, key %d bytes, generation %d", g.Passcode, g.PasscodeHash, len(g.PasscodeKey), g.PasscodeGeneration)
	}
	if e.sh.Admitted(app, a3.Cookie) {
		t.Error("an admission is accepted after the passcode was removed")
	}
	if !CanOpen(e.store.Read(), app, authz.Principal{Kind: authz.KindAnonymous}) {
		t.Error("the app without a passcode is not open to everyone")
	}
	if _, err := e.sh.PasscodeApp(app); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("the passcode page of an app without one: %v", err)
	}
	_, err = e.sh.UpdateGrant(bg, e.adminCaller(), app, grant, GrantPatch{Passcode: ptr(firstCode)})
	must(t, "set again", err)
	if g := e.getGrant(t, grant); g.PasscodeGeneration != 4 {
		t.Errorf("generation %d, want 4 (never reused)", g.PasscodeGeneration)
	}
	if e.sh.Admitted(app, a3.Cookie) || e.sh.Admitted(app, a2.Cookie) {
		t.Error("an old admission is accepted after the passcode came back")
	}

	// Deleted: nothing admits.
	a4 := e.enter(t, app, firstCode)
	must(t, "delete the grant", e.sh.DeleteGrant(bg, e.adminCaller(), app, grant))
	if e.sh.Admitted(app, a4.Cookie) {
		t.Error("an admission is accepted after the grant was deleted")
	}
}

func TestPasscodePolicy(t *testing.T) {
	e := newShareEnv(t)
	app, grant := e.passcodeApp(t, "Policed", firstCode)
	a := e.enter(t, app, firstCode)

	e.policy(func(p *policy.Policy) { p.PublicSharing = policy.SharingPasscodeOnly })
	if !e.sh.Admitted(app, a.Cookie) {
		t.Error("passcode_only refuses a passcode admission")
	}
	_, err := e.sh.UpdateGrant(bg, e.adminCaller(), app, grant, GrantPatch{Passcode: ptr("")})
	if ce := wantCode(t, "remove the passcode under passcode_only", err, errcode.PolicyAnonymousGrant); ce != nil && !strings.Contains(ce.Message, "passcode") {
		t.Errorf("message %q", ce.Message)
	}
	_, err = e.sh.UpdateGrant(bg, e.adminCaller(), app, grant, GrantPatch{Passcode: ptr(secondCode)})
	must(t, "a new passcode under passcode_only", err)
	a = e.enter(t, app, secondCode)

	// Under none, nobody gets in by passcode, and nothing asks for one.
	e.policy(func(p *policy.Policy) { p.PublicSharing = policy.SharingNone })
	if e.sh.Admitted(app, a.Cookie) {
		t.Error("public_sharing none admits by passcode")
	}
	if _, err := e.sh.PasscodeApp(app); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("passcode page under none: %v", err)
	}
	_, err = e.sh.EnterPasscode(bg, app, secondCode, visitor)
	wantCode(t, "enter under none", err, errcode.NotFound)
	_, err = e.sh.UpdateGrant(bg, e.adminCaller(), app, grant, GrantPatch{Passcode: ptr(firstCode)})
	wantCode(t, "a new passcode under none", err, errcode.PolicyAnonymousGrant)
	must(t, "delete under none", e.sh.DeleteGrant(bg, e.adminCaller(), app, grant))
}

func TestPasscodeAppAnswersOnlyForPasscodeApps(t *testing.T) {
	e := newShareEnv(t)
	app, _ := e.passcodeApp(t, "Secret Garden", firstCode)
	name, err := e.sh.PasscodeApp(app)
	if err != nil || name != "Secret Garden" {
		t.Errorf("name = %q, %v", name, err)
	}
	open := e.app(t, "Open", e.admin.ID)
	e.create(t, e.adminCaller(), open, NewGrant{Plane: PlaneData, PrincipalKind: authz.KindAnonymous})
	private := e.app(t, "Private", e.admin.ID)
	for what, id := range map[string]string{"open to everyone": open, "private": private, "unknown": ids.New(ids.App), "malformed": "nope", "empty": ""} {
		_, err := e.sh.PasscodeApp(id)
		if ce := wantCode(t, what, err, errcode.NotFound); ce != nil && ce.Message != noPasscode(id).Message {
			t.Errorf("%s: message %q differs from the others'", what, ce.Message)
		}
		_, err = e.sh.EnterPasscode(bg, id, firstCode, visitor)
		wantCode(t, what+": enter", err, errcode.NotFound)
	}
	for _, bad := range []string{"", strings.Repeat("x", PasscodeMaxLen+1), strings.Repeat("é", 300)} {
		_, err := e.sh.EnterPasscode(bg, app, bad, visitor)
		if ce := wantCode(t, "enter a malformed passcode", err, errcode.ValidInvalid); ce != nil && ce.Details["field"] != "passcode" {
			t.Errorf("details = %v", ce.Details)
		}
	}
}

func TestPasscodeRateLimits(t *testing.T) {
	e := newShareEnv(t)
	app, _ := e.passcodeApp(t, "Limited", firstCode)
	other, _ := e.passcodeApp(t, "Elsewhere", firstCode)
	m := e.mark()
	for i := range 10 {
		_, err := e.sh.EnterPasscode(bg, app, "wrong-guess-"+strconv.Itoa(i), visitor)
		wantCode(t, "a wrong guess", err, errcode.PermPasscodeRequired)
	}
	if got := e.auditSince(m, ""); len(got) != 0 {
		t.Errorf("wrong guesses wrote %d audit entries", len(got))
	}
	_, err := e.sh.EnterPasscode(bg, app, "eleventh-guess", visitor)
	ce := wantCode(t, "the eleventh try", err, errcode.RateLimited)
	if ce == nil || ce.RetryAfter < 1 || ce.RetryAfter > 900 {
		t.Fatalf("retry after %v", ce)
	}
	verifies := e.hasher.verify.Load()
	_, err = e.sh.EnterPasscode(bg, app, firstCode, visitor)
	wantCode(t, "the right passcode while limited", err, errcode.RateLimited)
	if e.hasher.verify.Load() != verifies {
		t.Error("a limited try was checked")
	}
	// Another address, and the same address on another app, go on.
	if _, err := e.sh.EnterPasscode(bg, app, firstCode, Client{IP: "198.51.100.8"}); err != nil {
		t.Errorf("another address: %v", err)
	}
	if _, err := e.sh.EnterPasscode(bg, other, firstCode, visitor); err != nil {
		t.Errorf("another app from the limited address: %v", err)
	}
	// The wait ends with the window.
	e.now = e.now.Add(15*time.Minute + time.Second)
	if _, err := e.sh.EnterPasscode(bg, app, firstCode, visitor); err != nil {
		t.Errorf("after fifteen minutes: %v", err)
	}
	if e.sh.d.Logger == nil || !strings.Contains(e.logs.String(), "wrong passcode") {
		t.Error("wrong guesses are not logged")
	}
}

func TestPasscodeLimitPerApp(t *testing.T) {
	clock := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	e := newShareEnvWith(t, throttle.New(10, 15*time.Minute, now, 100), throttle.New(3, 15*time.Minute, now, 100))
	app, _ := e.passcodeApp(t, "Sprayed", firstCode)
	for i := range 3 {
		_, err := e.sh.EnterPasscode(bg, app, "wrong-guess", Client{IP: "203.0.113." + strconv.Itoa(i)})
		wantCode(t, "a guess from a new address", err, errcode.PermPasscodeRequired)
	}
	_, err := e.sh.EnterPasscode(bg, app, "wrong-guess", Client{IP: "203.0.113.99"})
	wantCode(t, "a fourth address", err, errcode.RateLimited)
}

// TestAdmissionTampering: any change to an admission cookie refuses it.
func TestAdmissionTampering(t *testing.T) {
	e := newShareEnv(t)
	app, grant := e.passcodeApp(t, "Tamper", firstCode)
	a := e.enter(t, app, firstCode)
	adm, ok := parseAdmission(a.Cookie)
	if !ok || adm.app != app || adm.grant != grant || adm.generation != 1 || adm.expires != a.ExpiresAt.Unix() {
		t.Fatalf("cookie %q parses as %+v, %v", a.Cookie, adm, ok)
	}
	if !e.sh.Admitted(app, a.Cookie) {
		t.Fatal("the admission is refused")
	}
	parts := strings.Split(a.Cookie, ".")
	mutations := map[string]string{
		"empty":            "",
		"truncated":        a.Cookie[:len(a.Cookie)-1],
		"extended":         a.Cookie + "A",
		"later expiry":     strings.Replace(a.Cookie, "."+parts[4]+".", "."+strconv.FormatInt(adm.expires+3600, 10)+".", 1),
		"older generation": strings.Join([]string{parts[0], parts[1], parts[2], "0", parts[4], parts[5]}, "."),
		"newer generation": strings.Join([]string{parts[0], parts[1], parts[2], "2", parts[4], parts[5]}, "."),
		"leading zero":     strings.Join([]string{parts[0], parts[1], parts[2], "01", parts[4], parts[5]}, "."),
		"other grant":      strings.Join([]string{parts[0], parts[1], ids.New(ids.Grant), parts[3], parts[4], parts[5]}, "."),
		"version":          strings.Join(append([]string{"v2"}, parts[1:]...), "."),
		"no MAC":           strings.Join(parts[:5], "."),
		"padded MAC":       a.Cookie + "=",
		"zero MAC":         strings.Join(append(parts[:5:5], base64.RawURLEncoding.EncodeToString(make([]byte, 32))), "."),
	}
	for i := range len(parts[5]) {
		b := []byte(parts[5])
		b[i] = map[bool]byte{true: 'B', false: 'A'}[b[i] == 'A']
		mutations["MAC byte "+strconv.Itoa(i)] = strings.Join(parts[:5], ".") + "." + string(b)
	}
	for name, c := range mutations {
		if e.sh.Admitted(app, c) {
			t.Errorf("%s: %q admits", name, c)
		}
	}
	// A MAC made with another generation's key does not verify.
	other := admission{app: app, grant: grant, generation: 1, expires: adm.expires}
	if e.sh.Admitted(app, other.sign(newKey())) {
		t.Error("a cookie signed with another key admits")
	}
}

// TestAdmissionChecksAreCheap: checking an admission costs a constant-time
// MAC comparison and no Argon2; entering a passcode verifies the stored
// hash (in constant time, in the password package) and hashes nothing.
func TestAdmissionChecksAreCheap(t *testing.T) {
	e := newShareEnv(t)
	app, _ := e.passcodeApp(t, "Fast", firstCode)
	e.hasher.reset()
	a := e.enter(t, app, firstCode)
	if e.hasher.verify.Load() != 1 || e.hasher.hash.Load() != 0 || e.hasher.dummy.Load() != 0 {
		t.Errorf("entering a passcode: %d verifications, %d hashes", e.hasher.verify.Load(), e.hasher.hash.Load())
	}
	var compared atomic.Int64
	orig := macEqual
	macEqual = func(a, b []byte) bool { compared.Add(1); return orig(a, b) }
	t.Cleanup(func() { macEqual = orig })
	e.hasher.reset()
	for range 100 {
		if !e.sh.Admitted(app, a.Cookie) {
			t.Fatal("refused")
		}
	}
	if e.hasher.verify.Load()+e.hasher.hash.Load()+e.hasher.dummy.Load() != 0 {
		t.Error("checking admissions used the password hasher")
	}
	if compared.Load() != 100 {
		t.Errorf("%d constant-time comparisons for 100 checks", compared.Load())
	}
}

// TestAdmissionKeysSurviveRotation: after a keyring rotation re-seals them,
// admissions made before still admit.
func TestAdmissionKeysSurviveRotation(t *testing.T) {
	e := newShareEnv(t)
	app, grant := e.passcodeApp(t, "Rotated", firstCode)
	a := e.enter(t, app, firstCode)
	before := e.getGrant(t, grant).PasscodeKey
	e.ring.OnRotate(e.sh)
	rot, err := e.ring.Rotate(bg)
	must(t, "rotate", err)
	if rot.Resealed != 1 {
		t.Errorf("re-sealed %d, want 1", rot.Resealed)
	}
	after := e.getGrant(t, grant).PasscodeKey
	if string(before) == string(after) {
		t.Error("the key was not re-sealed")
	}
	fresh := NewSharing(e.sh.d) // no opened key cached
	if !fresh.Admitted(app, a.Cookie) {
		t.Error("an admission made before the rotation is refused")
	}
}

// TestPasscodeNeverLeaks: passcodes appear nowhere but as hashes: not in
// the store's rows (other than the hash), audit entries, events or the log.
func TestPasscodeNeverLeaks(t *testing.T) {
	e := newShareEnv(t)
	app, grant := e.passcodeApp(t, "Quiet", firstCode)
	_, err := e.sh.UpdateGrant(bg, e.adminCaller(), app, grant, GrantPatch{Passcode: ptr(secondCode)})
	must(t, "new passcode", err)
	e.enter(t, app, secondCode)
	_, _ = e.sh.EnterPasscode(bg, app, firstCode, visitor)
	info, _ := json.Marshal(e.getGrant(t, grant).Info())
	dump := e.dump(t) + e.logs.String() + string(info)
	for _, code := range []string{firstCode, secondCode} {
		for _, form := range []string{code, base64.StdEncoding.EncodeToString([]byte(code)), base64.RawURLEncoding.EncodeToString([]byte(code))} {
			if strings.Contains(dump, form) {
				t.Errorf("the passcode %q is in the store, the log or the API's grant", code)
			}
		}
	}
	if strings.Contains(string(info), "hash") || strings.Contains(string(info), "key") {
		t.Errorf("the API's grant shows secrets: %s", info)
	}
}

func FuzzAdmissionCookie(f *testing.F) {
	key := []byte("0123456789abcdef0123456789abcdef")
	// Fixed, so that every fuzzing worker signs the same cookie.
	good := admission{app: "app_01M80000000000000000000000", grant: "gr_01M80000000000000000000001", generation: 3, expires: 1_800_000_000}
	signed := good.sign(key)
	for _, s := range []string{signed, "", ".....", "v1.....", signed + ".", strings.ToLower(signed), "v1.app_.gr_.1.1.", strings.Repeat("v1.", 100),
		strings.Replace(signed, ".3.", ".03.", 1), strings.Replace(signed, ".3.", ".-3.", 1), strings.Replace(signed, ".3.", ".18446744073709551616.", 1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseAdmission(s)
		if !ok {
			if a.app != "" || a.mac != nil {
				t.Fatalf("refused %q but returned %+v", s, a)
			}
			return
		}
		if len(s) > maxAdmissionLen || !ids.Valid(ids.App, a.app) || !ids.Valid(ids.Grant, a.grant) || a.generation == 0 || a.expires <= 0 || len(a.mac) != 32 {
			t.Fatalf("accepted %q as %+v", s, a)
		}
		// Canonical: what is accepted is exactly what signing makes.
		if back := a.body() + "." + base64.RawURLEncoding.EncodeToString(a.mac); back != s {
			t.Fatalf("%q parses but formats back as %q", s, back)
		}
		// Only the cookie signed verifies under the key.
		if macEqual(a.mac, admissionMAC(key, a.body())) != (s == signed) {
			t.Fatalf("%q verifies under the key: %v", s, s != signed)
		}
	})
}
