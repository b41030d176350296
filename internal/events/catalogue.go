package events

import (
	"slices"
	"strings"
)

// Scope says which subscriptions an event reaches: an app event reaches
// subscriptions on its app and install-wide ones; an install event reaches
// install-wide subscriptions only. AppOrInstall events are app events when
// they carry an app and install events otherwise.
type Scope string

const (
	ScopeApp          Scope = "app"
	ScopeInstall      Scope = "install"
	ScopeAppOrInstall Scope = "app_or_install"
)

// Kind describes one event name of the catalogue.
type Kind struct {
	Name    string   `json:"name"`
	Scope   Scope    `json:"scope"`
	Meaning string   `json:"meaning"`
	Data    []string `json:"data"`
}

// catalogue is the whole list of events the product emits: 43 names. A name
// is never changed or removed within the major version.
var catalogue = []Kind{
	{"adapter.configured", ScopeInstall, "adapter added or changed; applies after restart", []string{"category", "kind", "credentials_changed"}},
	{"adapter.recovered", ScopeInstall, "adapter health check passes again", []string{"adapter_id", "category"}},
	{"adapter.unhealthy", ScopeInstall, "adapter health check started failing", []string{"adapter_id", "category", "reason"}},
	{"app.created", ScopeApp, "app created", []string{"name", "slug"}},
	{"app.deleted", ScopeApp, "app deleted; volumes kept unless discarded", []string{"backup_id", "volumes_discarded", "reason"}},
	{"app.disk_stopped", ScopeApp, "app stopped after staying over its disk limit", []string{"used_bytes", "limit_bytes"}},
	{"app.disk_warning", ScopeApp, "app near or over its disk limit", []string{"used_bytes", "limit_bytes", "over"}},
	{"app.shell_opened", ScopeApp, "a shell was opened in a workload; the command is recorded, not what was typed", []string{"workload", "command"}},
	{"app.gave_up", ScopeApp, "gave up restoring the app after repeated failures; stays failed until deployed", []string{"reason", "failures", "window"}},
	{"app.idle_warning", ScopeApp, "owner told of a planned idle action", []string{"action", "days", "last_activity", "action_at"}},
	{"app.idle_stopped", ScopeApp, "app stopped for idleness", []string{"days", "last_activity"}},
	{"app.restarted", ScopeApp, "app restarted", nil},
	{"app.data_restored", ScopeApp, "app data restored from backup", []string{"volumes"}},
	{"app.secret_changed", ScopeApp, "app secret set or changed; the value is never included", []string{"key"}},
	{"app.state_changed", ScopeApp, "app state moved", []string{"from", "to"}},
	{"backup.completed", ScopeAppOrInstall, "backup taken; a disaster-recovery bundle has no app and is install-wide", []string{"backup_id", "kind", "size_bytes"}},
	{"backup.failed", ScopeAppOrInstall, "backup failed", []string{"scheduled", "message", "remedy", "reason"}},
	{"backup.restored", ScopeAppOrInstall, "backup restored", []string{"restored"}},
	{"deploy.approved", ScopeApp, "deploy approved", []string{"approvals", "approvals_required"}},
	{"deploy.failed", ScopeApp, "deploy failed", []string{"deployment_id", "spec_id", "trigger", "error_code", "message"}},
	{"deploy.rejected", ScopeApp, "deploy rejected", []string{"reason"}},
	{"deploy.waiting_approval", ScopeApp, "deploy waiting for approval", []string{"spec_revision", "trigger", "reasons", "approvals_required"}},
	{"deploy.started", ScopeApp, "deploy started", []string{"spec_revision", "trigger"}},
	{"deploy.succeeded", ScopeApp, "deploy finished; the app runs the new revision", []string{"deployment_id", "spec_id", "trigger"}},
	{"grant.created", ScopeAppOrInstall, "access given (app share, or install role)", []string{"plane", "role_id", "principal_kind", "principal_id", "passcode"}},
	{"grant.deleted", ScopeAppOrInstall, "access removed", []string{"scope"}},
	{"grant.role_changed", ScopeAppOrInstall, "a grant's role changed", []string{"role_id"}},
	{"svc.upgrade_failed", ScopeInstall, "in-place upgrade did not finish", []string{"from", "to", "reason"}},
	{"svc.upgraded", ScopeInstall, "service upgraded itself in place", []string{"from", "to"}},
	{"policy.updated", ScopeInstall, "host policy changed; read the new policy from GET /api/v1/policy", nil},
	{"security.below_minimum", ScopeApp, "app's security score below the installation minimum", []string{"grace_hours", "action"}},
	{"security.recovered", ScopeApp, "score back at or above the minimum", nil},
	{"security.scan_failed", ScopeApp, "scan did not finish", []string{"reason"}},
	{"security.scanned", ScopeApp, "scan completed", []string{"score", "critical", "high", "medium", "low", "spec_id"}},
	{"security.insecure_stopped", ScopeApp, "app stopped for staying below the minimum score", []string{"grace_hours", "insecure_since"}},
	{"subscription.disabled", ScopeAppOrInstall, "subscription turned off after a day of failed deliveries", []string{"subscription_id", "reason"}},
	{"subscription.test", ScopeInstall, "test delivery, sent only to the subscription being tested", []string{"subscription_id"}},
	{"token.created", ScopeInstall, "API token created; the token is never in the event", []string{"name", "kind"}},
	{"token.revoked", ScopeInstall, "API token revoked", nil},
	{"user.created", ScopeInstall, "account created", []string{"via", "adapter_id"}},
	{"user.deleted", ScopeInstall, "account deleted", []string{"username"}},
	{"user.sign_in_failed", ScopeInstall, "sign-in refused", []string{"reason", "adapter_id"}},
	{"user.signed_in", ScopeInstall, "sign-in succeeded", []string{"user_id", "via", "adapter_id"}},
}

// Catalogue returns every event kind, in catalogue order.
func Catalogue() []Kind { return slices.Clone(catalogue) }

// Lookup returns the kind of an event name.
func Lookup(name string) (Kind, bool) {
	i := slices.IndexFunc(catalogue, func(k Kind) bool { return k.Name == name })
	if i < 0 {
		return Kind{}, false
	}
	return catalogue[i], true
}

// Matches reports whether a subscription filter (an exact name, a prefix such
// as "deploy.*", or "*") selects the event name.
func Matches(filter, name string) bool {
	if filter == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(filter, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return filter == name
}

// FilterMatchesAny reports whether a filter selects at least one event of the
// catalogue; a filter that selects none is refused when saving.
func FilterMatchesAny(filter string) bool {
	return slices.ContainsFunc(catalogue, func(k Kind) bool { return Matches(filter, k.Name) })
}
