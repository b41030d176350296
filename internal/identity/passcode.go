package identity

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/clientip"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/raftstore"
)

// The passcode of the grant to everyone, and the admissions it gives.
//
// A passcode is stored as an Argon2id hash on the grant, with a generation
// number (one more at every new passcode; never reused) and a random key,
// sealed by the keyring, that admission cookies of that generation are
// signed with. A correct passcode answers an admission cookie:
//
//	v1.<app ID>.<grant ID>.<generation>.<expiry, Unix seconds>.<MAC>
//
// where MAC is the unpadded base64url HMAC-SHA256, under the generation's
// key, of everything before the last dot. Checking a cookie (Admitted)
// costs a MAC and one read of the grant, never an Argon2 hash; a new
// passcode (a new generation and key) or the grant's removal ends every
// admission given before.

// Passcode rules, in characters.
const (
	PasscodeMinLen = 6
	PasscodeMaxLen = 128
)

// AdmissionTTL is how long a correct passcode admits a browser.
const AdmissionTTL = 24 * time.Hour

// maxAdmissionLen bounds the length of an admission cookie read: the
// longest one made is about 130 bytes.
const maxAdmissionLen = 256

// checkPasscode applies the rules to a passcode being set.
func checkPasscode(p string) error {
	if len(p) > 4*PasscodeMaxLen || !utf8.ValidString(p) || strings.IndexFunc(p, unicode.IsControl) >= 0 ||
		utf8.RuneCountInString(p) < PasscodeMinLen || utf8.RuneCountInString(p) > PasscodeMaxLen || strings.TrimSpace(p) == "" {
		return errcode.Invalid("passcode", "a passcode is %d to %d characters, not only spaces, without control characters", PasscodeMinLen, PasscodeMaxLen)
	}
	return nil
}

func keyAAD(appID, grantID string, generation uint64) []byte {
	return []byte("passcode/" + appID + "/" + grantID + "/" + strconv.FormatUint(generation, 10))
}

// setPasscode gives a grant to everyone a passcode: its hash, a new
// generation and that generation's sealed key.
func (s *Sharing) setPasscode(ctx context.Context, g *Grant, code string) error {
	hash, err := s.d.Hasher.Hash(ctx, code)
	if err != nil {
		return fmt.Errorf("hash passcode: %w", err)
	}
	if err := s.sealNewKey(ctx, g, newKey()); err != nil {
		return err
	}
	g.Passcode, g.PasscodeHash = true, hash
	return nil
}

// sealNewKey moves a grant to the next passcode generation, whose key is
// key.
func (s *Sharing) sealNewKey(ctx context.Context, g *Grant, key []byte) error {
	g.PasscodeGeneration++
	sealed, err := s.d.Ring.Seal(ctx, key, keyAAD(g.AppID, g.ID, g.PasscodeGeneration))
	if err != nil {
		return fmt.Errorf("seal the admission key: %w", err)
	}
	g.PasscodeKey = sealed
	return nil
}

// openedKey is an admission key opened, with the sealed value it came from.
type openedKey struct{ sealed, key []byte }

// admissionKey opens the key of a grant's current passcode generation.
func (s *Sharing) admissionKey(g Grant) ([]byte, error) {
	name := g.ID + "/" + strconv.FormatUint(g.PasscodeGeneration, 10)
	if v, ok := s.keys.Load(name); ok {
		if k := v.(openedKey); bytes.Equal(k.sealed, g.PasscodeKey) {
			return k.key, nil
		}
	}
	key, err := s.d.Ring.Open(g.PasscodeKey, keyAAD(g.AppID, g.ID, g.PasscodeGeneration))
	if err != nil {
		return nil, err
	}
	s.keys.Store(name, openedKey{sealed: g.PasscodeKey, key: key})
	return key, nil
}

// passcodeGrant returns the grant to everyone of an app that asks for a
// passcode, where host policy lets anyone in by one; false for any other
// app, unknown ones included.
func (s *Sharing) passcodeGrant(r *raftstore.Reader, appID string) (Grant, bool) {
	if !ids.Valid(ids.App, appID) || s.d.Policy.Current().EffectivePublicSharing() == policy.SharingNone {
		return Grant{}, false
	}
	if _, ok := s.d.Apps.FindApp(r, appID); !ok {
		return Grant{}, false
	}
	for _, g := range appGrants(r, appID) {
		if g.Plane == PlaneData && g.PrincipalKind == authz.KindAnonymous && g.Passcode && g.PasscodeHash != "" {
			return g, true
		}
	}
	return Grant{}, false
}

func noPasscode(appID string) *errcode.Error {
	return errcode.New(errcode.NotFound, "no app %s asks for a passcode", appID)
}

// PasscodeApp returns the name of an app that asks for a passcode, for its
// passcode page; NOT_FOUND for any other app, unknown ones included.
func (s *Sharing) PasscodeApp(appID string) (string, error) {
	r := s.d.Store.Read()
	if _, ok := s.passcodeGrant(r, appID); !ok {
		return "", noPasscode(appID)
	}
	app, _ := s.d.Apps.FindApp(r, appID)
	return app.Name, nil
}

// Admission is what a correct passcode gives: the cookie that admits the
// browser, until ExpiresAt.
type Admission struct {
	Cookie    string
	ExpiresAt time.Time
}

// EnterPasscode checks a passcode entered for an app. Correct: an
// admission for AdmissionTTL, audited once (passcode.admit). Wrong:
// PERM_PASSCODE_REQUIRED, counted per app and client address and per app
// (an address that entered the right passcode recently is exempt from the
// latter). The try is reserved before the passcode is checked: once the
// wrong tries and the tries in flight reach a limit, the caller waits
// (RATE_LIMITED, with the wait), the right passcode included, and nothing
// is checked. Wrong tries are logged, not audited.
func (s *Sharing) EnterPasscode(ctx context.Context, appID, code string, c Client) (Admission, error) {
	if code == "" {
		return Admission{}, errcode.Invalid("passcode", "passcode is required")
	}
	if len(code) > 4*PasscodeMaxLen || utf8.RuneCountInString(code) > PasscodeMaxLen {
		return Admission{}, errcode.Invalid("passcode", "a passcode is at most %d characters", PasscodeMaxLen)
	}
	r := s.d.Store.Read()
	g, ok := s.passcodeGrant(r, appID)
	if !ok {
		return Admission{}, noPasscode(appID)
	}
	clientKey := "passcode:" + appID + "\x00client:" + clientip.Key(c.IP)
	limits := []limit{{s.d.ClientLimit, clientKey}}
	if !s.d.KnownClients.Has(clientKey) {
		limits = append(limits, limit{s.d.AppLimit, "passcode:" + appID})
	}
	try, err := reserve("too many wrong passcodes; wait before trying again", limits...)
	if err != nil {
		return Admission{}, err
	}
	good, _, err := s.d.Hasher.Verify(ctx, g.PasscodeHash, code)
	if err != nil {
		try.release()
		return Admission{}, fmt.Errorf("verify the passcode of grant %s: %w", g.ID, err)
	}
	if !good {
		try.failed()
		s.d.Logger.Info("wrong passcode", "app_id", appID, "grant_id", g.ID, "client_ip", c.IP)
		return Admission{}, errcode.New(errcode.PermPasscodeRequired, "wrong passcode")
	}
	try.release()
	s.d.ClientLimit.Reset(clientKey)
	s.d.KnownClients.Add(clientKey)
	key, err := s.admissionKey(g)
	if err != nil {
		return Admission{}, err
	}
	now := s.now()
	exp := now.Add(AdmissionTTL).Truncate(time.Second)
	a := admission{app: appID, grant: g.ID, generation: g.PasscodeGeneration, expires: exp.Unix()}
	cookie := a.sign(key)
	_, err = s.d.Store.Update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) {
		return []raftstore.Op{audit.Record(ctx, now, "passcode.admit", appID, audit.Target{Kind: "grant", ID: g.ID},
			map[string]any{"passcode_generation": g.PasscodeGeneration, "client_ip": c.IP, "expires_at": exp})}, nil
	})
	if err != nil {
		return Admission{}, err
	}
	return Admission{Cookie: cookie, ExpiresAt: exp}, nil
}

// Admitted says whether an admission cookie admits its bearer to the app
// now: well formed, made for this app, not expired, of the current
// passcode generation of the app's grant to everyone (which host policy
// still allows), and signed with that generation's key. It implements the
// edge's Passcodes.
func (s *Sharing) Admitted(appID, cookie string) bool {
	_, ok := s.Admission(appID, cookie)
	return ok
}

// Admission checks an admission cookie as Admitted does and, when it
// admits its bearer now, names the admission (for a handoff to carry it
// to the app's origin).
func (s *Sharing) Admission(appID, cookie string) (AdmissionRef, bool) {
	a, ok := parseAdmission(cookie)
	if !ok || a.app != appID {
		return AdmissionRef{}, false
	}
	now := s.now()
	if a.expires > now.Unix()+int64(AdmissionTTL/time.Second)+60 {
		return AdmissionRef{}, false
	}
	ref := AdmissionRef{GrantID: a.grant, Generation: a.generation, ExpiresAt: time.Unix(a.expires, 0).UTC()}
	r := s.d.Store.Read()
	if !admissionLive(r, s.d.Policy, appID, ref, now) {
		return AdmissionRef{}, false
	}
	g, _, _ := Grants.Get(r, a.grant)
	key, err := s.admissionKey(g)
	if err != nil {
		s.d.Logger.Error("an admission key did not open", "grant_id", g.ID, "err", err)
		return AdmissionRef{}, false
	}
	if !macEqual(a.mac, admissionMAC(key, a.body())) {
		return AdmissionRef{}, false
	}
	return ref, true
}

// admissionLive says whether an admission still admits to the app: not
// expired, of the current passcode generation of the app's grant to
// everyone, which host policy still allows.
func admissionLive(r *raftstore.Reader, pol PolicySource, appID string, ref AdmissionRef, now time.Time) bool {
	if !now.Before(ref.ExpiresAt) {
		return false
	}
	g, _, ok := Grants.Get(r, ref.GrantID)
	if !ok || g.AppID != appID || g.Plane != PlaneData || g.PrincipalKind != authz.KindAnonymous || !g.Passcode ||
		g.PasscodeGeneration != ref.Generation || len(g.PasscodeKey) == 0 {
		return false
	}
	return pol.Current().EffectivePublicSharing() != policy.SharingNone
}

// macEqual compares MACs in constant time (a variable for the test that
// checks it is the comparison used).
var macEqual = hmac.Equal

// admission is an admission cookie's statement.
type admission struct {
	app, grant string
	generation uint64
	expires    int64
	mac        []byte
}

func (a admission) body() string {
	return "v1." + a.app + "." + a.grant + "." + strconv.FormatUint(a.generation, 10) + "." + strconv.FormatInt(a.expires, 10)
}

func (a admission) sign(key []byte) string {
	return a.body() + "." + base64.RawURLEncoding.EncodeToString(admissionMAC(key, a.body()))
}

func admissionMAC(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("svc-passcode-admission\x00"))
	m.Write([]byte(body))
	return m.Sum(nil)
}

// parseAdmission reads an admission cookie strictly: every part in its one
// canonical form, so that a cookie accepted is exactly the one made.
func parseAdmission(s string) (admission, bool) {
	if len(s) > maxAdmissionLen {
		return admission{}, false
	}
	parts := strings.Split(s, ".")
	if len(parts) != 6 || parts[0] != "v1" || !ids.Valid(ids.App, parts[1]) || !ids.Valid(ids.Grant, parts[2]) {
		return admission{}, false
	}
	gen, err := strconv.ParseUint(parts[3], 10, 64)
	if err != nil || gen == 0 || strconv.FormatUint(gen, 10) != parts[3] {
		return admission{}, false
	}
	exp, err := strconv.ParseInt(parts[4], 10, 64)
	if err != nil || exp <= 0 || strconv.FormatInt(exp, 10) != parts[4] {
		return admission{}, false
	}
	// The decoder skips line breaks: only the canonical encoding is taken.
	mac, err := base64.RawURLEncoding.Strict().DecodeString(parts[5])
	if err != nil || len(mac) != sha256.Size || base64.RawURLEncoding.EncodeToString(mac) != parts[5] {
		return admission{}, false
	}
	return admission{app: parts[1], grant: parts[2], generation: gen, expires: exp, mac: mac}, true
}

// Reseal re-seals every admission key under the keyring's current data
// key, after a rotation, one grant per write. A grant deleted meanwhile is
// skipped; one changed meanwhile is re-sealed as it is then.
func (s *Sharing) Reseal(ctx context.Context) (int, error) {
	if err := s.d.Ring.Ready(ctx); err != nil {
		return 0, err
	}
	items, _ := Grants.List(s.d.Store.Read(), raftstore.Query{Filter: func(v any) bool { return len(v.(*Grant).PasscodeKey) > 0 }})
	n := 0
	for _, it := range items {
		resealed := false
		_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
			g, meta, ok := Grants.Get(r, it.Value.ID)
			if resealed = ok && len(g.PasscodeKey) > 0; !resealed {
				return nil, nil
			}
			aad := keyAAD(g.AppID, g.ID, g.PasscodeGeneration)
			key, err := s.d.Ring.Open(g.PasscodeKey, aad)
			if err != nil {
				return nil, err
			}
			if g.PasscodeKey, err = s.d.Ring.Seal(ctx, key, aad); err != nil {
				return nil, err
			}
			return []raftstore.Op{Grants.PutIf(&g, meta.ModifyIndex)}, nil
		})
		if err != nil {
			return n, fmt.Errorf("re-seal the admission key of grant %s: %w", it.Value.ID, err)
		}
		if resealed {
			n++
		}
	}
	return n, nil
}
