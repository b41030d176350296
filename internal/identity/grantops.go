package identity

import (
	"time"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// Op builders for the grants an app's lifecycle writes: the apps package
// creates an app with its creator's grants and deletes it with every grant
// on it, in one write, through these (only this package writes Grants).

// CreatorGrantOps returns the operations that give an app's creator (the
// principal of kind kind, an account or a service token) the owner role on
// the control plane, to manage the app, and a data-plane grant, to open it.
func CreatorGrantOps(appID, kind, principalID string, now time.Time) []raftstore.Op {
	owner := authz.RoleOwner
	return []raftstore.Op{
		Grants.Insert(&Grant{ID: ids.NewAt(ids.Grant, now), AppID: appID, Plane: PlaneControl,
			PrincipalKind: kind, PrincipalID: principalID, RoleID: &owner, CreatedAt: now}),
		Grants.Insert(&Grant{ID: ids.NewAt(ids.Grant, now), AppID: appID, Plane: PlaneData,
			PrincipalKind: kind, PrincipalID: principalID, CreatedAt: now}),
	}
}

// AppGrantsDeleteOps returns the operations that delete every grant on an
// app as r has them, each only if unchanged since (a grant written
// meanwhile makes the write read again).
func AppGrantsDeleteOps(r *raftstore.Reader, appID string) []raftstore.Op {
	grants, _ := Grants.List(r, raftstore.Query{Index: "app", Key: appID})
	ops := make([]raftstore.Op, len(grants))
	for i, g := range grants {
		ops[i] = Grants.DeleteIf(g.Value.ID, g.Meta.ModifyIndex)
	}
	return ops
}
