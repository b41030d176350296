package authz

import "slices"

// Set is a set of verbs, one bit per verb of the catalogue.
type Set uint32

func bit(v Verb) Set {
	for i, e := range verbs {
		if e.verb == v {
			return 1 << i
		}
	}
	return 0
}

// SetOf returns the set of the given verbs; unknown verbs are ignored.
func SetOf(vs ...Verb) Set {
	var s Set
	for _, v := range vs {
		s |= bit(v)
	}
	return s
}

// Has reports whether the set holds v.
func (s Set) Has(v Verb) bool { b := bit(v); return b != 0 && s&b != 0 }

// Verbs lists the set's verbs in catalogue order.
func (s Set) Verbs() []Verb {
	out := []Verb{}
	for i, e := range verbs {
		if s&(1<<i) != 0 {
			out = append(out, e.verb)
		}
	}
	return out
}

// Scoped keeps the verbs of one scope.
func (s Set) Scoped(scope Scope) Set { return s & SetOf(Verbs(scope)...) }

// Role is a named set of verbs. Built-in roles are fixed here; custom ones
// are stored by the identity package.
type Role struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Scope   Scope  `json:"scope"`
	Builtin bool   `json:"builtin"`
	Verbs   []Verb `json:"verbs"`
}

// Built-in role IDs.
const (
	RoleAdmin     = "role_admin"
	RoleAuditor   = "role_auditor"
	RoleMember    = "role_member"
	RoleOwner     = "role_owner"
	RoleDeveloper = "role_developer"
	RoleViewer    = "role_viewer"
)

var builtin = func() []Role {
	appAll := slices.DeleteFunc(All(), func(v Verb) bool { s, _ := ScopeOf(v); return s != ScopeApp })
	return []Role{
		{ID: RoleAdmin, Name: "admin", Scope: ScopeInstall, Builtin: true, Verbs: All()},
		{ID: RoleAuditor, Name: "auditor", Scope: ScopeInstall, Builtin: true, Verbs: []Verb{InstallView, InstallAuditRead, AppView}},
		{ID: RoleMember, Name: "member", Scope: ScopeInstall, Builtin: true, Verbs: []Verb{AppCreate}},
		{ID: RoleOwner, Name: "owner", Scope: ScopeApp, Builtin: true, Verbs: appAll},
		{ID: RoleDeveloper, Name: "developer", Scope: ScopeApp, Builtin: true, Verbs: []Verb{AppView, AppSpecEdit, AppDeploy, AppRestart, AppLogsRead, AppSecretsW}},
		{ID: RoleViewer, Name: "viewer", Scope: ScopeApp, Builtin: true, Verbs: []Verb{AppView, AppLogsRead}},
	}
}()

// BuiltinRoles returns the built-in roles.
func BuiltinRoles() []Role {
	out := make([]Role, len(builtin))
	for i, r := range builtin {
		out[i] = r
		out[i].Verbs = slices.Clone(r.Verbs)
	}
	return out
}

// BuiltinRole returns a built-in role by ID.
func BuiltinRole(id string) (Role, bool) {
	for _, r := range builtin {
		if r.ID == id {
			r.Verbs = slices.Clone(r.Verbs)
			return r, true
		}
	}
	return Role{}, false
}

// ValidVerbsForScope reports the first verb that a role of the scope cannot
// hold: an app role holds only app verbs; an installation role may hold any
// verb, app verbs then applying to every app (as admin and auditor do).
func ValidVerbsForScope(scope Scope, vs []Verb) (Verb, bool) {
	for _, v := range vs {
		s, ok := ScopeOf(v)
		if !ok || (scope == ScopeApp && s != ScopeApp) {
			return v, false
		}
	}
	return "", true
}

// Principal kinds, as audit entries and events name them.
const (
	KindUser      = "user"
	KindToken     = "token"
	KindSystem    = "system"
	KindAnonymous = "anonymous"
)

// Principal is the caller a decision is about.
type Principal struct {
	Kind string // user, token or anonymous
	ID   string // usr_… or tok_…; empty for anonymous
	// UserID is the account whose grants apply: the user itself, or the
	// creator a delegated token acts for. Empty for a service token.
	UserID string
	// Agent marks an automated caller (an agent token): host policy's
	// agent_disabled_verbs apply to it.
	Agent bool
}

// Facts is what a decision reads about the installation.
type Facts interface {
	// Role returns a built-in or custom role.
	Role(id string) (Role, bool)
	// InstallRoles returns the installation roles of an active account:
	// its own and those of the groups it belongs to.
	InstallRoles(userID string) []string
	// AppRoles returns the roles of the management grants on an app that
	// reach the principal: to its account, the account's groups, or (for a
	// service token) to the token itself.
	AppRoles(appID string, p Principal) []string
}

// Floor is host policy's floor under every decision: verbs disabled for
// everyone, and for automated callers.
type Floor struct {
	Disabled      []Verb
	AgentDisabled []Verb
}

func (f Floor) apply(p Principal, s Set) Set {
	s &^= SetOf(f.Disabled...)
	if p.Agent {
		s &^= SetOf(f.AgentDisabled...)
	}
	return s
}

func rolesVerbs(f Facts, ids []string) Set {
	var s Set
	for _, id := range ids {
		if r, ok := f.Role(id); ok {
			s |= SetOf(r.Verbs...)
		}
	}
	return s
}

// InstallVerbs returns the installation-level verbs a principal holds, and
// the app verbs it holds on every app, after the policy floor.
func InstallVerbs(f Facts, p Principal, floor Floor) Set {
	if p.UserID == "" {
		return 0 // anonymous callers and service tokens hold no installation role
	}
	return floor.apply(p, rolesVerbs(f, f.InstallRoles(p.UserID)))
}

// AppVerbs returns the app verbs a principal holds on one app: those its
// installation roles give on every app, and those of the management grants
// on the app that reach it, after the policy floor.
func AppVerbs(f Facts, p Principal, appID string, floor Floor) Set {
	var s Set
	if p.UserID != "" {
		s = rolesVerbs(f, f.InstallRoles(p.UserID))
	}
	s |= rolesVerbs(f, f.AppRoles(appID, p))
	return floor.apply(p, s).Scoped(ScopeApp)
}

// Caller is an authenticated principal with the installation verbs it holds
// (after the policy floor), as services receive it from the server.
type Caller struct {
	Principal Principal
	Install   Set
}

// Has reports whether the caller holds an installation verb.
func (c Caller) Has(v Verb) bool { return c.Install.Has(v) }

// IsUser reports whether the caller acts as the account userID (itself, or
// through a delegated token).
func (c Caller) IsUser(userID string) bool {
	return userID != "" && c.Principal.UserID == userID
}
