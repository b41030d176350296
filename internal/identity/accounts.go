package identity

import (
	"context"
	"fmt"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/password"
	"github.com/svchost/svc/raftstore"
)

var usernameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func checkUsername(u string) error {
	if !usernameRE.MatchString(u) {
		return errcode.Invalid("username", "a username is 1 to 64 letters, digits, dots, dashes or underscores, starting with a letter or digit")
	}
	return nil
}

func checkDisplayName(n string) error {
	if n == "" || utf8.RuneCountInString(n) > 128 || !utf8.ValidString(n) || strings.IndexFunc(n, unicode.IsControl) >= 0 || strings.TrimSpace(n) == "" {
		return errcode.Invalid("display_name", "a display name is 1 to 128 characters without control characters")
	}
	return nil
}

func checkEmail(e string) error {
	if e == "" {
		return nil
	}
	a, err := mail.ParseAddress(e)
	if err != nil || a.Address != e || len(e) > 254 {
		return errcode.Invalid("email", "not an email address (name@example.com)")
	}
	return nil
}

func checkPassword(pw, username string) error {
	if err := password.Check(pw, username); err != nil {
		return errcode.Invalid("password", "%s", err.Error())
	}
	return nil
}

// NewUser is an account to create.
type NewUser struct {
	Username           string
	DisplayName        string
	Email              string
	Password           string // empty: one is generated and returned
	MustChangePassword bool
	RoleID             *string
}

// buildUser validates a new local account and hashes its password. It
// returns the account and the generated password, if one was generated.
func (s *Service) buildUser(ctx context.Context, n NewUser) (User, string, error) {
	if n.DisplayName == "" {
		n.DisplayName = n.Username
	}
	for _, err := range []error{checkUsername(n.Username), checkDisplayName(n.DisplayName), checkEmail(n.Email)} {
		if err != nil {
			return User{}, "", err
		}
	}
	generated := ""
	if n.Password == "" {
		pw, err := password.Generate()
		if err != nil {
			return User{}, "", fmt.Errorf("generate a password: %w", err)
		}
		n.Password, generated = pw, pw
		n.MustChangePassword = true
	}
	if err := checkPassword(n.Password, n.Username); err != nil {
		return User{}, "", err
	}
	hash, err := s.d.Hasher.Hash(ctx, n.Password)
	if err != nil {
		return User{}, "", fmt.Errorf("hash password: %w", err)
	}
	now := s.now()
	return User{
		ID: ids.New(ids.User), Username: n.Username, DisplayName: n.DisplayName, Email: n.Email,
		Status: StatusActive, MustChangePassword: n.MustChangePassword, RoleID: n.RoleID,
		Source: SourceLocal, PasswordHash: hash, CreatedAt: now, UpdatedAt: now,
	}, generated, nil
}

func (s *Service) userCreatedOps(ctx context.Context, u *User, via string) []raftstore.Op {
	now := s.now()
	target := audit.Target{Kind: "user", ID: u.ID}
	ops := []raftstore.Op{
		Users.Insert(u),
		audit.Record(ctx, now, "user.create", "", target, map[string]any{"username": u.Username, "via": via}),
		events.Emit(ctx, now, "user.created", nil, "user", u.ID, map[string]any{"via": via, "adapter_id": nil}),
	}
	if u.RoleID != nil {
		ops = append(ops, events.Emit(ctx, now, "grant.created", nil, "user", u.ID, map[string]any{
			"plane": PlaneControl, "role_id": *u.RoleID, "principal_kind": authz.KindUser, "principal_id": u.ID, "passcode": false,
		}))
	}
	return ops
}

// CreateUser creates a local account; it holds no installation role. Without
// a password one is generated, returned once, and must be changed at first
// sign-in. Its email, set by whoever may create accounts, is verified; an
// address another account has is refused (STATE_INVALID, field email).
func (s *Service) CreateUser(ctx context.Context, n NewUser) (User, string, error) {
	n.RoleID = nil
	u, generated, err := s.buildUser(ctx, n)
	if err != nil {
		return User{}, "", err
	}
	u.EmailVerified = u.Email != ""
	err = s.update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) { return s.userCreatedOps(ctx, &u, "api"), nil })
	if err != nil {
		return User{}, "", err
	}
	return u, generated, nil
}

// User returns an account. A caller may read its own account without a verb;
// anyone else's needs install.view (PERM_VERB_REQUIRED without it, whether
// or not the account exists; with it, NOT_FOUND for an unknown one).
func (s *Service) User(c authz.Caller, id string) (User, error) {
	if err := ownOrVerb(c, c.IsUser(id), authz.InstallView); err != nil {
		return User{}, err
	}
	u, _, ok := Users.Get(s.d.Store.Read(), id)
	if !ok {
		return User{}, errcode.New(errcode.NotFound, "no account %s", id)
	}
	return u, nil
}

// Users lists accounts by ID after the cursor.
func (s *Service) Users(after string, limit int) ([]User, bool) {
	items, more := Users.List(s.d.Store.Read(), raftstore.Query{After: after, Limit: limit})
	out := make([]User, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out, more
}

// UserPatch holds the fields of PATCH /users/{id}; nil means unchanged.
type UserPatch struct {
	Username    *string
	DisplayName *string
	Email       *string
	Status      *string
}

// UpdateUser changes an account. Own display name and email need no verb;
// anyone else's account, a username (even one's own) and a status need
// install.users.manage (PERM_VERB_REQUIRED without it, whether or not the
// account exists);
// username and email exist only on local accounts. Suspension keeps the
// account and ends its sessions; it is refused when nobody would remain able
// to manage accounts.
//
// An email is unique among accounts (STATE_INVALID, field email, when
// another has it). It is verified when a caller holding
// install.users.manage sets it, even to the address it already has (so an
// administrator vouches for an address set before verification existed);
// a person setting their own address makes it unverified.
func (s *Service) UpdateUser(ctx context.Context, c authz.Caller, id string, p UserPatch) (User, error) {
	var out User
	err := s.update(ctx, func(r *raftstore.Reader) (ops []raftstore.Op, err error) {
		out, ops, err = s.userPatch(ctx, r, c, id, p)
		return ops, err
	})
	if err != nil {
		return User{}, err
	}
	return out, nil
}

// userPatch builds the change UpdateUser makes to an account as r shows
// it: the account as it will be and the operations (none when nothing
// changes).
func (s *Service) userPatch(ctx context.Context, r *raftstore.Reader, c authz.Caller, id string, p UserPatch) (User, []raftstore.Op, error) {
	if err := ownOrVerb(c, c.IsUser(id), authz.InstallUsersManage); err != nil {
		return User{}, nil, err
	}
	u, meta, ok := Users.Get(r, id)
	if !ok {
		return User{}, nil, errcode.New(errcode.NotFound, "no account %s", id)
	}
	manage := c.Has(authz.InstallUsersManage)
	renames := p.Username != nil && *p.Username != u.Username
	restatus := p.Status != nil && *p.Status != u.Status
	if !manage && (!c.IsUser(id) || renames || restatus) {
		return User{}, nil, verbRequired(authz.InstallUsersManage)
	}
	changed := map[string]any{}
	if p.Username != nil && *p.Username != u.Username {
		if u.Source != SourceLocal {
			return User{}, nil, errcode.Invalid("username", "the username of an account from an identity adapter is set by the adapter")
		}
		if err := checkUsername(*p.Username); err != nil {
			return User{}, nil, err
		}
		changed["username"] = map[string]any{"from": u.Username, "to": *p.Username}
		u.Username = *p.Username
	}
	if p.DisplayName != nil && *p.DisplayName != u.DisplayName {
		if err := checkDisplayName(*p.DisplayName); err != nil {
			return User{}, nil, err
		}
		changed["display_name"] = true
		u.DisplayName = *p.DisplayName
	}
	if p.Email != nil && (*p.Email != u.Email || (manage && *p.Email != "" && !u.EmailVerified)) {
		if u.Source != SourceLocal {
			return User{}, nil, errcode.Invalid("email", "the email of an account from an identity adapter is set by the adapter")
		}
		if err := checkEmail(*p.Email); err != nil {
			return User{}, nil, err
		}
		if *p.Email != u.Email {
			changed["email"] = true
		}
		u.Email, u.EmailVerified = *p.Email, manage && *p.Email != ""
		changed["email_verified"] = u.EmailVerified
	}
	var endSessions []raftstore.Op
	if p.Status != nil && *p.Status != u.Status {
		if *p.Status != StatusActive && *p.Status != StatusSuspended {
			return User{}, nil, errcode.Invalid("status", "status is active or suspended")
		}
		changed["status"] = map[string]any{"from": u.Status, "to": *p.Status}
		u.Status = *p.Status
		if u.Status == StatusSuspended {
			endSessions = s.sessionDeletes(r, id, "")
		}
	}
	if len(changed) == 0 {
		return u, nil, nil
	}
	u.UpdatedAt = s.now()
	ops := append([]raftstore.Op{
		Users.PutIf(&u, meta.ModifyIndex),
		audit.Record(ctx, s.now(), "user.update", "", audit.Target{Kind: "user", ID: id}, changed),
	}, endSessions...)
	return u, ops, nil
}

// DeleteUser deletes an account with everything that exists only for it:
// its sessions, its group memberships and what was shared with it. Its
// delegated tokens end with it: they stay recorded and answer
// AUTH_TOKEN_ORPHANED, as the specification asks. Service tokens it created
// outlive it. Refused when nobody would remain able to manage accounts.
func (s *Service) DeleteUser(ctx context.Context, id string) error {
	return s.update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) { return s.userDeletion(ctx, r, id) })
}

// userDeletion builds DeleteUser's change on the view r.
func (s *Service) userDeletion(ctx context.Context, r *raftstore.Reader, id string) ([]raftstore.Op, error) {
	u, meta, ok := Users.Get(r, id)
	if !ok {
		return nil, errcode.New(errcode.NotFound, "no account %s", id)
	}
	now := s.now()
	// The memberships and grants removed are those of r: a membership or a
	// grant given meanwhile has the change built again.
	ops := []raftstore.Op{Users.DeleteIf(id, meta.ModifyIndex),
		Groups.CheckTable(r.TableIndex(Groups)), Grants.CheckTable(r.TableIndex(Grants))}
	ops = append(ops, s.sessionDeletes(r, id, "")...)
	groups, _ := Groups.List(r, raftstore.Query{Index: "member", Key: id})
	for _, g := range groups {
		gv := g.Value
		gv.MemberIDs = slices.DeleteFunc(slices.Clone(gv.MemberIDs), func(m string) bool { return m == id })
		ops = append(ops, Groups.PutIf(&gv, g.Meta.ModifyIndex))
	}
	if u.RoleID != nil {
		ops = append(ops, grantDeleted(ctx, now, "", "user", id))
	}
	ops = append(ops, s.grantDeletes(ctx, r, authz.KindUser, id)...)
	ops = append(ops,
		audit.Record(ctx, now, "user.delete", "", audit.Target{Kind: "user", ID: id}, map[string]any{"username": u.Username}),
		events.Emit(ctx, now, "user.deleted", nil, "user", id, map[string]any{"username": u.Username}),
	)
	return ops, nil
}

// SetUserRole gives an account an installation role (or, with roleID nil,
// removes it). The last administrator cannot be demoted: refused when nobody
// would remain able to manage accounts.
func (s *Service) SetUserRole(ctx context.Context, id string, roleID *string) (User, error) {
	var u User
	err := s.update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		var meta raftstore.Meta
		var ok bool
		u, meta, ok = Users.Get(r, id)
		if !ok {
			return nil, errcode.New(errcode.NotFound, "no account %s", id)
		}
		if err := checkInstallRole(r, roleID); err != nil {
			return nil, err
		}
		if ptrEq(u.RoleID, roleID) {
			return nil, nil
		}
		old := u.RoleID
		u.RoleID, u.UpdatedAt = roleID, s.now()
		now := s.now()
		action, ev, data := "user.role.set", "grant.role_changed", map[string]any{"role_id": deref0(roleID)}
		switch {
		case old == nil:
			ev, data = "grant.created", map[string]any{"plane": PlaneControl, "role_id": *roleID, "principal_kind": authz.KindUser, "principal_id": id, "passcode": false}
		case roleID == nil:
			action, ev, data = "user.role.remove", "grant.deleted", map[string]any{"scope": "install"}
		}
		return []raftstore.Op{
			Users.PutIf(&u, meta.ModifyIndex),
			audit.Record(ctx, now, action, "", audit.Target{Kind: "user", ID: id}, map[string]any{"role_id": deref0(roleID), "previous_role_id": deref0(old)}),
			events.Emit(ctx, now, ev, nil, "user", id, data),
		}, nil
	})
	if err != nil {
		return User{}, err
	}
	return u, nil
}

// ResetPassword sets another local account's password and ends all its
// sessions; by default the account must change it at next sign-in.
func (s *Service) ResetPassword(ctx context.Context, id, pw string, mustChange bool) error {
	// The password is checked and hashed once, before the write.
	localUser := func(r *raftstore.Reader) (User, raftstore.Meta, error) {
		u, meta, ok := Users.Get(r, id)
		if !ok {
			return User{}, meta, errcode.New(errcode.NotFound, "no account %s", id)
		}
		if u.Source != SourceLocal {
			return User{}, meta, errcode.New(errcode.StateInvalid, "the password of an account from an identity adapter is kept by the adapter")
		}
		return u, meta, checkPassword(pw, u.Username)
	}
	if _, _, err := localUser(s.d.Store.Read()); err != nil {
		return err
	}
	hash, err := s.d.Hasher.Hash(ctx, pw)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	return s.update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		u, meta, err := localUser(r)
		if err != nil {
			return nil, err
		}
		u.PasswordHash, u.MustChangePassword, u.UpdatedAt = hash, mustChange, s.now()
		return append([]raftstore.Op{
			Users.PutIf(&u, meta.ModifyIndex),
			audit.Record(ctx, s.now(), "user.password.reset", "", audit.Target{Kind: "user", ID: id}, map[string]any{"must_change_password": mustChange}),
		}, s.sessionDeletes(r, id, "")...), nil
	})
}

// ChangeOwnPassword changes the caller's own password after checking the
// current one, clears must_change_password and ends every other session of
// the account. Guesses of the current password count like failed sign-ins
// from client, so that a stolen session cannot try passwords without end.
func (s *Service) ChangeOwnPassword(ctx context.Context, c authz.Caller, client Client, currentSession, current, next string) error {
	id := c.Principal.UserID
	u, _, ok := Users.Get(s.d.Store.Read(), id)
	if !ok || id == "" {
		return errcode.New(errcode.PermDenied, "only an account can change its password")
	}
	if u.Source != SourceLocal {
		return errcode.New(errcode.StateInvalid, "the password of an account from an identity adapter is kept by the adapter")
	}
	pair, limits := s.passwordLimits(u.Username, client.IP)
	try, err := reserve("too many wrong passwords; wait before trying again", limits...)
	if err != nil {
		return err
	}
	good, _, err := s.d.Hasher.Verify(ctx, u.PasswordHash, current)
	if err != nil || !good {
		try.failed()
		return errcode.New(errcode.PermDenied, "the current password is wrong")
	}
	try.release()
	s.passwordProved(pair)
	if err := checkPassword(next, u.Username); err != nil {
		return err
	}
	if next == current {
		return errcode.Invalid("new_password", "the new password must differ from the current one")
	}
	hash, err := s.d.Hasher.Hash(ctx, next)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	proved := u.PasswordHash
	return s.update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		u, meta, ok := Users.Get(r, id)
		if !ok {
			return nil, errcode.New(errcode.PermDenied, "only an account can change its password")
		}
		if u.PasswordHash != proved {
			// Changed or reset meanwhile: the password given as current
			// is not the current one any more.
			return nil, errcode.New(errcode.PermDenied, "the current password is wrong")
		}
		u.PasswordHash, u.MustChangePassword, u.UpdatedAt = hash, false, s.now()
		return append([]raftstore.Op{
			Users.PutIf(&u, meta.ModifyIndex),
			audit.Record(ctx, s.now(), "user.password.change", "", audit.Target{Kind: "user", ID: id}, nil),
		}, s.sessionDeletes(r, id, currentSession)...), nil
	})
}

// grantDeleted is the event of an installation role (appID "") or an app
// grant that a removal took away.
func grantDeleted(ctx context.Context, now time.Time, appID, targetKind, targetID string) raftstore.Op {
	scope := "install"
	var app *events.AppRef
	if appID != "" {
		scope, app = "app", &events.AppRef{ID: appID}
	}
	return events.Emit(ctx, now, "grant.deleted", app, targetKind, targetID, map[string]any{"scope": scope})
}

// grantDeletes deletes every app grant to a principal, each with its event.
func (s *Service) grantDeletes(ctx context.Context, r *raftstore.Reader, kind, id string) []raftstore.Op {
	grants, _ := Grants.List(r, raftstore.Query{Index: "principal", Key: raftstore.Key(kind, id)})
	var ops []raftstore.Op
	for _, g := range grants {
		ops = append(ops, Grants.Delete(g.Value.ID), grantDeleted(ctx, s.now(), g.Value.AppID, "grant", g.Value.ID))
	}
	return ops
}

func verbRequired(v authz.Verb) *errcode.Error {
	return errcode.New(errcode.PermVerbRequired, "this needs the verb %s", v).WithDetail("verb", string(v))
}

// ownOrVerb decides access to an installation object (an account, its
// apps) that is the caller's own or needs verb: nil when it is its own or
// the caller holds the verb, else PERM_VERB_REQUIRED. It is decided before
// the object is looked up, so that without the verb the answer is the same
// whether or not the object exists: installation resources are guarded by
// installation verbs alone; visibility (NOT_FOUND for what one may not
// see) is an app-level notion (API.md).
func ownOrVerb(c authz.Caller, own bool, v authz.Verb) error {
	if own || c.Has(v) {
		return nil
	}
	return verbRequired(v)
}

func ptrEq(a, b *string) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

func deref0(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}
