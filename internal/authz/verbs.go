// Package authz owns the vocabulary of authorization: the verbs of the
// specification and the scopes they belong to. Later it also owns the decision
// of whether a principal holds a verb through its grants.
//
// It must not touch storage, HTTP or any adapter: it is pure domain logic that
// the server, the store's users and the policy package all read.
package authz

// Verb is a named permission. Holding one verb implies nothing about another.
type Verb string

// Scope says where a verb applies: across the installation or on one app.
type Scope string

const (
	ScopeInstall Scope = "install"
	ScopeApp     Scope = "app"
)

// The verbs of the specification. The list is part of the public contract: a
// verb is never renamed or removed within the major version.
const (
	AppCreate     Verb = "app.create"
	AppView       Verb = "app.view"
	AppSpecEdit   Verb = "app.spec.edit"
	AppDelete     Verb = "app.delete"
	AppRestart    Verb = "app.restart"
	AppLogsRead   Verb = "app.logs.read"
	AppExec       Verb = "app.exec"
	AppDeploy     Verb = "app.deploy"
	AppSecretsW   Verb = "app.secrets.write"
	AppSecretsR   Verb = "app.secrets.read"
	AppGrantsMgmt Verb = "app.grants.manage"

	InstallView         Verb = "install.view"
	InstallTokensManage Verb = "install.tokens.manage"
	InstallUsersManage  Verb = "install.users.manage"
	InstallAdaptersMgmt Verb = "install.adapters.manage"
	InstallPolicyManage Verb = "install.policy.manage"
	InstallAuditRead    Verb = "install.audit.read"
	InstallBackupManage Verb = "install.backup.manage"
	InstallEventsManage Verb = "install.events.manage"
)

// verbs lists every verb with its scope, in the order the specification gives.
// app.create is an installation verb: it is held before the app exists.
var verbs = []struct {
	verb  Verb
	scope Scope
}{
	{AppCreate, ScopeInstall},
	{AppView, ScopeApp},
	{AppSpecEdit, ScopeApp},
	{AppDelete, ScopeApp},
	{AppRestart, ScopeApp},
	{AppLogsRead, ScopeApp},
	{AppExec, ScopeApp},
	{AppDeploy, ScopeApp},
	{AppSecretsW, ScopeApp},
	{AppSecretsR, ScopeApp},
	{AppGrantsMgmt, ScopeApp},
	{InstallView, ScopeInstall},
	{InstallTokensManage, ScopeInstall},
	{InstallUsersManage, ScopeInstall},
	{InstallAdaptersMgmt, ScopeInstall},
	{InstallPolicyManage, ScopeInstall},
	{InstallAuditRead, ScopeInstall},
	{InstallBackupManage, ScopeInstall},
	{InstallEventsManage, ScopeInstall},
}

// Verbs returns every verb of the given scope, in catalogue order.
func Verbs(scope Scope) []Verb {
	var out []Verb
	for _, v := range verbs {
		if v.scope == scope {
			out = append(out, v.verb)
		}
	}
	return out
}

// All returns every verb, in catalogue order.
func All() []Verb {
	out := make([]Verb, len(verbs))
	for i, v := range verbs {
		out[i] = v.verb
	}
	return out
}

// Known reports whether v is a verb of the catalogue.
func Known(v Verb) bool {
	_, ok := ScopeOf(v)
	return ok
}

// ScopeOf returns the scope of a known verb and false for an unknown one.
func ScopeOf(v Verb) (Scope, bool) {
	for _, e := range verbs {
		if e.verb == v {
			return e.scope, true
		}
	}
	return "", false
}
