package identity

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/raftstore"
)

// Sealer seals and opens values with the keyring (the keys admission
// cookies are signed with). Once Ready has returned, Seal writes nothing,
// so a store Update's build may call it.
type Sealer interface {
	Ready(ctx context.Context) error
	Seal(ctx context.Context, plaintext, aad []byte) ([]byte, error)
	Open(sealed, aad []byte) ([]byte, error)
}

// AppFinder finds an app by ID in a read view. This package cannot import
// the apps package (which imports it), so the composition root adapts it.
type AppFinder interface {
	FindApp(r *raftstore.Reader, id string) (events.AppRef, bool)
}

// AppFinderFunc adapts a function to AppFinder.
type AppFinderFunc func(r *raftstore.Reader, id string) (events.AppRef, bool)

var _ AppFinder = AppFinderFunc(nil)

// FindApp calls f.
func (f AppFinderFunc) FindApp(r *raftstore.Reader, id string) (events.AppRef, bool) { return f(r, id) }

// SharingDeps are the sharing service's collaborators.
type SharingDeps struct {
	Store  Store
	Hasher Hasher
	Policy PolicySource
	Ring   Sealer
	Apps   AppFinder
	// ClientLimit counts wrong passcodes per app and client address;
	// AppLimit per app whatever the address, so that many addresses
	// cannot guess together without end, except from the addresses
	// KnownClients remembers entering the right passcode. All three are
	// required.
	ClientLimit, AppLimit Limiter
	KnownClients          KnownClients
	Now                   func() time.Time
	Logger                *slog.Logger
}

// Sharing manages the grants that share apps: who may open an app (the
// data plane) and who may manage it (the control plane, with an app role),
// the grant to everyone and its passcode, the admissions a correct passcode
// gives (passcode.go), and the apps an account or a group has something on.
//
// Rules it keeps (the specification leaves them open):
//   - one grant per app, plane and principal: a second is refused
//     (STATE_INVALID naming the first); a role is changed with PATCH;
//   - a user must be active, a token a service token (a delegated token
//     acts as its owner: share with the account), and a group must exist;
//   - no escalation: a caller gives, changes or removes only roles whose
//     verbs it holds on the app itself (host policy's floor aside);
//   - an app is not left with no management grant holding
//     app.grants.manage, unless the caller holds that verb through its
//     installation role (an administrator, who can always share the app
//     again): refused STATE_INVALID;
//   - the grant to everyone is on the data plane only, takes no role, and
//     obeys host policy's public_sharing.
type Sharing struct {
	d SharingDeps
	// keys caches the admission keys opened, by grant and generation.
	keys sync.Map
}

// NewSharing returns the sharing service. It panics without the
// limiters, which nothing may run without.
func NewSharing(d SharingDeps) *Sharing {
	if d.ClientLimit == nil || d.AppLimit == nil || d.KnownClients == nil {
		panic("identity: SharingDeps needs ClientLimit, AppLimit and KnownClients")
	}
	if d.Now == nil {
		d.Now = func() time.Time { return time.Now().UTC() }
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sharing{d: d}
}

func (s *Sharing) now() time.Time { return s.d.Now().UTC() }

// GrantInfo is a grant as the API shows it: never the passcode's hash or
// key. PrincipalID is null for the grant to everyone.
type GrantInfo struct {
	ID            string    `json:"id"`
	AppID         string    `json:"app_id"`
	Plane         string    `json:"plane"`
	PrincipalKind string    `json:"principal_kind"`
	PrincipalID   *string   `json:"principal_id"`
	RoleID        *string   `json:"role_id"`
	Passcode      bool      `json:"passcode"`
	CreatedAt     time.Time `json:"created_at"`
}

// Info returns what the API shows of a grant.
func (g Grant) Info() GrantInfo {
	gi := GrantInfo{ID: g.ID, AppID: g.AppID, Plane: g.Plane, PrincipalKind: g.PrincipalKind, RoleID: g.RoleID,
		Passcode: g.Passcode, CreatedAt: g.CreatedAt}
	if g.PrincipalID != "" {
		id := g.PrincipalID
		gi.PrincipalID = &id
	}
	return gi
}

// AppGrants are an app's grants: who can reach it (access, the data plane)
// and who can administer it (management, the control plane).
type AppGrants struct {
	Access     []GrantInfo `json:"access"`
	Management []GrantInfo `json:"management"`
}

// Grants lists an app's grants, oldest first.
func (s *Sharing) Grants(appID string) (AppGrants, error) {
	r := s.d.Store.Read()
	if _, ok := s.d.Apps.FindApp(r, appID); !ok {
		return AppGrants{}, noApp(appID)
	}
	out := AppGrants{Access: []GrantInfo{}, Management: []GrantInfo{}}
	for _, g := range appGrants(r, appID) {
		if g.Plane == PlaneControl {
			out.Management = append(out.Management, g.Info())
		} else {
			out.Access = append(out.Access, g.Info())
		}
	}
	return out, nil
}

func noApp(id string) *errcode.Error { return errcode.New(errcode.NotFound, "no app %s", id) }

func noGrant(appID, id string) *errcode.Error {
	return errcode.New(errcode.NotFound, "no grant %s on app %s", id, appID)
}

// appGrants returns an app's grants, oldest first.
func appGrants(r *raftstore.Reader, appID string) []Grant {
	items, _ := Grants.List(r, raftstore.Query{Index: "app", Key: appID})
	out := make([]Grant, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	slices.SortFunc(out, func(a, b Grant) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return out
}

// NewGrant is a grant to give. PrincipalID is empty for the grant to
// everyone; RoleID is for the control plane only; Passcode (empty: none)
// for the grant to everyone only.
type NewGrant struct {
	Plane         string
	PrincipalKind string
	PrincipalID   string
	RoleID        *string
	Passcode      *string
}

// checkShape validates what a new grant says, before anything is read.
func (n NewGrant) checkShape() error {
	if n.Plane != PlaneControl && n.Plane != PlaneData {
		return errcode.Invalid("plane", "plane is control (managing the app, with role_id) or data (opening it)")
	}
	switch n.PrincipalKind {
	case authz.KindUser, "group", authz.KindToken:
		if n.PrincipalID == "" {
			return errcode.Invalid("principal_id", "principal_id is required for principal_kind %s", n.PrincipalKind)
		}
	case authz.KindAnonymous:
		if n.PrincipalID != "" {
			return errcode.Invalid("principal_id", "the grant to everyone (principal_kind anonymous) names no principal_id")
		}
		if n.Plane != PlaneData {
			return errcode.Invalid("plane", "the grant to everyone opens the app: it is on the data plane only")
		}
	default:
		return errcode.Invalid("principal_kind", "principal_kind is user, group, token or anonymous")
	}
	switch {
	case n.Plane == PlaneControl && (n.RoleID == nil || *n.RoleID == ""):
		return errcode.Invalid("role_id", "a management grant (plane control) needs role_id: role_owner, role_developer, role_viewer or a custom app role")
	case n.Plane == PlaneData && n.RoleID != nil:
		return errcode.Invalid("role_id", "role_id applies to management grants (plane control) only; a data-plane grant opens the app")
	case n.Passcode != nil && *n.Passcode != "" && n.PrincipalKind != authz.KindAnonymous:
		return errcode.Invalid("passcode", "only the grant to everyone (principal_kind anonymous) takes a passcode")
	}
	if n.Passcode != nil && *n.Passcode != "" {
		return checkPasscode(*n.Passcode)
	}
	return nil
}

// anonymousAllowed applies host policy's public_sharing to the grant to
// everyone, with or without a passcode.
func anonymousAllowed(p policy.Policy, withPasscode bool) error {
	switch p.EffectivePublicSharing() {
	case policy.SharingNone:
		return errcode.New(errcode.PolicyAnonymousGrant, "host policy forbids sharing apps with everyone (public_sharing none)").
			WithRemedy("share with users, groups or tokens; an administrator can change public_sharing in the host policy")
	case policy.SharingPasscodeOnly:
		if !withPasscode {
			return errcode.New(errcode.PolicyAnonymousGrant, "host policy allows sharing with everyone only behind a passcode (public_sharing passcode_only)").
				WithRemedy("give a passcode").WithDetail("field", "passcode")
		}
	}
	return nil
}

// CreateGrant shares an app with a principal: with a role on the control
// plane, or to open it on the data plane (the grant to everyone, with an
// optional passcode, where host policy allows it). It is written with its
// audit entry and grant.created.
func (s *Sharing) CreateGrant(ctx context.Context, c authz.Caller, appID string, n NewGrant) (GrantInfo, error) {
	if err := n.checkShape(); err != nil {
		return GrantInfo{}, err
	}
	code := ""
	if n.Passcode != nil {
		code = *n.Passcode
	}
	if n.PrincipalKind == authz.KindAnonymous {
		if err := anonymousAllowed(s.d.Policy.Current(), code != ""); err != nil {
			return GrantInfo{}, err
		}
	}
	now := s.now()
	g := Grant{ID: ids.NewAt(ids.Grant, now), AppID: appID, Plane: n.Plane, PrincipalKind: n.PrincipalKind,
		PrincipalID: n.PrincipalID, RoleID: n.RoleID, CreatedAt: now}
	if code != "" {
		if err := s.setPasscode(ctx, &g, code); err != nil {
			return GrantInfo{}, err
		}
	}
	err := update(ctx, s.d.Store, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		app, ok := s.d.Apps.FindApp(r, appID)
		if !ok {
			return nil, noApp(appID)
		}
		ops, err := principalChecks(r, n.PrincipalKind, n.PrincipalID)
		if err != nil {
			return nil, err
		}
		if n.RoleID != nil {
			role, check, err := appRole(r, *n.RoleID)
			if err != nil {
				return nil, err
			}
			if err := grantable(r, c, appID, role); err != nil {
				return nil, err
			}
			ops = append(ops, check...)
		}
		for _, o := range appGrants(r, appID) {
			if o.Plane == n.Plane && o.PrincipalKind == n.PrincipalKind && o.PrincipalID == n.PrincipalID {
				return nil, errcode.New(errcode.StateInvalid, "the app already has this grant (%s)", o.ID).
					WithDetail("grant_id", o.ID).WithRemedy("change its role or passcode with PATCH, or delete it first")
			}
		}
		details := map[string]any{"plane": g.Plane, "principal_kind": g.PrincipalKind, "principal_id": nilIfEmpty(g.PrincipalID),
			"role_id": deref0(g.RoleID), "passcode": g.Passcode}
		return append(ops,
			Grants.Insert(&g),
			Grants.CheckTable(r.TableIndex(Grants)),
			audit.Record(ctx, now, "grant.create", appID, audit.Target{Kind: "grant", ID: g.ID}, details),
			events.Emit(ctx, now, "grant.created", &app, "grant", g.ID, details),
		), nil
	})
	if err != nil {
		return GrantInfo{}, err
	}
	return g.Info(), nil
}

// GrantPatch is a change to a grant: a management grant's role, or the
// passcode of the grant to everyone ("" removes it). Nil means unchanged.
type GrantPatch struct {
	RoleID   *string
	Passcode *string
}

// UpdateGrant changes a management grant's role in one write
// (grant.role_changed), or sets the passcode of the grant to everyone: a
// new passcode is a new generation, so everyone admitted by the old one
// must enter the new one; "" removes it where host policy allows. A change
// to what the grant already says writes nothing.
func (s *Sharing) UpdateGrant(ctx context.Context, c authz.Caller, appID, grantID string, p GrantPatch) (GrantInfo, error) {
	if p.RoleID == nil && p.Passcode == nil {
		return GrantInfo{}, errcode.Invalid("", "nothing to change: give role_id (a management grant) or passcode (the grant to everyone)")
	}
	if p.RoleID != nil && *p.RoleID == "" {
		return GrantInfo{}, errcode.Invalid("role_id", "role_id cannot be empty; delete the grant to take it away")
	}
	// A new passcode is hashed, and the key of its generation drawn, once
	// before the write; the key is sealed in the build, for the generation
	// the grant then has (Ready first, so that sealing writes nothing).
	hash, key := "", []byte(nil)
	if p.Passcode != nil && *p.Passcode != "" {
		if err := checkPasscode(*p.Passcode); err != nil {
			return GrantInfo{}, err
		}
		if err := s.d.Ring.Ready(ctx); err != nil {
			return GrantInfo{}, fmt.Errorf("seal the admission key: %w", err)
		}
		h, err := s.d.Hasher.Hash(ctx, *p.Passcode)
		if err != nil {
			return GrantInfo{}, fmt.Errorf("hash passcode: %w", err)
		}
		hash, key = h, newKey()
	}
	var out Grant
	err := update(ctx, s.d.Store, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		g, meta, ok := Grants.Get(r, grantID)
		if !ok || g.AppID != appID {
			return nil, noGrant(appID, grantID)
		}
		app, ok := s.d.Apps.FindApp(r, appID)
		if !ok {
			return nil, noApp(appID)
		}
		out = g
		now := s.now()
		var ops []raftstore.Op
		details := map[string]any{}
		var ev *events.Event
		if p.RoleID != nil {
			if g.Plane != PlaneControl {
				return nil, errcode.Invalid("role_id", "role_id applies to management grants (plane control) only")
			}
			if g.RoleID == nil || *g.RoleID != *p.RoleID {
				role, check, err := appRole(r, *p.RoleID)
				if err != nil {
					return nil, err
				}
				if err := grantable(r, c, appID, role); err != nil {
					return nil, err
				}
				if err := s.currentGrantable(r, c, g); err != nil {
					return nil, err
				}
				if !slices.Contains(role.Verbs, authz.AppGrantsMgmt) {
					if err := s.keepsAManager(r, c, appID, g.ID); err != nil {
						return nil, err
					}
				}
				details["role_id"], details["previous_role_id"] = role.ID, deref0(g.RoleID)
				id := role.ID
				out.RoleID = &id
				ops = append(ops, check...)
				ev = events.New(ctx, now, "grant.role_changed", &app, "grant", g.ID, map[string]any{"role_id": role.ID})
			}
		}
		if p.Passcode != nil {
			if g.PrincipalKind != authz.KindAnonymous {
				return nil, errcode.Invalid("passcode", "only the grant to everyone (principal_kind anonymous) takes a passcode")
			}
			if err := anonymousAllowed(s.d.Policy.Current(), *p.Passcode != ""); err != nil {
				return nil, err
			}
			switch {
			case *p.Passcode == "" && g.Passcode:
				out.Passcode, out.PasscodeHash, out.PasscodeKey = false, "", nil
				details["passcode"] = "removed"
			case *p.Passcode != "":
				if err := s.sealNewKey(ctx, &out, key); err != nil {
					return nil, err
				}
				out.Passcode, out.PasscodeHash = true, hash
				details["passcode"], details["passcode_generation"] = "set", out.PasscodeGeneration
			}
		}
		if len(details) == 0 {
			return nil, nil // nothing changes
		}
		out.UpdatedAt = &now
		ops = append(ops,
			Grants.PutIf(&out, meta.ModifyIndex),
			Grants.CheckTable(r.TableIndex(Grants)),
			audit.Record(ctx, now, "grant.update", appID, audit.Target{Kind: "grant", ID: g.ID}, details),
		)
		if ev != nil {
			ops = append(ops, events.Insert(ev))
		}
		return ops, nil
	})
	if err != nil {
		return GrantInfo{}, err
	}
	return out.Info(), nil
}

// DeleteGrant removes a grant (the grant to everyone and its passcode
// included), with its audit entry and grant.deleted.
func (s *Sharing) DeleteGrant(ctx context.Context, c authz.Caller, appID, grantID string) error {
	return update(ctx, s.d.Store, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		g, meta, ok := Grants.Get(r, grantID)
		if !ok || g.AppID != appID {
			return nil, noGrant(appID, grantID)
		}
		app, ok := s.d.Apps.FindApp(r, appID)
		if !ok {
			app = events.AppRef{ID: appID}
		}
		if g.Plane == PlaneControl && g.RoleID != nil {
			if err := s.currentGrantable(r, c, g); err != nil {
				return nil, err
			}
			if err := s.keepsAManager(r, c, appID, g.ID); err != nil {
				return nil, err
			}
		}
		now := s.now()
		details := map[string]any{"plane": g.Plane, "principal_kind": g.PrincipalKind, "principal_id": nilIfEmpty(g.PrincipalID),
			"role_id": deref0(g.RoleID), "passcode": g.Passcode}
		return []raftstore.Op{
			Grants.DeleteIf(g.ID, meta.ModifyIndex),
			Grants.CheckTable(r.TableIndex(Grants)),
			audit.Record(ctx, now, "grant.delete", appID, audit.Target{Kind: "grant", ID: g.ID}, details),
			events.Emit(ctx, now, "grant.deleted", &app, "grant", g.ID, map[string]any{"scope": "app"}),
		}, nil
	})
}

// principalChecks checks that a grant's principal exists and may be shared
// with, and returns the preconditions that keep it so until the write.
func principalChecks(r *raftstore.Reader, kind, id string) ([]raftstore.Op, error) {
	switch kind {
	case authz.KindUser:
		u, meta, ok := Users.Get(r, id)
		if !ok {
			return nil, errcode.Invalid("principal_id", "no account %s", id)
		}
		if u.Status != StatusActive {
			return nil, errcode.New(errcode.StateInvalid, "account %s is suspended; share with an active account", id).WithDetail("field", "principal_id")
		}
		return []raftstore.Op{Users.Check(id, meta.ModifyIndex)}, nil
	case "group":
		_, meta, ok := Groups.Get(r, id)
		if !ok {
			return nil, errcode.Invalid("principal_id", "no group %s", id)
		}
		return []raftstore.Op{Groups.Check(id, meta.ModifyIndex)}, nil
	case authz.KindToken:
		t, meta, ok := Tokens.Get(r, id)
		if !ok {
			return nil, errcode.Invalid("principal_id", "no token %s", id)
		}
		if t.Kind != TokenService {
			return nil, errcode.Invalid("principal_id", "token %s is a delegated token, which acts as its owner with the owner's grants: share with the owner's account", id)
		}
		return []raftstore.Op{Tokens.Check(id, meta.ModifyIndex)}, nil
	}
	return nil, nil // anonymous
}

// appRole returns an app role to grant, and the precondition that keeps a
// custom one until the write.
func appRole(r *raftstore.Reader, id string) (authz.Role, []raftstore.Op, error) {
	role, ok := facts{r: r}.Role(id)
	if !ok {
		return authz.Role{}, nil, errcode.Invalid("role_id", "no role %s", id)
	}
	if role.Scope != authz.ScopeApp {
		return authz.Role{}, nil, errcode.Invalid("role_id", "%s is an installation role; a grant on an app takes an app role (role_owner, role_developer, role_viewer or a custom app role)", id)
	}
	if _, builtin := authz.BuiltinRole(id); builtin {
		return role, nil, nil
	}
	_, meta, _ := Roles.Get(r, id)
	return role, []raftstore.Op{Roles.Check(id, meta.ModifyIndex)}, nil
}

// grantable refuses a role holding verbs the caller does not hold on the
// app (host policy's floor aside: it limits using verbs, not sharing them).
func grantable(r *raftstore.Reader, c authz.Caller, appID string, role authz.Role) error {
	held := authz.AppVerbs(FactsOf(r), c.Principal, appID, authz.Floor{})
	var missing []string
	for _, v := range role.Verbs {
		if !held.Has(v) {
			missing = append(missing, string(v))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return errcode.New(errcode.PermDenied, "role %s holds verbs you do not hold on this app (%s): you can give, change or take away only roles within your own",
		role.ID, strings.Join(missing, ", ")).WithDetail("verbs", missing)
}

// currentGrantable refuses changing or removing a management grant whose
// role holds verbs the caller does not hold.
func (s *Sharing) currentGrantable(r *raftstore.Reader, c authz.Caller, g Grant) error {
	if g.RoleID == nil {
		return nil
	}
	role, ok := facts{r: r}.Role(*g.RoleID)
	if !ok {
		return nil // a role that no longer exists holds nothing
	}
	return grantable(r, c, g.AppID, role)
}

// keepsAManager refuses a change that would leave the app with no
// management grant (other than the one changed) whose role holds
// app.grants.manage, unless the caller holds that verb on every app through
// its installation role.
func (s *Sharing) keepsAManager(r *raftstore.Reader, c authz.Caller, appID, changed string) error {
	if c.Has(authz.AppGrantsMgmt) {
		return nil
	}
	f := facts{r: r}
	for _, g := range appGrants(r, appID) {
		if g.ID == changed || g.Plane != PlaneControl || g.RoleID == nil {
			continue
		}
		if role, ok := f.Role(*g.RoleID); ok && slices.Contains(role.Verbs, authz.AppGrantsMgmt) {
			return nil
		}
	}
	return errcode.New(errcode.StateInvalid, "this would leave nobody able to manage the app's sharing").
		WithDetail("protected", string(authz.AppGrantsMgmt)).
		WithRemedy("give another principal a role holding app.grants.manage (for example role_owner) first")
}

// Principal search.

// MaxPrincipalResults bounds each list of a principal search.
const MaxPrincipalResults = 20

// MaxPrincipalQuery bounds the query of a principal search, in characters.
const MaxPrincipalQuery = 100

// PrincipalUser is an account as a principal search shows it: never a hash.
type PrincipalUser struct {
	ID          string `json:"id"`
	Username    string `json:"username"`
	DisplayName string `json:"display_name"`
	Email       string `json:"email"`
}

// PrincipalGroup is a group as a principal search shows it.
type PrincipalGroup struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// PrincipalMatches are the users and groups a search found.
type PrincipalMatches struct {
	Users  []PrincipalUser  `json:"users"`
	Groups []PrincipalGroup `json:"groups"`
}

// Principals finds what an app can be shared with: active accounts whose
// username, display name or email contains q, and groups whose name does
// (case-insensitively), at most MaxPrincipalResults of each, by name. An
// empty q matches everything.
func (s *Sharing) Principals(appID, q string) (PrincipalMatches, error) {
	if !utf8.ValidString(q) || utf8.RuneCountInString(q) > MaxPrincipalQuery || strings.IndexFunc(q, unicode.IsControl) >= 0 {
		return PrincipalMatches{}, errcode.Invalid("q", "q is at most %d characters, without control characters", MaxPrincipalQuery)
	}
	r := s.d.Store.Read()
	if _, ok := s.d.Apps.FindApp(r, appID); !ok {
		return PrincipalMatches{}, noApp(appID)
	}
	q = strings.ToLower(strings.TrimSpace(q))
	out := PrincipalMatches{Users: []PrincipalUser{}, Groups: []PrincipalGroup{}}
	users, _ := Users.List(r, raftstore.Query{Filter: func(v any) bool {
		u := v.(*User)
		return u.Status == StatusActive && (strings.Contains(strings.ToLower(u.Username), q) ||
			strings.Contains(strings.ToLower(u.DisplayName), q) || strings.Contains(strings.ToLower(u.Email), q))
	}})
	for _, it := range users {
		u := it.Value
		out.Users = append(out.Users, PrincipalUser{ID: u.ID, Username: u.Username, DisplayName: u.DisplayName, Email: u.Email})
	}
	slices.SortFunc(out.Users, func(a, b PrincipalUser) int {
		return cmp.Or(strings.Compare(strings.ToLower(a.Username), strings.ToLower(b.Username)), strings.Compare(a.ID, b.ID))
	})
	out.Users = out.Users[:min(len(out.Users), MaxPrincipalResults)]
	groups, _ := Groups.List(r, raftstore.Query{Filter: func(v any) bool {
		return strings.Contains(strings.ToLower(v.(*Group).Name), q)
	}})
	for _, it := range groups {
		out.Groups = append(out.Groups, PrincipalGroup{ID: it.Value.ID, Name: it.Value.Name})
	}
	slices.SortFunc(out.Groups, func(a, b PrincipalGroup) int {
		return cmp.Or(strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)), strings.Compare(a.ID, b.ID))
	})
	out.Groups = out.Groups[:min(len(out.Groups), MaxPrincipalResults)]
	return out, nil
}

// What accounts and groups have on apps.

// Where an account's role on an app comes from.
const (
	ViaDirect = "direct"
	ViaGroup  = "group"
)

// AppAccess is what an account or a group has on one app: the strongest
// role its management grants give (RoleID, null for none; Via says whether
// a grant to the account itself or one to a group gives it, GroupID which
// group), whether it can open the app (CanOpen: a data-plane grant reaches
// it; for a group, one to the group), and whether it can manage it
// (CanManage: it holds some app verb on it, through its grants, its groups'
// or its installation role, after host policy's floor; for a group, its
// grant's role holds one).
type AppAccess struct {
	App       events.AppRef `json:"app"`
	RoleID    *string       `json:"role_id"`
	Via       *string       `json:"via"`
	GroupID   *string       `json:"group_id,omitempty"`
	CanOpen   bool          `json:"can_open"`
	CanManage bool          `json:"can_manage"`
}

// ListKey is an AppAccess's place in the lists UserApps and GroupApps
// answer (by app name, in any case, then by app ID), unique among them:
// the cursor of their pages.
func (a AppAccess) ListKey() string { return strings.ToLower(a.App.Name) + "\x00" + a.App.ID }

// floorOf is host policy's floor under decisions.
func floorOf(p policy.Policy) authz.Floor {
	conv := func(ss []string) []authz.Verb {
		out := make([]authz.Verb, len(ss))
		for i, v := range ss {
			out[i] = authz.Verb(v)
		}
		return out
	}
	return authz.Floor{Disabled: conv(p.DisabledVerbs), AgentDisabled: conv(p.AgentDisabledVerbs)}
}

// sees reports whether the caller can see an app: it holds a verb on it or
// may open it.
func sees(r *raftstore.Reader, c authz.Caller, floor authz.Floor, appID string) bool {
	return authz.AppVerbs(FactsOf(r), c.Principal, appID, floor) != 0 || CanOpen(r, appID, c.Principal)
}

// stronger reports whether role a gives more than role b: more verbs; on a
// tie a built-in role before a custom one (owner, developer, viewer), then
// by ID.
func stronger(f facts, a, b string) bool {
	ra, _ := f.Role(a)
	rb, _ := f.Role(b)
	if len(ra.Verbs) != len(rb.Verbs) {
		return len(ra.Verbs) > len(rb.Verbs)
	}
	rank := func(id string) int {
		return slices.Index([]string{authz.RoleViewer, authz.RoleDeveloper, authz.RoleOwner}, id)
	}
	if rank(a) != rank(b) {
		return rank(a) > rank(b)
	}
	return a < b
}

func sortAccess(out []AppAccess) {
	slices.SortFunc(out, func(a, b AppAccess) int { return strings.Compare(a.ListKey(), b.ListKey()) })
}

// UserApps lists the apps an account has a grant on (to itself or to one
// of its groups; the grant to everyone does not count), among those the
// caller can see. Anyone's needs install.view (PERM_VERB_REQUIRED without
// it, whether or not the account exists); one's own no verb.
func (s *Sharing) UserApps(c authz.Caller, userID string) ([]AppAccess, error) {
	if err := ownOrVerb(c, c.IsUser(userID), authz.InstallView); err != nil {
		return nil, err
	}
	r := s.d.Store.Read()
	if _, _, ok := Users.Get(r, userID); !ok {
		return nil, errcode.New(errcode.NotFound, "no account %s", userID)
	}
	f := facts{r: r}
	type source struct{ kind, id string }
	sources := []source{{authz.KindUser, userID}}
	for _, g := range f.groupsOf(userID) {
		sources = append(sources, source{"group", g.ID})
	}
	byApp := map[string]*AppAccess{}
	var order []string
	for _, src := range sources {
		items, _ := Grants.List(r, raftstore.Query{Index: "principal", Key: raftstore.Key(src.kind, src.id)})
		for _, it := range items {
			g := it.Value
			a := byApp[g.AppID]
			if a == nil {
				a = &AppAccess{}
				byApp[g.AppID] = a
				order = append(order, g.AppID)
			}
			if g.Plane != PlaneControl || g.RoleID == nil {
				continue
			}
			if _, ok := f.Role(*g.RoleID); !ok {
				continue
			}
			if a.RoleID == nil || stronger(f, *g.RoleID, *a.RoleID) {
				role, via := *g.RoleID, ViaDirect
				var group *string
				if src.kind == "group" {
					gid := src.id
					via, group = ViaGroup, &gid
				}
				a.RoleID, a.Via, a.GroupID = &role, &via, group
			}
		}
	}
	floor := floorOf(s.d.Policy.Current())
	p := authz.Principal{Kind: authz.KindUser, ID: userID, UserID: userID}
	out := []AppAccess{}
	for _, id := range order {
		app, ok := s.d.Apps.FindApp(r, id)
		if !ok || !sees(r, c, floor, id) {
			continue
		}
		a := byApp[id]
		a.App = app
		a.CanOpen = CanOpen(r, id, p)
		a.CanManage = authz.AppVerbs(f, p, id, floor) != 0
		out = append(out, *a)
	}
	sortAccess(out)
	return out, nil
}

// GroupApps lists a group's grants by app, among the apps the caller can
// see: the strongest role of its management grants, whether its members
// can open the app through it, and whether the role holds an app verb.
func (s *Sharing) GroupApps(c authz.Caller, groupID string) ([]AppAccess, error) {
	r := s.d.Store.Read()
	if _, _, ok := Groups.Get(r, groupID); !ok {
		return nil, errcode.New(errcode.NotFound, "no group %s", groupID)
	}
	f := facts{r: r}
	floor := floorOf(s.d.Policy.Current())
	byApp := map[string]*AppAccess{}
	var order []string
	items, _ := Grants.List(r, raftstore.Query{Index: "principal", Key: raftstore.Key("group", groupID)})
	for _, it := range items {
		g := it.Value
		a := byApp[g.AppID]
		if a == nil {
			a = &AppAccess{}
			byApp[g.AppID] = a
			order = append(order, g.AppID)
		}
		if g.Plane == PlaneData {
			a.CanOpen = true
			continue
		}
		if g.RoleID == nil {
			continue
		}
		role, ok := f.Role(*g.RoleID)
		if !ok {
			continue
		}
		if a.RoleID == nil || stronger(f, role.ID, *a.RoleID) {
			id, via := role.ID, ViaDirect
			a.RoleID, a.Via = &id, &via
		}
		held := authz.SetOf(role.Verbs...) &^ authz.SetOf(floor.Disabled...)
		if held.Scoped(authz.ScopeApp) != 0 {
			a.CanManage = true
		}
	}
	out := []AppAccess{}
	for _, id := range order {
		app, ok := s.d.Apps.FindApp(r, id)
		if !ok || !sees(r, c, floor, id) {
			continue
		}
		a := byApp[id]
		a.App = app
		out = append(out, *a)
	}
	sortAccess(out)
	return out, nil
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// newKey draws the key admission cookies of a passcode generation are
// signed with.
func newKey() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic("identity: crypto/rand: " + err.Error())
	}
	return k
}

// FloorOf is host policy's floor under decisions (disabled_verbs, and
// agent_disabled_verbs for agent tokens), for services that decide on a
// principal's access outside a request.
func FloorOf(p policy.Policy) authz.Floor { return floorOf(p) }
