package identity

import (
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/raftstore"
)

// OpenGrant says how a principal may open an app (the data plane): through
// a grant to it, its account, one of the account's groups, or everyone
// (principal kind anonymous; Passcode says the grant asks for one).
type OpenGrant struct {
	Grant    Grant
	Everyone bool
}

// OpenGrants returns the data-plane grants on an app that reach the
// principal: to its account (also for a delegated token acting for it) and
// the account's groups, to a service token itself, and the grant to
// everyone. No installation role implies opening an app.
func OpenGrants(r *raftstore.Reader, appID string, p authz.Principal) []OpenGrant {
	reach := map[string]bool{}
	if p.UserID != "" {
		u, _, ok := Users.Get(r, p.UserID)
		if ok && u.Status == StatusActive {
			reach[raftstore.Key(authz.KindUser, p.UserID)] = true
			for _, g := range (facts{r: r}).groupsOf(p.UserID) {
				reach[raftstore.Key("group", g.ID)] = true
			}
		}
	} else if p.Kind == authz.KindToken {
		reach[raftstore.Key(authz.KindToken, p.ID)] = true
	}
	var out []OpenGrant
	items, _ := Grants.List(r, raftstore.Query{Index: "app", Key: appID})
	for _, it := range items {
		g := it.Value
		if g.Plane != PlaneData {
			continue
		}
		if g.PrincipalKind == authz.KindAnonymous {
			out = append(out, OpenGrant{Grant: g, Everyone: true})
		} else if reach[raftstore.Key(g.PrincipalKind, g.PrincipalID)] {
			out = append(out, OpenGrant{Grant: g})
		}
	}
	return out
}

// CanOpen reports whether a signed-in principal holds a data-plane grant on
// the app that admits it without a passcode (a grant to everyone with a
// passcode needs the passcode, which the edge checks).
func CanOpen(r *raftstore.Reader, appID string, p authz.Principal) bool {
	for _, g := range OpenGrants(r, appID, p) {
		if !g.Everyone || !g.Grant.Passcode {
			return true
		}
	}
	return false
}
