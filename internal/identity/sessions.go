package identity

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/password"
	"github.com/svchost/svc/raftstore"
)

// SignedIn is the outcome of a sign-in: the account and the session
// cookie's value, shown to the browser once.
type SignedIn struct {
	User      User
	Cookie    string
	ExpiresAt time.Time
}

// Client describes where a sign-in comes from.
type Client struct {
	IP        string
	UserAgent string
}

// badCredentials is the one answer to every refused sign-in (a new value
// each time: callers may add to it).
func badCredentials() *errcode.Error {
	return errcode.New(errcode.AuthInvalid, "wrong username or password")
}

// SignIn checks a username and password and opens a session. A wrong
// username, a wrong password and a suspended account answer the same
// AUTH_INVALID in the same time. The attempt is reserved before the
// password is checked (see passwordLimits): once the failures and the
// attempts in flight reach a limit, the caller waits (RATE_LIMITED, right
// password or not) and nothing is checked.
func (s *Service) SignIn(ctx context.Context, username, pw string, c Client) (SignedIn, error) {
	pair, limits := s.passwordLimits(username, c.IP)
	try, err := reserve("too many failed sign-ins; wait before trying again", limits...)
	if err != nil {
		return SignedIn{}, err
	}
	r := s.d.Store.Read()
	u, _, found := Users.First(r, "username", strings.ToLower(username))
	reason, rehashed := "", ""
	switch {
	case len(pw) > password.MaxBytes || len(username) > 64:
		// No password this long was ever accepted: refuse without hashing
		// a large input.
		s.d.Hasher.Dummy(ctx, "")
		reason = "too_long"
	case !found || u.Source != SourceLocal || u.PasswordHash == "":
		s.d.Hasher.Dummy(ctx, pw)
		reason = "unknown_account"
	default:
		ok, rehash, err := s.d.Hasher.Verify(ctx, u.PasswordHash, pw)
		switch {
		case err != nil:
			s.d.Logger.Error("stored password hash unreadable", "user_id", u.ID, "err", err)
			reason = "bad_hash"
		case !ok:
			reason = "wrong_password"
		case u.Status != StatusActive:
			reason = "suspended"
		case rehash:
			if h, err := s.d.Hasher.Hash(ctx, pw); err == nil {
				rehashed = h
			}
		}
	}
	if reason != "" {
		try.failed()
		s.recordFailure(ctx, u.ID, reason)
		return SignedIn{}, badCredentials()
	}
	try.release()
	s.passwordProved(pair)

	ctx = actor.With(ctx, actor.Actor{Kind: authz.KindUser, ID: u.ID, RequestID: actor.From(ctx).RequestID})
	in, ops := s.openSession(ctx, u, c)
	ops = append(ops, audit.Record(ctx, s.now(), "session.create", "", audit.Target{Kind: "session", ID: in.sessionID}, map[string]any{"via": "password", "client_ip": c.IP}))
	verified := u.PasswordHash
	err = s.update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		if rehashed == "" {
			return ops, nil
		}
		// A rehash with newer parameters rides along with the sign-in,
		// unless the password changed meanwhile.
		cur, meta, ok := Users.Get(r, u.ID)
		if !ok || cur.PasswordHash != verified {
			return ops, nil
		}
		cur.PasswordHash = rehashed
		return append(slices.Clip(ops), Users.PutIf(&cur, meta.ModifyIndex)), nil
	})
	if err != nil {
		return SignedIn{}, err
	}
	return in.SignedIn, nil
}

type openedSession struct {
	SignedIn
	sessionID string
}

// openSession builds a new session of u (a new ID and secret every time) and
// the ops that store it with its user.signed_in event; the caller adds the
// audit entry of the request that opened it.
func (s *Service) openSession(ctx context.Context, u User, c Client) (openedSession, []raftstore.Op) {
	now := s.now()
	id, cookie, hash := newSecret(ids.Session)
	sess := Session{
		ID: id, UserID: u.ID, SecretHash: hash, CreatedAt: now, RefreshedAt: now, ExpiresAt: now.Add(SessionIdle),
		ClientIP: c.IP, UserAgent: truncate(c.UserAgent, 256),
	}
	ops := []raftstore.Op{
		Sessions.Insert(&sess),
		events.Emit(ctx, now, "user.signed_in", nil, "session", id, map[string]any{"user_id": u.ID, "via": "password", "adapter_id": nil}),
	}
	return openedSession{SignedIn: SignedIn{User: u, Cookie: cookie, ExpiresAt: sess.ExpiresAt}, sessionID: id}, ops
}

// recordFailure writes the audit entry and event of a refused sign-in. Its
// own failure is logged, not returned: the caller answers AUTH_INVALID
// either way.
func (s *Service) recordFailure(ctx context.Context, userID, reason string) {
	now := s.now()
	target := audit.Target{}
	if userID != "" {
		target = audit.Target{Kind: "user", ID: userID}
	}
	err := s.update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) {
		return []raftstore.Op{
			audit.Record(ctx, now, "session.create_failed", "", target, map[string]any{"reason": reason}),
			events.Emit(ctx, now, "user.sign_in_failed", nil, target.Kind, target.ID, map[string]any{"reason": reason, "adapter_id": nil}),
		}, nil
	})
	if err != nil {
		s.d.Logger.Warn("could not record a refused sign-in", "err", err)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// SignOut ends the session whose cookie value is given, if the cookie is a
// valid one; anything else ends nothing.
func (s *Service) SignOut(ctx context.Context, cookie string) error {
	id, secret, ok := splitCredential(ids.Session, cookie)
	if !ok {
		return nil
	}
	return s.update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		sess, _, ok := Sessions.Get(r, id)
		if !ok || !secretMatches(secret, sess.SecretHash) {
			return nil, nil // none, or ended meanwhile
		}
		return []raftstore.Op{
			Sessions.Delete(id),
			audit.Record(ctx, s.now(), "session.delete", "", audit.Target{Kind: "session", ID: id}, nil),
		}, nil
	})
}

// sessionDeletes returns ops deleting every session of an account but keep.
func (s *Service) sessionDeletes(r *raftstore.Reader, userID, keep string) []raftstore.Op {
	items, _ := Sessions.List(r, raftstore.Query{Index: "user", Key: userID})
	var ops []raftstore.Op
	for _, it := range items {
		if it.Value.ID != keep {
			ops = append(ops, Sessions.Delete(it.Value.ID))
		}
	}
	return ops
}

// Authenticated is the outcome of authenticating a request.
type Authenticated struct {
	Principal authz.Principal
	User      *User  // the account (a user, or the creator of a delegated token)
	Token     *Token // the token, for a token principal
	SessionID string // the session, for a browser
}

// Authenticate resolves a request's credentials: a bearer token wins over
// the session cookie. No credential at all is the anonymous principal. A
// token that is unknown, revoked or expired is AUTH_TOKEN_INVALID; one whose
// creator was suspended or deleted AUTH_TOKEN_ORPHANED; a session that ended,
// expired or belongs to a suspended account AUTH_REQUIRED.
func (s *Service) Authenticate(ctx context.Context, bearer, cookie string) (Authenticated, error) {
	switch {
	case bearer != "":
		return s.authToken(ctx, bearer)
	case cookie != "":
		return s.authSession(ctx, cookie)
	}
	return Authenticated{Principal: authz.Principal{Kind: authz.KindAnonymous}}, nil
}

func (s *Service) authSession(ctx context.Context, cookie string) (Authenticated, error) {
	ended := errcode.New(errcode.AuthRequired, "the session has ended; sign in again")
	id, secret, ok := splitCredential(ids.Session, cookie)
	if !ok {
		return Authenticated{}, ended
	}
	r := s.d.Store.Read()
	now := s.now()
	sess, _, u, ok := s.liveSession(r, id, now)
	if !ok || !secretMatches(secret, sess.SecretHash) {
		return Authenticated{}, ended
	}
	if now.Sub(sess.RefreshedAt) >= sessionRefresh {
		s.refreshSession(sess.ID, now)
	}
	return Authenticated{
		Principal: authz.Principal{Kind: authz.KindUser, ID: u.ID, UserID: u.ID},
		User:      &u, SessionID: sess.ID,
	}, nil
}

// liveSession reads a session that can still authenticate: not ended, not
// expired, of an active account.
func (s *Service) liveSession(r *raftstore.Reader, id string, now time.Time) (Session, raftstore.Meta, User, bool) {
	sess, meta, ok := Sessions.Get(r, id)
	if !ok || !now.Before(sess.ExpiresAt) {
		return Session{}, meta, User{}, false
	}
	u, _, ok := Users.Get(r, sess.UserID)
	if !ok || u.Status != StatusActive {
		return Session{}, meta, User{}, false
	}
	return sess, meta, u, true
}

// refreshSession extends a session in use, in the background: a sliding
// idle limit under the absolute SessionMax. A session that ended, or was
// extended meanwhile, is left as it is.
func (s *Service) refreshSession(id string, now time.Time) {
	s.background(id, "extend a session", func(r *raftstore.Reader) ([]raftstore.Op, error) {
		sess, meta, ok := Sessions.Get(r, id)
		if !ok || now.Sub(sess.RefreshedAt) < sessionRefresh {
			return nil, nil
		}
		sess.RefreshedAt = now
		sess.ExpiresAt = minTime(now.Add(SessionIdle), sess.CreatedAt.Add(SessionMax))
		return []raftstore.Op{Sessions.PutIf(&sess, meta.ModifyIndex)}, nil
	})
}

// background makes a change once per key at a time, off the request's
// path; build drops a write made moot meanwhile by writing nothing.
func (s *Service) background(key, what string, build raftstore.Build) {
	if _, busy := s.inflight.LoadOrStore(key, true); busy {
		return
	}
	go func() {
		defer s.inflight.Delete(key)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := s.d.Store.Update(ctx, build); err != nil {
			s.d.Logger.Warn("could not "+what, "id", key, "err", err)
		}
	}()
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (s *Service) authToken(ctx context.Context, bearer string) (Authenticated, error) {
	invalid := errcode.New(errcode.AuthTokenInvalid, "the token is unknown, revoked or expired")
	id, secret, ok := splitCredential(ids.Token, bearer)
	if !ok {
		return Authenticated{}, invalid
	}
	r := s.d.Store.Read()
	t, _, ok := Tokens.Get(r, id)
	if !ok || !secretMatches(secret, t.SecretHash) {
		return Authenticated{}, invalid
	}
	now := s.now()
	if exp := Expiry(t, s.d.Policy.Current().MaxTokenLifetimeDays); exp != nil && !now.Before(*exp) {
		return Authenticated{}, invalid
	}
	a := Authenticated{Principal: authz.Principal{Kind: authz.KindToken, ID: t.ID, Agent: t.Agent}, Token: &t}
	if t.Kind == TokenDelegated {
		u, _, ok := Users.Get(r, t.OwnerID)
		if !ok || u.Status != StatusActive {
			return Authenticated{}, errcode.New(errcode.AuthTokenOrphaned, "the account that made this token is suspended or deleted")
		}
		a.Principal.UserID, a.User = u.ID, &u
	}
	if t.LastUsedAt == nil || now.Sub(*t.LastUsedAt) >= tokenTouch {
		s.touchToken(t.ID, now)
	}
	return a, nil
}

// touchToken records a token's use, at most once per tokenTouch, in the
// background. A token revoked, or whose use was recorded meanwhile, is left
// as it is.
func (s *Service) touchToken(id string, now time.Time) {
	s.background(id, "record a token's use", func(r *raftstore.Reader) ([]raftstore.Op, error) {
		t, meta, ok := Tokens.Get(r, id)
		if !ok || (t.LastUsedAt != nil && now.Sub(*t.LastUsedAt) < tokenTouch) {
			return nil, nil
		}
		t.LastUsedAt = &now
		return []raftstore.Op{Tokens.PutIf(&t, meta.ModifyIndex)}, nil
	})
}

// ExpireSessions deletes sessions past their expiry; a leader loop.
func (s *Service) ExpireSessions(ctx context.Context) error {
	now := s.now()
	if _, err := Sessions.Sweep(ctx, s.d.Store, raftstore.Query{}, func(v *Session) bool { return !now.Before(v.ExpiresAt) }, 500); err != nil {
		return fmt.Errorf("expire sessions: %w", err)
	}
	return nil
}

// PrincipalOf returns the principal an account or token ID names, as it
// would act now: an active account, or a live token (not revoked, not
// past its own expiry, not older than capDays, host policy's
// max_token_lifetime_days, when that is set) which, if delegated, has an
// active creator. It is how a service re-checks the access of whoever owns
// something (a subscription) outside a request; false when the principal
// can no longer act.
func PrincipalOf(r *raftstore.Reader, id string, now time.Time, capDays int) (authz.Principal, bool) {
	if u, _, ok := Users.Get(r, id); ok {
		return authz.Principal{Kind: authz.KindUser, ID: u.ID, UserID: u.ID}, u.Status == StatusActive
	}
	t, _, ok := Tokens.Get(r, id)
	if !ok {
		return authz.Principal{}, false
	}
	if exp := Expiry(t, capDays); exp != nil && !now.Before(*exp) {
		return authz.Principal{}, false
	}
	p := authz.Principal{Kind: authz.KindToken, ID: t.ID, Agent: t.Agent}
	if t.Kind == TokenDelegated {
		u, _, ok := Users.Get(r, t.OwnerID)
		if !ok || u.Status != StatusActive {
			return authz.Principal{}, false
		}
		p.UserID = u.ID
	}
	return p, true
}
