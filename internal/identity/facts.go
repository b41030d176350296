package identity

import (
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/raftstore"
)

// facts answers the authorization engine's questions from one read view of
// the store.
type facts struct{ r *raftstore.Reader }

var _ authz.Facts = facts{}

// FactsOf returns the authorization facts of a read view.
func FactsOf(r *raftstore.Reader) authz.Facts { return facts{r: r} }

func (f facts) Role(id string) (authz.Role, bool) {
	if r, ok := authz.BuiltinRole(id); ok {
		return r, true
	}
	r, _, ok := Roles.Get(f.r, id)
	return r, ok
}

// InstallRoles returns the installation roles of an active account: its own
// and its groups'. A suspended or missing account holds none.
func (f facts) InstallRoles(userID string) []string {
	u, _, ok := Users.Get(f.r, userID)
	if !ok || u.Status != StatusActive {
		return nil
	}
	var ids []string
	if u.RoleID != nil {
		ids = append(ids, *u.RoleID)
	}
	for _, g := range f.groupsOf(userID) {
		if g.RoleID != nil {
			ids = append(ids, *g.RoleID)
		}
	}
	return ids
}

func (f facts) groupsOf(userID string) []Group {
	items, _ := Groups.List(f.r, raftstore.Query{Index: "member", Key: userID})
	out := make([]Group, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out
}

// GroupNames returns the names of the groups an account is a member of in
// the view r, by group ID: what the edge tells an app of a person's groups.
func GroupNames(r *raftstore.Reader, userID string) []string {
	groups := facts{r: r}.groupsOf(userID)
	out := make([]string, len(groups))
	for i, g := range groups {
		out[i] = g.Name
	}
	return out
}

// AppRoles returns the roles of the control-plane grants on an app that reach
// the principal: grants to its account and the account's groups (a user, or
// a delegated token acting for one), or to the token itself (a service
// token).
func (f facts) AppRoles(appID string, p authz.Principal) []string {
	reach := map[string]bool{}
	if p.UserID != "" {
		u, _, ok := Users.Get(f.r, p.UserID)
		if !ok || u.Status != StatusActive {
			return nil
		}
		reach[raftstore.Key(authz.KindUser, p.UserID)] = true
		for _, g := range f.groupsOf(p.UserID) {
			reach[raftstore.Key("group", g.ID)] = true
		}
	} else if p.Kind == authz.KindToken {
		reach[raftstore.Key(authz.KindToken, p.ID)] = true
	}
	var ids []string
	items, _ := Grants.List(f.r, raftstore.Query{Index: "app", Key: appID})
	for _, it := range items {
		g := it.Value
		if g.Plane == PlaneControl && g.RoleID != nil && reach[raftstore.Key(g.PrincipalKind, g.PrincipalID)] {
			ids = append(ids, *g.RoleID)
		}
	}
	return ids
}
