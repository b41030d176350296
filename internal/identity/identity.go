// Package identity owns who may use the installation and what they hold:
// accounts (with Argon2id password hashes), browser sessions, API tokens,
// groups, custom roles and the grants that share apps (managing and
// opening them, with the grant to everyone's passcode and the admissions it
// gives); app sessions, the per-app credentials a handoff from the
// console gives a browser on an app's own origin (appsessions.go); the
// first administrator (setup or SVC_ADMIN_PASSWORD, which closes setup
// from before the account exists: ExpectAdmin); sign-in with throttling;
// and the rules the store's FSM enforces: someone must always remain able
// to manage accounts, and no two accounts share an email address.
//
// Every guess at a secret (a password at sign-in or when changing it, a
// passcode) reserves an attempt before the Argon2id check and settles it
// after (attempts.go, internal/throttle), so that no more than the limit is
// ever checked however many requests arrive at once; tokens and session
// and admission cookies carry 256 bits of randomness or a MAC and are not
// throttled (a guess cannot succeed, and a lockout would only let an
// attacker shut their owners out).
//
// It must not touch HTTP or adapters: the server authenticates requests and
// calls this package's services with the authenticated principal. Secrets
// (passwords, passcodes, token and session secrets) are stored only as
// hashes, and keys only sealed; none appears in an audit entry, an event or
// a log line.
package identity

import (
	"strings"
	"time"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
)

// Account states.
const (
	StatusActive    = "active"
	StatusSuspended = "suspended"
	SourceLocal     = "local"
)

// User is an account as the store keeps it. PasswordHash is an Argon2id PHC
// string and never leaves this package's callers' control: API answers are
// built from User without it.
//
// Email is unique among accounts, case-insensitively (validateUser, in the
// FSM). EmailVerified says whether svc vouches for it: true when someone
// holding install.users.manage set the address (or an identity adapter
// verified it), false when the person set their own, and back to false
// whenever the address changes otherwise. Rows written before the field
// existed read as false: no record says who set those addresses.
type User struct {
	ID                 string    `json:"id"`
	Username           string    `json:"username"`
	DisplayName        string    `json:"display_name"`
	Email              string    `json:"email"`
	EmailVerified      bool      `json:"email_verified,omitempty"`
	Status             string    `json:"status"`
	MustChangePassword bool      `json:"must_change_password"`
	RoleID             *string   `json:"role_id"`
	Source             string    `json:"source"`
	PasswordHash       string    `json:"password_hash,omitempty"`
	CreatedAt          time.Time `json:"created_at"`
	UpdatedAt          time.Time `json:"updated_at"`
}

// Session is a browser session. Only a SHA-256 hash of the cookie's secret
// part is kept.
type Session struct {
	ID          string    `json:"id"`
	UserID      string    `json:"user_id"`
	SecretHash  []byte    `json:"secret_hash"`
	CreatedAt   time.Time `json:"created_at"`
	RefreshedAt time.Time `json:"refreshed_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	ClientIP    string    `json:"client_ip,omitempty"`
	UserAgent   string    `json:"user_agent,omitempty"`
}

// Token kinds.
const (
	TokenDelegated = "delegated"
	TokenService   = "service"
)

// Token is an API token. Only a SHA-256 hash of its secret is kept.
type Token struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Kind       string     `json:"kind"`
	Agent      bool       `json:"agent"`
	OwnerID    string     `json:"owner_id"`
	SecretHash []byte     `json:"secret_hash"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
}

// Group is a set of accounts that may carry an installation role.
type Group struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Source    string    `json:"source"`
	RoleID    *string   `json:"role_id"`
	MemberIDs []string  `json:"member_ids"`
	CreatedAt time.Time `json:"created_at"`
}

// Grant planes and principal kinds.
const (
	PlaneControl = "control"
	PlaneData    = "data"
)

// Grant shares an app with a principal: on the control plane with a role
// (managing the app), on the data plane to open it.
//
// A grant row carries the passcode of the grant to everyone, so that it
// goes wherever the grant goes: never answer a Grant as it is (the API
// shows GrantInfo).
type Grant struct {
	ID            string    `json:"id"`
	AppID         string    `json:"app_id"`
	Plane         string    `json:"plane"`
	PrincipalKind string    `json:"principal_kind"`
	PrincipalID   string    `json:"principal_id,omitempty"`
	RoleID        *string   `json:"role_id"`
	Passcode      bool      `json:"passcode"`
	CreatedAt     time.Time `json:"created_at"`
	// PasscodeHash is the Argon2id hash of the passcode while Passcode is
	// set. PasscodeGeneration counts the passcodes the grant has had (it
	// survives a removal, so that a number is never reused), and
	// PasscodeKey is the key admission cookies of that generation are
	// signed with, sealed by the keyring.
	PasscodeHash       string     `json:"passcode_hash,omitempty"`
	PasscodeGeneration uint64     `json:"passcode_generation,omitempty"`
	PasscodeKey        []byte     `json:"passcode_key,omitempty"`
	UpdatedAt          *time.Time `json:"updated_at,omitempty"`
}

func lower(s string) (string, bool) { return strings.ToLower(s), s != "" }

func deref(p *string) (string, bool) {
	if p == nil || *p == "" {
		return "", false
	}
	return *p, true
}

// The tables. Their rules and the accounts invariant are attached in init,
// because they read each other.
var (
	Users = &raftstore.Table[User]{
		Name: "users",
		ID:   func(u *User) string { return u.ID },
		Indexes: []raftstore.Index[User]{
			{Name: "username", Unique: true, Key: func(u *User) (string, bool) { return lower(u.Username) }},
			{Name: "role", Key: func(u *User) (string, bool) { return deref(u.RoleID) }},
			// Not Unique: accounts written before addresses had to be
			// unique may share one; validateUser refuses new sharing.
			{Name: "email", Key: func(u *User) (string, bool) { return lower(u.Email) }},
		},
	}
	Sessions = &raftstore.Table[Session]{
		Name: "sessions",
		ID:   func(s *Session) string { return s.ID },
		Indexes: []raftstore.Index[Session]{
			{Name: "user", Key: func(s *Session) (string, bool) { return s.UserID, true }},
		},
	}
	Tokens = &raftstore.Table[Token]{
		Name: "tokens",
		ID:   func(t *Token) string { return t.ID },
		Indexes: []raftstore.Index[Token]{
			{Name: "owner", Key: func(t *Token) (string, bool) { return t.OwnerID, t.OwnerID != "" }},
			{Name: "kind", Key: func(t *Token) (string, bool) { return t.Kind, true }},
		},
	}
	Groups = &raftstore.Table[Group]{
		Name: "groups",
		ID:   func(g *Group) string { return g.ID },
		Indexes: []raftstore.Index[Group]{
			{Name: "name", Unique: true, Key: func(g *Group) (string, bool) { return lower(g.Name) }},
			{Name: "member", Keys: func(g *Group) []string { return g.MemberIDs }},
			{Name: "role", Key: func(g *Group) (string, bool) { return deref(g.RoleID) }},
		},
	}
	Roles = &raftstore.Table[authz.Role]{
		Name: "roles",
		ID:   func(r *authz.Role) string { return r.ID },
		Indexes: []raftstore.Index[authz.Role]{
			{Name: "name", Unique: true, Key: func(r *authz.Role) (string, bool) { return lower(r.Name) }},
		},
	}
	Grants = &raftstore.Table[Grant]{
		Name: "grants",
		ID:   func(g *Grant) string { return g.ID },
		Indexes: []raftstore.Index[Grant]{
			{Name: "app", Key: func(g *Grant) (string, bool) { return g.AppID, true }},
			{Name: "principal", Key: func(g *Grant) (string, bool) {
				return raftstore.Key(g.PrincipalKind, g.PrincipalID), g.PrincipalID != ""
			}},
			{Name: "role", Key: func(g *Grant) (string, bool) { return deref(g.RoleID) }},
		},
	}
)

// Tables lists the tables this package declares.
func Tables() []raftstore.Def {
	return []raftstore.Def{Users, Sessions, Tokens, Groups, Roles, Grants, AppSessions}
}

// accountsManageable is the invariant that the installation is never left
// with no active account able to manage accounts (holding
// install.users.manage through its own role, a group's role, or a custom
// role). It holds trivially before the first account exists.
var accountsManageable = &raftstore.Invariant{Name: "accounts_manageable", Check: func(r *raftstore.Reader) error {
	// With no account now and none ever written (invariants run before the
	// table's index moves), there is nothing to protect yet. Once one has
	// existed, an installation left with none would reopen setup to anyone;
	// and the first account itself must be able to manage accounts.
	if Users.Count(r) == 0 && r.TableIndex(Users) == 0 {
		return nil
	}
	if len(accountManagers(r, 1)) > 0 {
		return nil
	}
	return errcode.New(errcode.StateInvalid, "nobody would remain able to manage accounts").
		WithRemedy("give install.users.manage (for example the admin role) to another active account first").
		WithDetail("protected", "install.users.manage")
}}

func init() {
	Users.Invariant = accountsManageable
	Groups.Invariant = accountsManageable
	Roles.Invariant = accountsManageable
	Roles.Validate = validateRole
	Users.Validate = validateUser
	Groups.Validate = validateGroupRole
}

// accountManagers returns up to max active accounts holding
// install.users.manage.
func accountManagers(r *raftstore.Reader, max int) []string {
	f := facts{r: r}
	var out []string
	items, _ := Users.List(r, raftstore.Query{Filter: func(v any) bool { return v.(*User).Status == StatusActive }})
	for _, it := range items {
		if authz.InstallVerbs(f, authz.Principal{Kind: authz.KindUser, ID: it.Value.ID, UserID: it.Value.ID}, authz.Floor{}).Has(authz.InstallUsersManage) {
			out = append(out, it.Value.ID)
			if len(out) == max {
				break
			}
		}
	}
	return out
}

// validateRole keeps custom roles custom: a stored role is never built in,
// never reuses a built-in ID, and holds only verbs its scope allows. A role
// is deleted only when nothing names it any more (DeleteRole clears the
// accounts, groups and grants it read in the same write, and is built
// again when one was given meanwhile; this refusal is the guard behind it).
func validateRole(rd *raftstore.Reader, old, r *authz.Role) error {
	if r == nil {
		if old != nil && roleInUse(rd, old.ID) {
			return errcode.New(errcode.StateInvalid, "role %s was just given to someone; retry the deletion", old.ID).
				WithDetail("role_id", old.ID)
		}
		return nil
	}
	if _, builtin := authz.BuiltinRole(r.ID); builtin || r.Builtin {
		return errcode.New(errcode.StateInvalid, "built-in roles cannot be changed")
	}
	if v, ok := authz.ValidVerbsForScope(r.Scope, r.Verbs); !ok {
		return errcode.Invalid("verbs", "a role of scope %s cannot hold %q", r.Scope, v)
	}
	return nil
}

func roleInUse(rd *raftstore.Reader, id string) bool {
	if _, _, ok := Users.First(rd, "role", id); ok {
		return true
	}
	if _, _, ok := Groups.First(rd, "role", id); ok {
		return true
	}
	_, _, ok := Grants.First(rd, "role", id)
	return ok
}

// An installation role given to an account or group must exist and be an
// installation role.
func checkInstallRole(r *raftstore.Reader, id *string) error {
	if id == nil {
		return nil
	}
	role, ok := facts{r: r}.Role(*id)
	if !ok {
		return errcode.New(errcode.NotFound, "no role %s", *id)
	}
	if role.Scope != authz.ScopeInstall {
		return errcode.Invalid("role_id", "%s is an app role; only installation roles apply here", *id)
	}
	return nil
}

// validateUser checks an account's installation role, and that an address
// it is given (on creation, or changed other than in case) is no other
// account's, case-insensitively: in the FSM, so that two writers racing for
// one address cannot both win. Addresses shared before this rule existed
// stay until one of them changes.
func validateUser(r *raftstore.Reader, old, u *User) error {
	if u == nil {
		return nil
	}
	if err := checkInstallRole(r, u.RoleID); err != nil {
		return err
	}
	key, ok := lower(u.Email)
	if !ok || (old != nil && strings.EqualFold(old.Email, u.Email)) {
		return nil
	}
	items, _ := Users.List(r, raftstore.Query{Index: "email", Key: key, Limit: 2})
	for _, it := range items {
		if it.Value.ID != u.ID {
			return taken("email", "another account has that email address")
		}
	}
	return nil
}

func validateGroupRole(r *raftstore.Reader, _, g *Group) error {
	if g == nil {
		return nil
	}
	return checkInstallRole(r, g.RoleID)
}
