package identity

import (
	"context"
	"errors"
	"fmt"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
)

// SetupRequired reports whether the installation waits for its first
// administrator: true until any account exists, and never while this node
// is to create the administrator from SVC_ADMIN_PASSWORD (ExpectAdmin):
// the installation does not wait for setup then, even before the account
// is written.
func (s *Service) SetupRequired() bool {
	if s.adminPending.Load() {
		return false
	}
	items, _ := Users.List(s.d.Store.Read(), raftstore.Query{Limit: 1})
	return len(items) == 0
}

// Setup creates the first account, as administrator, and signs it in. It is
// refused once any account exists, also when two setups race, and on a
// node that is to create the administrator from SVC_ADMIN_PASSWORD and has
// not yet. A refusal is logged with the client's address.
func (s *Service) Setup(ctx context.Context, username, displayName, pw string, c Client) (SignedIn, error) {
	if s.adminPending.Load() {
		return SignedIn{}, s.setupRefused(c, "the administrator from SVC_ADMIN_PASSWORD is being created")
	}
	r, err := s.d.Store.ConsistentRead(ctx)
	if err != nil {
		return SignedIn{}, err
	}
	if Users.Count(r) > 0 {
		return SignedIn{}, s.setupRefused(c, "an account exists")
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
	// their events; the request is audited once. It is made only while no
	// account exists: of two setups, the second is built again on a view
	// holding the first's account, and refused.
	ctx = actor.With(ctx, actor.Actor{Kind: authz.KindAnonymous, RequestID: actor.From(ctx).RequestID})
	created := s.userCreatedOps(ctx, &u, "setup")
	userCtx := actor.With(ctx, actor.Actor{Kind: authz.KindUser, ID: u.ID, RequestID: actor.From(ctx).RequestID})
	in, sessionOps := s.openSession(userCtx, u, c)
	lost := errors.New("another setup won the race")
	err = s.update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		if Users.Count(r) > 0 {
			return nil, lost
		}
		ops := append([]raftstore.Op{Users.CheckTable(r.TableIndex(Users))}, created...)
		return append(ops, sessionOps...), nil
	})
	if errors.Is(err, lost) {
		return SignedIn{}, s.setupRefused(c, lost.Error())
	}
	if err != nil {
		return SignedIn{}, err
	}
	return in.SignedIn, nil
}

// setupRefused logs a refused setup (someone tried to claim an
// installation that is not waiting) and returns its answer.
func (s *Service) setupRefused(c Client, why string) *errcode.Error {
	s.d.Logger.Warn("setup refused: the installation is already set up", "why", why, "client_ip", c.IP)
	return errcode.New(errcode.StateInvalid, "the installation is already set up").
		WithRemedy("sign in with an existing account")
}

// ExpectAdmin says that this node was started with SVC_ADMIN_PASSWORD and
// will call FirstRun: until FirstRun has written the administrator or found
// the installation set up, the node answers as set up (SetupRequired is
// false), refuses Setup, and AdminPending is true (it is not ready). Call it
// before the node answers anything.
func (s *Service) ExpectAdmin() { s.adminPending.Store(true) }

// AdminPending reports whether this node still has to apply
// SVC_ADMIN_PASSWORD (see ExpectAdmin).
func (s *Service) AdminPending() bool { return s.adminPending.Load() }

// FirstRun creates the administrator "admin" with the given password
// (SVC_ADMIN_PASSWORD) if no account has ever existed. It writes nothing on
// any later run: the users table has been written to by then (this node's
// copy says so at once; otherwise a consistent read, which needs a leader,
// decides). Once it returns without error the node is no longer waiting
// for it (ExpectAdmin). A password the rules refuse is VALID_INVALID; the
// node then stays waiting, refusing setup: the installation is never left
// open for anyone to claim when the operator meant to set it up.
func (s *Service) FirstRun(ctx context.Context, pw string) (created bool, err error) {
	defer func() {
		if err == nil {
			s.adminPending.Store(false)
		}
	}()
	if pw == "" {
		return false, nil
	}
	if s.d.Store.Read().TableIndex(Users) != 0 {
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
	err = s.update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		if created = r.TableIndex(Users) == 0; !created {
			return nil, nil // another node created it first
		}
		return ops, nil
	})
	if err != nil {
		return false, err
	}
	return created, nil
}
