package identity

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// App sessions: how a browser is admitted to one app on the app's own
// origin, where the console's session cookie never goes (and, when it
// does, the edge ignores it).
//
// The handoff (the edge drives it, see the edge package): a browser without
// an app cookie asking for an app page is sent to the console's handoff
// endpoint with a state it also keeps in a cookie on the app's origin.
// There, a signed-in console session (or, for an app shared with everyone
// behind a passcode, a valid admission) gets a single-use code
// (BeginAppSession): a row of this table, pending, bound to the app, to
// that session or admission, and to the state, redeemable for
// HandoffCodeTTL. The browser carries the code back to the app's origin,
// where the edge redeems it (RedeemAppSession): only with the state's
// cookie, once (the row moves from pending to redeemed under a
// precondition, and the FSM refuses any later change), on any node (the
// row is replicated; a node that has not seen it yet reads consistently).
// Redemption answers the app cookie, "<aps_ID>.<secret>", whose secret is
// new: the code travelled in a URL, the cookie never does. Only SHA-256
// hashes of the code, the state and the cookie secret are stored.
//
// An app cookie authenticates (AuthenticateApp) as long as what it is bound
// to lives: the console session (not signed out, not expired, its account
// active: a password change, a suspension or a sign-out ends it at once),
// or the admission (the grant to everyone still asks for the same
// passcode generation, host policy still allows it, and it has not
// expired). ExpireAppSessions, a leader loop, removes the rows that can no
// longer authenticate.

// HandoffCodeTTL is how long a handoff code can be redeemed.
const HandoffCodeTTL = 60 * time.Second

// handoffStateIDLen is the length of a handoff state's ID (12 random bytes
// in base64url): it names the state's cookie.
const handoffStateIDLen = 16

// AppSession is one browser's admission to one app (see above).
type AppSession struct {
	ID    string `json:"id"`
	AppID string `json:"app_id"`
	// SessionID (a console session, of UserID), Admission, or both (a
	// person signed in who opens an app by its passcode) is set.
	SessionID string        `json:"session_id,omitempty"`
	UserID    string        `json:"user_id,omitempty"`
	Admission *AdmissionRef `json:"admission,omitempty"`
	// StateID names the handoff state, StateHash is its secret's hash.
	StateID   string `json:"state_id"`
	StateHash []byte `json:"state_hash"`
	// CodeHash is the code's hash while the row is pending; SecretHash the
	// cookie secret's once redeemed.
	CodeHash      []byte     `json:"code_hash,omitempty"`
	CodeExpiresAt time.Time  `json:"code_expires_at"`
	SecretHash    []byte     `json:"secret_hash,omitempty"`
	RedeemedAt    *time.Time `json:"redeemed_at,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	// ExpiresAt bounds the app cookie: the console session's longest life,
	// or the admission's expiry.
	ExpiresAt time.Time `json:"expires_at"`
}

// AdmissionRef names an admission by passcode: the grant to everyone, the
// passcode generation it was given for, and its expiry.
type AdmissionRef struct {
	GrantID    string    `json:"grant_id"`
	Generation uint64    `json:"generation"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// AppSessions is the table of app sessions.
var AppSessions = &raftstore.Table[AppSession]{
	Name: "app_sessions",
	ID:   func(a *AppSession) string { return a.ID },
	Indexes: []raftstore.Index[AppSession]{
		{Name: "session", Key: func(a *AppSession) (string, bool) { return a.SessionID, a.SessionID != "" }},
	},
	Validate: validateAppSession,
}

// validateAppSession keeps the rows honest on every node: a new row is a
// pending code with one binding; the one change allowed is its redemption
// (a cookie secret in, the code out); a redeemed row never changes again.
func validateAppSession(_ *raftstore.Reader, old, a *AppSession) error {
	invalid := func(msg string) error { return errcode.New(errcode.ValidInvalid, "app session: %s", msg) }
	switch {
	case a == nil:
		return nil
	case !ids.Valid(ids.AppSession, a.ID) || !ids.Valid(ids.App, a.AppID):
		return invalid("an app session needs its aps_ ID and an app")
	case a.SessionID == "" && a.Admission == nil:
		return invalid("an app session is bound to a console session, to an admission, or to both")
	case a.SessionID != "" && (!ids.Valid(ids.Session, a.SessionID) || !ids.Valid(ids.User, a.UserID)):
		return invalid("a session-bound app session names its session and account")
	case a.Admission != nil && (!ids.Valid(ids.Grant, a.Admission.GrantID) || a.Admission.Generation == 0):
		return invalid("an admission-bound app session names its grant and passcode generation")
	case len(a.StateID) != handoffStateIDLen || len(a.StateHash) != sha256.Size:
		return invalid("an app session carries its handoff state")
	case old == nil && (a.RedeemedAt != nil || len(a.SecretHash) != 0 || len(a.CodeHash) != sha256.Size):
		return invalid("a new app session is a pending code")
	case old != nil && old.RedeemedAt != nil:
		return errcode.New(errcode.StateInvalid, "app session %s was redeemed; it never changes again", a.ID)
	case old != nil && (a.RedeemedAt == nil || len(a.SecretHash) != sha256.Size || len(a.CodeHash) != 0 ||
		a.AppID != old.AppID || a.SessionID != old.SessionID || a.StateID != old.StateID || !bytes.Equal(a.StateHash, old.StateHash)):
		return invalid("the only change of an app session is its redemption")
	}
	return nil
}

// HandoffState is the state a browser keeps for a handoff: ID names the
// cookie that holds Secret on the app's origin.
type HandoffState struct {
	ID, Secret string
}

// NewHandoffState draws a fresh handoff state.
func NewHandoffState() HandoffState {
	return HandoffState{ID: randomB64(12), Secret: randomB64(32)}
}

// String is the state as the handoff URL carries it: "<ID>.<Secret>".
func (h HandoffState) String() string { return h.ID + "." + h.Secret }

// ParseHandoffState reads a state as String writes it, strictly.
func ParseHandoffState(s string) (HandoffState, bool) {
	id, secret, ok := strings.Cut(s, ".")
	if !ok || len(id) != handoffStateIDLen || len(secret) != 43 || !isB64URL(id) || !isB64URL(secret) {
		return HandoffState{}, false
	}
	return HandoffState{ID: id, Secret: secret}, true
}

func randomB64(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("identity: crypto/rand: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func isB64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func hashOf(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// NewAppSession says what a handoff code is for: the app, the browser's
// handoff state, and what admits the browser: a console session (by ID:
// the caller authenticated it), an admission, or both (a person signed in
// who is let in by the app's passcode).
type NewAppSession struct {
	AppID     string
	State     HandoffState
	SessionID string
	Admission *AdmissionRef
}

// BeginAppSession mints a handoff code: a pending app session, redeemable
// once within HandoffCodeTTL by a browser holding the state's cookie. The
// session or admission it is bound to must be alive now.
func (s *Service) BeginAppSession(ctx context.Context, n NewAppSession) (string, error) {
	if !ids.Valid(ids.App, n.AppID) || len(n.State.ID) != handoffStateIDLen || n.State.Secret == "" || (n.SessionID == "" && n.Admission == nil) {
		return "", errcode.New(errcode.ValidInvalid, "a handoff names an app, a state, and a session or an admission")
	}
	now := s.now()
	r := s.d.Store.Read()
	id, code, codeHash := newSecret(ids.AppSession)
	a := AppSession{ID: id, AppID: n.AppID, StateID: n.State.ID, StateHash: hashOf(n.State.Secret), CodeHash: codeHash,
		CodeExpiresAt: now.Add(HandoffCodeTTL), CreatedAt: now}
	if n.Admission != nil {
		if !admissionLive(r, s.d.Policy, n.AppID, *n.Admission, now) {
			return "", errcode.New(errcode.PermPasscodeRequired, "the admission has ended; enter the passcode again")
		}
		ref := *n.Admission
		a.Admission, a.ExpiresAt = &ref, ref.ExpiresAt
	}
	if n.SessionID != "" {
		sess, _, _, ok := s.liveSession(r, n.SessionID, now)
		if !ok {
			return "", errcode.New(errcode.AuthRequired, "the session has ended; sign in again")
		}
		// A person's app cookie lasts as long as their session can.
		a.SessionID, a.UserID, a.ExpiresAt = sess.ID, sess.UserID, sess.CreatedAt.Add(SessionMax)
	}
	_, err := s.d.Store.Update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) {
		return []raftstore.Op{AppSessions.Insert(&a)}, nil
	})
	if err != nil {
		return "", fmt.Errorf("begin an app session: %w", err)
	}
	return code, nil
}

// AppCookie is what a redeemed handoff gives: the app cookie's value and
// expiry, and the state whose cookie has served.
type AppCookie struct {
	Value     string
	ExpiresAt time.Time
	StateID   string
}

// badHandoff is the one answer to every refused redemption.
func badHandoff() *errcode.Error {
	return errcode.New(errcode.AuthInvalid, "this sign-in link is not valid: it expired, was used already, or was made for another app or another browser").
		WithRemedy("open the app's address again")
}

// RedeemAppSession redeems a handoff code for the app: the code must be
// pending, unexpired, made for this app, presented by the browser that
// holds the state (stateSecret returns the secret of the state cookie the
// request carries under a state's ID, "" when none), and what it is bound
// to must still be alive. It answers the app cookie, once.
func (s *Service) RedeemAppSession(ctx context.Context, appID, code string, stateSecret func(stateID string) string) (AppCookie, error) {
	id, secret, ok := splitCredential(ids.AppSession, code)
	if !ok {
		return AppCookie{}, badHandoff()
	}
	// A code minted on another node a moment ago: this node's view holds
	// it once appSession has looked.
	s.appSession(ctx, id)
	now := s.now()
	_, cookie, secretHash := newSecret(ids.AppSession)
	_, cookieSecret, _ := strings.Cut(cookie, ".")
	var a AppSession
	reason := ""
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		var meta raftstore.Meta
		var found bool
		a, meta, found = AppSessions.Get(r, id)
		// Another request that redeemed it first, or the sweep that
		// removed it, makes it used or unknown.
		if reason = s.unredeemable(r, a, found, appID, secret, stateSecret, now); reason != "" {
			return nil, nil
		}
		redeemed := a
		redeemed.CodeHash, redeemed.SecretHash, redeemed.RedeemedAt = nil, secretHash, &now
		return []raftstore.Op{AppSessions.PutIf(&redeemed, meta.ModifyIndex)}, nil
	})
	if err != nil {
		return AppCookie{}, fmt.Errorf("redeem an app session: %w", err)
	}
	if reason != "" {
		s.d.Logger.Debug("handoff refused", "app_id", appID, "app_session_id", id, "reason", reason)
		return AppCookie{}, badHandoff()
	}
	return AppCookie{Value: a.ID + "." + cookieSecret, ExpiresAt: a.ExpiresAt, StateID: a.StateID}, nil
}

// unredeemable says why an app session's code cannot be redeemed for the
// app now ("" when it can).
func (s *Service) unredeemable(r *raftstore.Reader, a AppSession, found bool, appID, secret string, stateSecret func(string) string, now time.Time) string {
	switch {
	case !found:
		return "unknown"
	case a.RedeemedAt != nil || len(a.CodeHash) == 0:
		return "used"
	case !secretMatches(secret, a.CodeHash):
		return "forged"
	case !now.Before(a.CodeExpiresAt):
		return "expired"
	case a.AppID != appID:
		return "another_app"
	case !secretMatches(stateSecret(a.StateID), a.StateHash):
		return "another_browser"
	case !s.bindingAlive(r, &a, now):
		return "ended"
	}
	return ""
}

// AppAuth is what an app cookie authenticates: a person (through their
// console session), a browser admitted by passcode (the anonymous
// principal), or a person admitted by passcode; Admitted says the
// admission still holds.
type AppAuth struct {
	Authenticated
	Admitted bool
}

// AuthenticateApp resolves an app cookie for the app: redeemed, made for
// this app, with its secret, and bound to what still lives. Anything else
// is AUTH_REQUIRED.
func (s *Service) AuthenticateApp(ctx context.Context, appID, cookie string) (AppAuth, error) {
	ended := errcode.New(errcode.AuthRequired, "the app's sign-in has ended").WithRemedy("open the app's address again")
	id, secret, ok := splitCredential(ids.AppSession, cookie)
	if !ok {
		return AppAuth{}, ended
	}
	a, _, r, found := s.appSession(ctx, id)
	now := s.now()
	if !found || a.RedeemedAt == nil || a.AppID != appID || !secretMatches(secret, a.SecretHash) || !now.Before(a.ExpiresAt) {
		return AppAuth{}, ended
	}
	admitted := a.Admission != nil && admissionLive(r, s.d.Policy, a.AppID, *a.Admission, now)
	if a.SessionID == "" {
		if !admitted {
			return AppAuth{}, ended
		}
		return AppAuth{Authenticated: Authenticated{Principal: authz.Principal{Kind: authz.KindAnonymous}}, Admitted: true}, nil
	}
	sess, _, u, ok := s.liveSession(r, a.SessionID, now)
	if !ok {
		return AppAuth{}, ended
	}
	if now.Sub(sess.RefreshedAt) >= sessionRefresh {
		// Using an app is using the session it came from.
		s.refreshSession(sess.ID, now)
	}
	return AppAuth{Authenticated: Authenticated{
		Principal: authz.Principal{Kind: authz.KindUser, ID: u.ID, UserID: u.ID},
		User:      &u, SessionID: sess.ID,
	}, Admitted: admitted}, nil
}

// appSession reads an app session. A row this node has not seen yet may
// have been written on another node a moment ago (a code minted there, a
// cookie redeemed there): for an ID minted in the last half minute, a miss
// is read again consistently, once.
func (s *Service) appSession(ctx context.Context, id string) (AppSession, raftstore.Meta, *raftstore.Reader, bool) {
	r := s.d.Store.Read()
	a, meta, ok := AppSessions.Get(r, id)
	if ok {
		return a, meta, r, true
	}
	if minted, tok := ids.Time(id); !tok || s.now().Sub(minted) > 30*time.Second || minted.After(s.now().Add(5*time.Second)) {
		return a, meta, r, false
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cr, err := s.d.Store.ConsistentRead(cctx)
	if err != nil {
		return a, meta, r, false
	}
	a, meta, ok = AppSessions.Get(cr, id)
	return a, meta, cr, ok
}

// bindingAlive says whether what an app session is bound to still lives:
// its session when it has one (an admission beside it may end and leave
// the person signed in), else its admission.
func (s *Service) bindingAlive(r *raftstore.Reader, a *AppSession, now time.Time) bool {
	if a.SessionID != "" {
		_, _, _, ok := s.liveSession(r, a.SessionID, now)
		return ok
	}
	return admissionLive(r, s.d.Policy, a.AppID, *a.Admission, now)
}

// ExpireAppSessions deletes the app sessions that can no longer
// authenticate: codes never redeemed in time, cookies past their expiry,
// and those whose session or admission has ended. A leader loop.
func (s *Service) ExpireAppSessions(ctx context.Context) error {
	now := s.now()
	r := s.d.Store.Read()
	dead := func(a *AppSession) bool {
		return (a.RedeemedAt == nil && !now.Before(a.CodeExpiresAt)) || !now.Before(a.ExpiresAt) || !s.bindingAlive(r, a, now)
	}
	if _, err := AppSessions.Sweep(ctx, s.d.Store, raftstore.Query{}, dead, 500); err != nil {
		return fmt.Errorf("expire app sessions: %w", err)
	}
	return nil
}
