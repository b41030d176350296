// Package dependents finds what the replicated store records as depending
// on a configured adapter, for adapters.Service.Delete (as its
// Deps.Dependents): the secrets it holds (their origin), the slot fills it
// provisioned, the accounts and groups that come from it (their source), the
// subscriptions that send through it (a notification adapter),
// the releases that run on it and the deploys under way on it
// (their runtime), and the apps whose pinned spec names it as their runtime
// (by ID, or by kind when it is the last adapter of that kind). Each
// finding comes with the precondition that makes the delete run again on a
// newer view when that table changed meanwhile.
//
// It reads other packages' tables and writes none; it is pure (a
// raftstore.Build calls it). cmd/svc wires it; it imports the packages
// whose records it reads, which the adapters package cannot (they import
// it).
package dependents

import (
	"fmt"
	"slices"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/internal/slots"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/internal/subscriptions"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler"
)

var _ adapters.DependentsFunc = Find

// Find lists what depends on a, and the guards of that reading.
func Find(r *raftstore.Reader, a adapters.Adapter) ([]adapters.Dependent, []raftstore.Op) {
	var out []adapters.Dependent
	add := func(what string, ids []string, message, remedy string) {
		if len(ids) > 0 {
			out = append(out, adapters.Dependent{What: what, Count: len(ids), IDs: ids[:min(len(ids), adapters.MaxDependentIDs)],
				Message: fmt.Sprintf(message, len(ids)), Remedy: remedy})
		}
	}
	guards := []raftstore.Op{secrets.Secrets.CheckTable(r.TableIndex(secrets.Secrets)), slots.Fills.CheckTable(r.TableIndex(slots.Fills))}

	held, _ := secrets.Secrets.List(r, raftstore.Query{Index: "origin", Key: a.ID})
	add("secrets", ids(held, func(s secrets.Secret) string { return s.ID }),
		"it holds %d secret(s) of apps (<app id>/<key>)",
		"set each secret again once another secrets adapter is primary (its value moves there), or delete it")

	fills, _ := slots.Fills.List(r, raftstore.Query{Index: "adapter", Key: a.ID})
	add("slot_fills", ids(fills, func(f slots.Fill) string { return f.ID }),
		"it provisioned %d slot fill(s) (<app id>/<slot>)",
		"fill each slot another way (PUT /api/v1/apps/{appID}/slots/{key}: provision by another adapter, bind or value)")

	if a.Category == adapters.CategoryNotification {
		guards = append(guards, subscriptions.Subscriptions.CheckTable(r.TableIndex(subscriptions.Subscriptions)))
		subs, _ := subscriptions.Subscriptions.List(r, raftstore.Query{Index: "adapter", Key: a.ID})
		add("subscriptions", ids(subs, func(s subscriptions.Subscription) string { return s.ID }),
			"%d subscription(s) send through it",
			"point each at another adapter or a webhook (PATCH /api/v1/subscriptions/{subscriptionID}), or delete it")
	}
	if a.Category == adapters.CategoryIdentity {
		guards = append(guards, identity.Users.CheckTable(r.TableIndex(identity.Users)), identity.Groups.CheckTable(r.TableIndex(identity.Groups)))
		users, _ := identity.Users.List(r, raftstore.Query{Filter: func(v any) bool { return v.(*identity.User).Source == a.ID }})
		add("users", ids(users, func(u identity.User) string { return u.ID }),
			"%d account(s) come from it",
			"delete those accounts (DELETE /api/v1/users/{userID}) once nobody needs them")
		groups, _ := identity.Groups.List(r, raftstore.Query{Filter: func(v any) bool { return v.(*identity.Group).Source == a.ID }})
		add("groups", ids(groups, func(g identity.Group) string { return g.ID }),
			"%d group(s) come from it",
			"delete those groups (DELETE /api/v1/groups/{groupID})")
	}
	if a.Category != adapters.CategoryRuntime {
		return out, guards
	}
	guards = append(guards, scheduler.Releases.CheckTable(r.TableIndex(scheduler.Releases)),
		scheduler.Deployments.CheckTable(r.TableIndex(scheduler.Deployments)),
		apps.Apps.CheckTable(r.TableIndex(apps.Apps)), adapters.Adapters.CheckTable(r.TableIndex(adapters.Adapters)))

	rels, _ := scheduler.Releases.List(r, raftstore.Query{Filter: func(v any) bool { return v.(*scheduler.Release).Runtime == a.ID }})
	add("releases", ids(rels, func(rel scheduler.Release) string { return rel.AppID }),
		"%d app(s) run on it (their release)",
		"deploy each app on another runtime (runtime.adapter in its spec, or the primary runtime), or delete it")

	active, _ := scheduler.Deployments.List(r, raftstore.Query{Index: "active", Prefix: true,
		Filter: func(v any) bool { return v.(*scheduler.Deployment).Runtime == a.ID }})
	add("deployments", ids(active, func(d scheduler.Deployment) string { return d.ID }),
		"%d deploy(s) on it are under way",
		"wait for them to finish, or reject those waiting for approval")

	lastOfKind := len(sameKind(r, a)) == 0
	pinned, _ := apps.Apps.List(r, raftstore.Query{Filter: func(v any) bool { return v.(*apps.App).Pinned != nil }})
	add("specs", ids(slices.DeleteFunc(pinned, func(it raftstore.Item[apps.App]) bool { return !names(r, it.Value, a, lastOfKind) }),
		func(app apps.App) string { return app.ID }),
		"the pinned spec of %d app(s) names it in runtime.adapter",
		"pin a spec revision whose runtime.adapter names another runtime, or none")
	return out, guards
}

// ids returns each item's ID as id says it.
func ids[T any](items []raftstore.Item[T], id func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = id(it.Value)
	}
	return out
}

// sameKind lists the other stored adapters of a's category and kind.
func sameKind(r *raftstore.Reader, a adapters.Adapter) []raftstore.Item[adapters.Adapter] {
	items, _ := adapters.Adapters.List(r, raftstore.Query{Index: "category", Key: a.Category, Filter: func(v any) bool {
		o := v.(*adapters.Adapter)
		return o.Kind == a.Kind && o.ID != a.ID
	}})
	return items
}

// names says whether the app's pinned spec names a as its runtime: by ID,
// or by kind when a is the last adapter of its kind. A revision that does
// not read (it cannot: revisions are validated when written) names nothing.
func names(r *raftstore.Reader, app apps.App, a adapters.Adapter, lastOfKind bool) bool {
	rev, _, ok := spec.Revisions.Get(r, app.Pinned.SpecID)
	if !ok {
		return false
	}
	d, err := rev.Spec()
	if err != nil || d.Runtime == nil {
		return false
	}
	return d.Runtime.Adapter == a.ID || (lastOfKind && d.Runtime.Adapter == a.Kind)
}
