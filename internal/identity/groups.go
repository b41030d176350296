package identity

import (
	"context"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// MaxGroupMembers bounds a group's member list.
const MaxGroupMembers = 10_000

func checkName(field, n string) error {
	if n == "" || utf8.RuneCountInString(n) > 100 || !utf8.ValidString(n) || strings.TrimSpace(n) != n || strings.IndexFunc(n, unicode.IsControl) >= 0 {
		return errcode.Invalid(field, "a name is 1 to 100 characters, without control characters or surrounding spaces")
	}
	return nil
}

// Groups lists groups by ID after the cursor.
func (s *Service) Groups(after string, limit int) ([]Group, bool) {
	items, more := Groups.List(s.d.Store.Read(), raftstore.Query{After: after, Limit: limit})
	out := make([]Group, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out, more
}

// CreateGroup creates an empty group of our own.
func (s *Service) CreateGroup(ctx context.Context, name string) (Group, error) {
	if err := checkName("name", name); err != nil {
		return Group{}, err
	}
	now := s.now()
	g := Group{ID: ids.New(ids.Group), Name: name, Source: SourceLocal, MemberIDs: []string{}, CreatedAt: now}
	err := s.update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) {
		return []raftstore.Op{
			Groups.Insert(&g),
			audit.Record(ctx, now, "group.create", "", audit.Target{Kind: "group", ID: g.ID}, map[string]any{"name": name}),
		}, nil
	})
	return g, err
}

// changeGroup applies fn to a group and writes it with its audit entry and
// events. The store refuses a change that would leave nobody able to manage
// accounts.
//
// fn may run several times, each on a newer view (see raftstore.Build): it
// must have no side effects but on g and details.
func (s *Service) changeGroup(ctx context.Context, id, action string, details map[string]any, fn func(r *raftstore.Reader, g *Group) ([]*events.Event, error)) (Group, error) {
	var out Group
	err := s.update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		g, meta, ok := Groups.Get(r, id)
		if !ok {
			return nil, errcode.New(errcode.NotFound, "no group %s", id)
		}
		g.MemberIDs = slices.Clone(g.MemberIDs)
		evs, err := fn(r, &g)
		if err != nil {
			return nil, err
		}
		out = g
		ops := []raftstore.Op{
			Groups.PutIf(&g, meta.ModifyIndex),
			audit.Record(ctx, s.now(), action, "", audit.Target{Kind: "group", ID: id}, details),
		}
		for _, ev := range evs {
			ops = append(ops, events.Insert(ev))
		}
		// The members must exist when the write commits.
		for _, m := range g.MemberIDs {
			if _, mm, ok := Users.Get(r, m); ok {
				ops = append(ops, Users.Check(m, mm.ModifyIndex))
			}
		}
		return ops, nil
	})
	if err != nil {
		return Group{}, err
	}
	return out, nil
}

func (s *Service) checkMembers(r *raftstore.Reader, userIDs []string) ([]string, error) {
	if len(userIDs) > MaxGroupMembers {
		return nil, errcode.Invalid("user_ids", "a group has at most %d members", MaxGroupMembers)
	}
	seen := map[string]bool{}
	out := []string{}
	for _, id := range userIDs {
		if seen[id] {
			continue
		}
		if _, _, ok := Users.Get(r, id); !ok {
			return nil, errcode.Invalid("user_ids", "no account %s", id).WithDetail("user_id", id)
		}
		seen[id] = true
		out = append(out, id)
	}
	return out, nil
}

// SetMembers replaces a group's whole member list.
func (s *Service) SetMembers(ctx context.Context, id string, userIDs []string) (Group, error) {
	details := map[string]any{}
	return s.changeGroup(ctx, id, "group.members.set", details, func(r *raftstore.Reader, g *Group) ([]*events.Event, error) {
		members, err := s.checkMembers(r, userIDs)
		g.MemberIDs = members
		details["count"] = len(members)
		return nil, err
	})
}

// AddMember adds one account to a group.
func (s *Service) AddMember(ctx context.Context, id, userID string) (Group, error) {
	return s.changeGroup(ctx, id, "group.member.add", map[string]any{"user_id": userID}, func(r *raftstore.Reader, g *Group) ([]*events.Event, error) {
		if slices.Contains(g.MemberIDs, userID) {
			return nil, nil
		}
		if _, err := s.checkMembers(r, []string{userID}); err != nil {
			return nil, errcode.New(errcode.NotFound, "no account %s", userID)
		}
		g.MemberIDs = append(g.MemberIDs, userID)
		return nil, nil
	})
}

// RemoveMember removes one account from a group; refused when nobody would
// remain able to manage accounts.
func (s *Service) RemoveMember(ctx context.Context, id, userID string) (Group, error) {
	return s.changeGroup(ctx, id, "group.member.remove", map[string]any{"user_id": userID}, func(_ *raftstore.Reader, g *Group) ([]*events.Event, error) {
		i := slices.Index(g.MemberIDs, userID)
		if i < 0 {
			return nil, errcode.New(errcode.NotFound, "account %s is not a member of group %s", userID, id)
		}
		g.MemberIDs = slices.Delete(g.MemberIDs, i, i+1)
		return nil, nil
	})
}

// SetGroupRole gives every member of a group an installation role (or, with
// roleID nil, removes it; refused when nobody would remain able to manage
// accounts).
func (s *Service) SetGroupRole(ctx context.Context, id string, roleID *string) (Group, error) {
	action := "group.role.set"
	if roleID == nil {
		action = "group.role.remove"
	}
	return s.changeGroup(ctx, id, action, map[string]any{"role_id": deref0(roleID)}, func(r *raftstore.Reader, g *Group) ([]*events.Event, error) {
		if err := checkInstallRole(r, roleID); err != nil {
			return nil, err
		}
		old := g.RoleID
		g.RoleID = roleID
		now := s.now()
		switch {
		case ptrEq(old, roleID):
			return nil, nil
		case old == nil:
			return []*events.Event{events.New(ctx, now, "grant.created", nil, "group", id, map[string]any{
				"plane": PlaneControl, "role_id": *roleID, "principal_kind": "group", "principal_id": id, "passcode": false})}, nil
		case roleID == nil:
			return []*events.Event{events.New(ctx, now, "grant.deleted", nil, "group", id, map[string]any{"scope": "install"})}, nil
		default:
			return []*events.Event{events.New(ctx, now, "grant.role_changed", nil, "group", id, map[string]any{"role_id": *roleID})}, nil
		}
	})
}

// DeleteGroup deletes a group and everything shared with it; its members
// keep what they hold another way. Refused when nobody would remain able to
// manage accounts.
func (s *Service) DeleteGroup(ctx context.Context, id string) error {
	return s.update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		g, meta, ok := Groups.Get(r, id)
		if !ok {
			return nil, errcode.New(errcode.NotFound, "no group %s", id)
		}
		// A grant to the group given meanwhile has the change built again.
		ops := []raftstore.Op{Groups.DeleteIf(id, meta.ModifyIndex), Grants.CheckTable(r.TableIndex(Grants))}
		if g.RoleID != nil {
			ops = append(ops, grantDeleted(ctx, s.now(), "", "group", id))
		}
		grants := s.grantDeletes(ctx, r, "group", id)
		ops = append(ops, grants...)
		return append(ops, audit.Record(ctx, s.now(), "group.delete", "", audit.Target{Kind: "group", ID: id}, map[string]any{"name": g.Name, "grants_removed": len(grants) / 2})), nil
	})
}

// Roles lists roles of a scope ("install", "app", or "all"), built-in first,
// after the cursor (a role's ID; "" for the first page) and at most limit
// (0: all), and whether more follow.
func (s *Service) Roles(scope, after string, limit int) ([]authz.Role, bool, error) {
	if scope != string(authz.ScopeInstall) && scope != string(authz.ScopeApp) && scope != "all" {
		return nil, false, errcode.Invalid("scope", "scope is install, app or all")
	}
	keep := func(r authz.Role) bool { return scope == "all" || string(r.Scope) == scope }
	// The built-in roles first, in their order, then custom roles by ID:
	// after a built-in role, the built-in roles that follow it and every
	// custom role; after a custom role, the custom roles after it.
	out := []authz.Role{}
	customAfter := after
	if _, builtin := authz.BuiltinRole(after); builtin || after == "" {
		customAfter = ""
		passed := after == ""
		for _, r := range authz.BuiltinRoles() {
			if passed && keep(r) {
				out = append(out, r)
			}
			passed = passed || r.ID == after
		}
	}
	custom := func(limit int) ([]raftstore.Item[authz.Role], bool) {
		return Roles.List(s.d.Store.Read(), raftstore.Query{After: customAfter, Limit: limit,
			Filter: func(v any) bool { return keep(*v.(*authz.Role)) }})
	}
	if limit > 0 && len(out) >= limit {
		next, _ := custom(1)
		return out[:limit], len(out) > limit || len(next) > 0, nil
	}
	rest := 0
	if limit > 0 {
		rest = limit - len(out)
	}
	items, more := custom(rest)
	for _, it := range items {
		out = append(out, it.Value)
	}
	return out, more, nil
}

// CreateRole composes a custom role from verbs.
func (s *Service) CreateRole(ctx context.Context, name string, scope authz.Scope, verbs []authz.Verb) (authz.Role, error) {
	if err := checkName("name", name); err != nil {
		return authz.Role{}, err
	}
	if scope != authz.ScopeInstall && scope != authz.ScopeApp {
		return authz.Role{}, errcode.Invalid("scope", "scope is install or app")
	}
	for _, b := range authz.BuiltinRoles() {
		if strings.EqualFold(b.Name, name) {
			return authz.Role{}, taken("name", "a built-in role has that name")
		}
	}
	if len(verbs) == 0 {
		return authz.Role{}, errcode.Invalid("verbs", "a role holds at least one verb")
	}
	seen := map[authz.Verb]bool{}
	var vs []authz.Verb
	for _, v := range verbs {
		if !authz.Known(v) {
			return authz.Role{}, errcode.Invalid("verbs", "unknown verb %q", v)
		}
		if !seen[v] {
			seen[v] = true
			vs = append(vs, v)
		}
	}
	if v, ok := authz.ValidVerbsForScope(scope, vs); !ok {
		return authz.Role{}, errcode.Invalid("verbs", "a role of scope %s cannot hold %s", scope, v)
	}
	role := authz.Role{ID: ids.New(ids.Role), Name: name, Scope: scope, Verbs: vs}
	err := s.update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) {
		return []raftstore.Op{
			Roles.Insert(&role),
			audit.Record(ctx, s.now(), "role.create", "", audit.Target{Kind: "role", ID: role.ID}, map[string]any{"name": name, "scope": scope, "verbs": vs}),
		}, nil
	})
	return role, err
}

// DeleteRole deletes a custom role and every grant of it: from accounts,
// groups and app grants. Built-in roles cannot be deleted. Refused when
// nobody would remain able to manage accounts.
func (s *Service) DeleteRole(ctx context.Context, id string) error {
	if _, builtin := authz.BuiltinRole(id); builtin {
		return errcode.New(errcode.StateInvalid, "built-in roles cannot be deleted").WithDetail("protected", id)
	}
	return s.update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) { return s.roleDeletion(ctx, r, id) })
}

// roleDeletion builds DeleteRole's change on the view r.
func (s *Service) roleDeletion(ctx context.Context, r *raftstore.Reader, id string) ([]raftstore.Op, error) {
	role, meta, ok := Roles.Get(r, id)
	if !ok {
		return nil, errcode.New(errcode.NotFound, "no role %s", id)
	}
	// The role is taken from the accounts, groups and grants of r: one given
	// meanwhile has the change built again (validateRole is the guard).
	ops := []raftstore.Op{Roles.DeleteIf(id, meta.ModifyIndex),
		Users.CheckTable(r.TableIndex(Users)), Groups.CheckTable(r.TableIndex(Groups)), Grants.CheckTable(r.TableIndex(Grants))}
	now := s.now()
	users, _ := Users.List(r, raftstore.Query{Index: "role", Key: id})
	for _, u := range users {
		uv := u.Value
		uv.RoleID = nil
		ops = append(ops, Users.PutIf(&uv, u.Meta.ModifyIndex), grantDeleted(ctx, now, "", "user", uv.ID))
	}
	groups, _ := Groups.List(r, raftstore.Query{Index: "role", Key: id})
	for _, g := range groups {
		gv := g.Value
		gv.RoleID = nil
		ops = append(ops, Groups.PutIf(&gv, g.Meta.ModifyIndex), grantDeleted(ctx, now, "", "group", gv.ID))
	}
	grants, _ := Grants.List(r, raftstore.Query{Index: "role", Key: id})
	for _, g := range grants {
		ops = append(ops, Grants.Delete(g.Value.ID), grantDeleted(ctx, now, g.Value.AppID, "grant", g.Value.ID))
	}
	ops = append(ops, audit.Record(ctx, s.now(), "role.delete", "", audit.Target{Kind: "role", ID: id}, map[string]any{
		"name": role.Name, "accounts": len(users), "groups": len(groups), "grants": len(grants)}))
	return ops, nil
}
