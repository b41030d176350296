package apps

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/raftstore"
)

// Store is what the service needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

var _ Store = (*raftstore.Store)(nil)

// Service creates, reads, lists and deletes apps.
type Service struct {
	store Store
	now   func() time.Time
}

// NewService returns the apps service.
func NewService(store Store, now func() time.Time) *Service {
	return &Service{store: store, now: now}
}

// New is an app to create.
type New struct {
	Name string
	Slug string // derived from the name when empty
}

// Create makes an app in draft, desired state running, and gives its
// creator an owner grant (to manage it) and a data-plane grant (to open it),
// in one write with the audit entry and the app.created event. A service
// token that creates an app receives the grants itself.
func (s *Service) Create(ctx context.Context, c authz.Caller, n New) (App, error) {
	if err := checkName(n.Name); err != nil {
		return App{}, err
	}
	kind, principal := grantee(c)
	if principal == "" {
		return App{}, errcode.New(errcode.PermDenied, "only an account or a token can create an app")
	}
	slug := n.Slug
	if slug != "" {
		if err := checkSlug(slug); err != nil {
			return App{}, err
		}
	}
	now := s.now()
	id := ids.NewAt(ids.App, now)
	var app App
	_, err := s.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		chosen := slug
		if chosen == "" {
			chosen = freeSlug(r, Slugify(n.Name))
		} else if _, _, taken := Apps.First(r, "slug", chosen); taken {
			return nil, slugTaken(chosen)
		}
		app = App{
			ID: id, Name: n.Name, Slug: chosen, State: StateDraft, DesiredState: DesiredRunning,
			CreatedBy: c.Principal.ID, CreatedAt: now, UpdatedAt: now,
		}
		ops := append([]raftstore.Op{Apps.Insert(&app)}, identity.CreatorGrantOps(app.ID, kind, principal, now)...)
		return append(ops,
			audit.Record(ctx, now, "app.create", app.ID, audit.Target{Kind: "app", ID: app.ID}, map[string]any{"name": app.Name, "slug": app.Slug}),
			events.Emit(ctx, now, "app.created", refOf(app), "", "", map[string]any{"name": app.Name, "slug": app.Slug}),
		), nil
	})
	if raftstore.IsReason(err, raftstore.ReasonConflict) {
		return App{}, slugTaken(app.Slug)
	}
	if err != nil {
		return App{}, fmt.Errorf("create app: %w", err)
	}
	return app, nil
}

// slugTaken is the answer when another app has the slug asked for: the
// request's own uniqueness rule failed.
func slugTaken(slug string) error {
	return errcode.New(errcode.StateInvalid, "the slug %q is taken", slug).WithDetail("field", "slug")
}

// grantee is the principal an app's creator grants go to: the account (also
// for a delegated token acting for it), or a service token itself.
func grantee(c authz.Caller) (kind, id string) {
	if c.Principal.UserID != "" {
		return authz.KindUser, c.Principal.UserID
	}
	if c.Principal.Kind == authz.KindToken {
		return authz.KindToken, c.Principal.ID
	}
	return "", ""
}

// freeSlug returns base, or base-2, base-3, … whichever is free.
func freeSlug(r *raftstore.Reader, base string) string {
	for n := 1; ; n++ {
		slug := base
		if n > 1 {
			suffix := "-" + strconv.Itoa(n)
			if len(base)+len(suffix) > MaxSlugLen {
				slug = base[:MaxSlugLen-len(suffix)]
			}
			slug = trimHyphen(slug) + suffix
		}
		if _, _, taken := Apps.First(r, "slug", slug); !taken {
			return slug
		}
	}
}

func trimHyphen(s string) string {
	for len(s) > 0 && s[len(s)-1] == '-' {
		s = s[:len(s)-1]
	}
	return s
}

func refOf(a App) *events.AppRef { return &events.AppRef{ID: a.ID, Name: a.Name, Slug: a.Slug} }

// Get returns an app. A caller without any verb on it is answered NOT_FOUND
// by the server before this is reached.
func (s *Service) Get(id string) (App, error) {
	a, _, ok := Apps.Get(s.store.Read(), id)
	if !ok {
		return App{}, errcode.New(errcode.NotFound, "no app %s", id)
	}
	return a, nil
}

// Exists reports whether an app exists in a read view.
func Exists(r *raftstore.Reader, id string) bool {
	_, _, ok := Apps.Get(r, id)
	return ok
}

// List returns the apps the caller can administer (holds any app verb on),
// by ID, after the cursor, at most limit.
func (s *Service) List(c authz.Caller, facts authz.Facts, floor authz.Floor, after string, limit int) ([]App, bool) {
	r := s.store.Read()
	items, more := Apps.List(r, raftstore.Query{After: after, Limit: limit, Filter: func(v any) bool {
		return authz.AppVerbs(facts, c.Principal, v.(*App).ID, floor) != 0
	}})
	out := make([]App, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out, more
}

// Delete removes an app and every grant on it, with its audit entry and the
// app.deleted event. Whatever else an app owns (secrets, specs, volumes) is
// removed by its own package's sweep of apps that no longer exist.
func (s *Service) Delete(ctx context.Context, id string, d Decision) error {
	now := s.now()
	_, err := s.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		return DeleteOps(ctx, r, id, d, "", now)
	})
	if err != nil {
		return fmt.Errorf("delete app: %w", err)
	}
	return nil
}

// DeleteOps deletes an app: its row and grants, the audit entry and
// app.deleted naming backupID (the final backup taken, "" for none), for
// the write that also keeps or discards its volumes (internal/volumes).
func DeleteOps(ctx context.Context, r *raftstore.Reader, id string, d Decision, backupID string, now time.Time) ([]raftstore.Op, error) {
	app, meta, ok := Apps.Get(r, id)
	if !ok {
		return nil, errcode.New(errcode.NotFound, "no app %s", id)
	}
	if err := d.check(id); err != nil {
		return nil, err
	}
	details := map[string]any{"backup": d.Backup, "force": d.Force, "storage": d.Storage}
	var backup any
	if backupID != "" {
		details["backup_id"], backup = backupID, backupID
	}
	ops := append([]raftstore.Op{Apps.DeleteIf(id, meta.ModifyIndex)}, identity.AppGrantsDeleteOps(r, id)...)
	return append(ops,
		audit.Record(ctx, now, "app.delete", id, audit.Target{Kind: "app", ID: id}, details),
		events.Emit(ctx, now, "app.deleted", refOf(app), "", "", map[string]any{
			"backup_id": backup, "volumes_discarded": d.Force && d.Storage, "reason": d.reason(),
		}),
	), nil
}

// Decision is what the caller chose about a final backup when deleting.
// An app with storage (volumes) needs Backup or Force: the caller takes
// the backup before the deletion and names it (internal/backups).
type Decision struct {
	Storage bool // the app declares volumes
	Backup  bool
	Force   bool
	Reason  string // "" means requested
	// RequireBackup is host policy's require_backup_before_destroy:
	// discarding an app's data (Force) is refused.
	RequireBackup bool
}

// check refuses a decision that is not one.
func (d Decision) check(id string) error {
	switch {
	case d.Backup && d.Force:
		return errcode.Invalid("backup", "choose backup=true (keep a final copy) or force=true (discard it), not both")
	case d.Storage && d.Force && d.RequireBackup:
		return errcode.New(errcode.PolicyBackupRequired, "host policy requires a final backup before app %s's data is discarded", id).
			WithDetail("setting", "require_backup_before_destroy").WithRemedy("delete with ?backup=true to keep a final copy")
	case d.Storage && !d.Backup && !d.Force:
		return errcode.New(errcode.StateBackupDecision, "app %s keeps data in volumes; decide about a final backup", id).
			WithRemedy("delete with ?backup=true to keep a final copy, or ?force=true to discard the data")
	}
	return nil
}

func (d Decision) reason() string {
	if d.Reason == "" {
		return "requested"
	}
	return d.Reason
}
