package identity

import (
	"context"
	"fmt"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
)

// SetupRequired reports whether the installation waits for its first
// administrator: true until any account exists.
func (s *Service) SetupRequired() bool {
	items, _ := Users.List(s.d.Store.Read(), raftstore.Query{Limit: 1})
	return len(items) == 0
}

// Setup creates the first account, as administrator, and signs it in. It is
// refused once any account exists, also when two setups race.
func (s *Service) Setup(ctx context.Context, username, displayName, pw string, c Client) (SignedIn, error) {
	r, err := s.d.Store.ConsistentRead(ctx)
	if err != nil {
		return SignedIn{}, err
	}
	if Users.Count(r) > 0 {
		return SignedIn{}, errcode.New(errcode.StateInvalid, "the installation is already set up").
			WithRemedy("sign in with an existing account")
	}
	if pw == "" {
		return SignedIn{}, errcode.Invalid("password", "a password is required")
	}
	admin := authz.RoleAdmin
	u, _, err := s.buildUser(ctx, NewUser{Username: username, DisplayName: displayName, Password: pw, RoleID: &admin})
	if err != nil {
		return SignedIn{}, err
	}
	// One write: the account (with its one audit entry), its session and
	// their events; the request is audited once.
	ctx = actor.With(ctx, actor.Actor{Kind: authz.KindAnonymous, RequestID: actor.From(ctx).RequestID})
	ops := append([]raftstore.Op{Users.CheckTable(r.TableIndex(Users))}, s.userCreatedOps(ctx, &u, "setup")...)
	userCtx := actor.With(ctx, actor.Actor{Kind: authz.KindUser, ID: u.ID, RequestID: actor.From(ctx).RequestID})
	in, sessionOps := s.openSession(userCtx, u, c)
	if err := s.apply(ctx, append(ops, sessionOps...)...); err != nil {
		if raftstore.IsReason(err, raftstore.ReasonStale) {
			return SignedIn{}, errcode.New(errcode.StateInvalid, "the installation is already set up")
		}
		return SignedIn{}, err
	}
	return in.SignedIn, nil
}

// FirstRun creates the administrator "admin" with the given password
// (SVC_ADMIN_PASSWORD) if no account has ever existed. It writes nothing on
// any later run: the users table has been written to by then.
func (s *Service) FirstRun(ctx context.Context, pw string) (bool, error) {
	if pw == "" {
		return false, nil
	}
	r, err := s.d.Store.ConsistentRead(ctx)
	if err != nil {
		return false, err
	}
	if r.TableIndex(Users) != 0 {
		return false, nil
	}
	admin := authz.RoleAdmin
	u, _, err := s.buildUser(ctx, NewUser{Username: "admin", DisplayName: "Administrator", Password: pw, RoleID: &admin})
	if err != nil {
		return false, fmt.Errorf("SVC_ADMIN_PASSWORD: %w", err)
	}
	ctx = actor.With(ctx, actor.System)
	ops := append([]raftstore.Op{Users.CheckTable(0)}, s.userCreatedOps(ctx, &u, "admin_password")...)
	if err := s.apply(ctx, ops...); err != nil {
		if raftstore.IsReason(err, raftstore.ReasonStale) {
			return false, nil // another node created it first
		}
		return false, err
	}
	return true, nil
}
