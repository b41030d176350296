package secrets

import (
	"context"
	"fmt"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/raftstore"
)

// Store is what the service needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

var _ Store = (*raftstore.Store)(nil)

// Deps are the service's collaborators.
type Deps struct {
	Store Store
	// Backends returns the loaded secrets adapters by adapter ID and the
	// primary one, where new values go. Secrets written earlier through
	// another adapter stay readable through it while it is loaded.
	Backends func() (backends map[string]Backend, primary string)
	Now      func() time.Time
}

// Service sets, reads, lists and deletes apps' secrets.
type Service struct{ d Deps }

// NewService returns the secrets service.
func NewService(d Deps) *Service { return &Service{d: d} }

// Put sets a secret: a new secret, or a new version of an existing one
// (a rotation). Its audit entry and the app.secret_changed event (the key,
// never the value) commit with the row.
//
// The value goes to the primary adapter once, before the row is written
// (a change to the row that raced another is built again, never written to
// the adapter again). Concurrent writes to one secret are all applied, one
// after another: the builtin adapter's versions are numbered by the row
// (one more than the row's), vault's by vault, and a vault write whose row
// comes after the row of a newer vault version (by vault's clock) leaves
// the newer one in place: the row only moves to newer versions. When the
// row cannot be written after the adapter took the value, the adapter
// holds a version no row names: reads name the row's version, so it is
// never served, and the request retried writes a newer version and its row.
func (s *Service) Put(ctx context.Context, ref Ref, value string) (View, error) {
	if err := CheckKey(ref.Key); err != nil {
		return View{}, err
	}
	if err := CheckValue(value); err != nil {
		return View{}, err
	}
	backends, primary := s.d.Backends()
	backend, err := pick(backends, primary)
	if err != nil {
		return View{}, err
	}
	// What would refuse the row is checked before the adapter writes.
	if _, _, err := settable(s.d.Store.Read(), ref); err != nil {
		return View{}, err
	}
	stored, err := backend.Put(ctx, ref, value)
	if err != nil {
		return View{}, fmt.Errorf("put secret %s: %w", ref.Key, err)
	}
	var row Secret
	var moved string // the origin the value moved from
	_, err = s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		app, appMeta, err := settable(r, ref)
		if err != nil {
			return nil, err
		}
		old, meta, exists := Secrets.Get(r, RowID(ref.AppID, ref.Key))
		now := s.d.Now()
		row = Secret{ID: RowID(ref.AppID, ref.Key), AppID: ref.AppID, Key: ref.Key, Origin: primary,
			Version: stored.Version, VersionAt: stored.At, Sealed: stored.Sealed, CreatedAt: now, UpdatedAt: now}
		moved = ""
		if exists {
			row.CreatedAt = old.CreatedAt
			if old.Origin != primary {
				moved = old.Origin
			}
		}
		same := exists && old.Origin == primary
		details := map[string]any{"key": ref.Key, "origin": row.Origin, "version": row.Version, "created": !exists}
		switch {
		case stored.Version == 0: // the row numbers the versions
			row.Version = 1
			if same {
				row.Version = old.Version + 1
			}
			details["version"] = row.Version
		case same && !stored.At.IsZero() && old.VersionAt.After(stored.At):
			// A newer version's row came first: this write is audited,
			// and the row stays on the newer version.
			details["superseded_by"] = old.Version
			return []raftstore.Op{
				apps.Apps.Check(ref.AppID, appMeta.ModifyIndex),
				Secrets.Check(old.ID, meta.ModifyIndex),
				audit.Record(ctx, now, "secret.set", ref.AppID, audit.Target{Kind: "secret", ID: ref.Key}, details),
			}, nil
		}
		return []raftstore.Op{
			apps.Apps.Check(ref.AppID, appMeta.ModifyIndex),
			Secrets.PutIf(&row, meta.ModifyIndex),
			audit.Record(ctx, now, "secret.set", ref.AppID, audit.Target{Kind: "secret", ID: ref.Key}, details),
			events.Emit(ctx, now, "app.secret_changed", appRef(app), "", "", map[string]any{"key": ref.Key}),
		}, nil
	})
	if err != nil {
		return View{}, fmt.Errorf("put secret %s: %w", ref.Key, err)
	}
	if moved != "" {
		dropFrom(ctx, backends, moved, ref)
	}
	return row.view(), nil
}

// settable returns the app of a secret that may be set in the view r: the
// app exists, and a new secret stays within MaxPerApp.
func settable(r *raftstore.Reader, ref Ref) (apps.App, raftstore.Meta, error) {
	app, meta, ok := apps.Apps.Get(r, ref.AppID)
	if !ok {
		return apps.App{}, meta, errcode.New(errcode.NotFound, "no app %s", ref.AppID)
	}
	if _, _, exists := Secrets.Get(r, RowID(ref.AppID, ref.Key)); !exists {
		if n, _ := Secrets.List(r, raftstore.Query{Index: "app", Key: ref.AppID, Limit: MaxPerApp}); len(n) >= MaxPerApp {
			return apps.App{}, meta, tooMany()
		}
	}
	return app, meta, nil
}

// dropFrom removes a secret's value from the adapter that held it before it
// moved to the primary one; the row already names the new origin, so a
// failure only leaves an unreferenced copy behind.
func dropFrom(ctx context.Context, backends map[string]Backend, origin string, ref Ref) {
	if b, ok := backends[origin]; ok {
		_ = b.Delete(ctx, ref)
	}
}

func appRef(a apps.App) *events.AppRef { return &events.AppRef{ID: a.ID, Name: a.Name, Slug: a.Slug} }

// List returns an app's secrets by key: key, origin, version; never values.
func (s *Service) List(appID string) ([]View, error) {
	r := s.d.Store.Read()
	if !apps.Exists(r, appID) {
		return nil, errcode.New(errcode.NotFound, "no app %s", appID)
	}
	items, _ := Secrets.List(r, raftstore.Query{Index: "app", Key: appID})
	out := make([]View, len(items))
	for i, it := range items {
		out[i] = it.Value.view()
	}
	return out, nil
}

// Value reads one secret's value. Every read is audited (secret.read), and
// the value is returned only once its audit entry has committed.
func (s *Service) Value(ctx context.Context, ref Ref) (string, error) {
	r := s.d.Store.Read()
	if !apps.Exists(r, ref.AppID) {
		return "", errcode.New(errcode.NotFound, "no app %s", ref.AppID)
	}
	row, _, ok := Secrets.Get(r, RowID(ref.AppID, ref.Key))
	if !ok {
		return "", errcode.New(errcode.NotFound, "app %s has no secret %s", ref.AppID, ref.Key)
	}
	backend, err := s.backend(row.Origin)
	if err != nil {
		return "", err
	}
	value, err := backend.Get(ctx, ref, row.stored())
	if err != nil {
		return "", fmt.Errorf("read secret %s: %w", ref.Key, err)
	}
	now := s.d.Now()
	_, err = s.d.Store.Update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) {
		return []raftstore.Op{audit.Record(ctx, now, "secret.read", ref.AppID,
			audit.Target{Kind: "secret", ID: ref.Key}, map[string]any{"key": ref.Key, "origin": row.Origin, "version": row.Version})}, nil
	})
	if err != nil {
		return "", fmt.Errorf("read secret %s: audit: %w", ref.Key, err)
	}
	return value, nil
}

// Resolve returns one secret's value and version for the deploy path,
// which puts it into a workload's environment. It is not audited (a deploy
// is) and the value must never be shown.
func (s *Service) Resolve(ctx context.Context, appID, key string) (string, int64, error) {
	row, _, ok := Secrets.Get(s.d.Store.Read(), RowID(appID, key))
	if !ok {
		return "", 0, errcode.New(errcode.NotFound, "app %s has no secret %s", appID, key).
			WithRemedy("set it with PUT /api/v1/apps/%s/secrets/%s", appID, key)
	}
	backend, err := s.backend(row.Origin)
	if err != nil {
		return "", 0, err
	}
	value, err := backend.Get(ctx, Ref{AppID: appID, Key: key}, row.stored())
	if err != nil {
		return "", 0, fmt.Errorf("read secret %s: %w", key, err)
	}
	return value, row.Version, nil
}

// Delete removes a secret from its adapter and then its row, with its audit
// entry and an app.secret_changed event. The adapter is asked once, before
// the row goes. When a set raced the delete (the row removed is not the one
// the adapter was asked about), the value that set wrote is removed from
// its adapter too, so that no value of a deleted secret stays behind.
func (s *Service) Delete(ctx context.Context, ref Ref) error {
	r := s.d.Store.Read()
	if !apps.Exists(r, ref.AppID) {
		return errcode.New(errcode.NotFound, "no app %s", ref.AppID)
	}
	row, _, ok := Secrets.Get(r, RowID(ref.AppID, ref.Key))
	if !ok {
		return errcode.New(errcode.NotFound, "app %s has no secret %s", ref.AppID, ref.Key)
	}
	backend, err := s.backend(row.Origin)
	if err != nil {
		return err
	}
	if err := backend.Delete(ctx, ref); err != nil {
		return fmt.Errorf("delete secret %s: %w", ref.Key, err)
	}
	var gone Secret
	_, err = s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		app, _, ok := apps.Apps.Get(r, ref.AppID)
		if !ok {
			return nil, errcode.New(errcode.NotFound, "no app %s", ref.AppID)
		}
		var meta raftstore.Meta
		if gone, meta, ok = Secrets.Get(r, RowID(ref.AppID, ref.Key)); !ok {
			return nil, errcode.New(errcode.NotFound, "app %s has no secret %s", ref.AppID, ref.Key)
		}
		now := s.d.Now()
		return []raftstore.Op{
			Secrets.DeleteIf(gone.ID, meta.ModifyIndex),
			audit.Record(ctx, now, "secret.delete", ref.AppID, audit.Target{Kind: "secret", ID: ref.Key},
				map[string]any{"key": ref.Key, "origin": gone.Origin}),
			events.Emit(ctx, now, "app.secret_changed", appRef(app), "", "", map[string]any{"key": ref.Key}),
		}, nil
	})
	if err != nil {
		return fmt.Errorf("delete secret %s: %w", ref.Key, err)
	}
	if gone.Origin != row.Origin || gone.Version != row.Version {
		backends, _ := s.d.Backends()
		dropFrom(ctx, backends, gone.Origin, ref)
	}
	return nil
}

func (s *Service) backend(origin string) (Backend, error) {
	backends, primary := s.d.Backends()
	if primary == "" {
		return pick(backends, "") // nothing loaded yet: the server is starting
	}
	return pick(backends, origin)
}

func pick(backends map[string]Backend, origin string) (Backend, error) {
	if origin == "" {
		return nil, errcode.New(errcode.AdapterUnavailable, "the secrets adapters are not loaded yet: the server is starting").
			WithRemedy("retry in a few seconds")
	}
	b, ok := backends[origin]
	if !ok || b == nil {
		return nil, errcode.New(errcode.AdapterUnavailable, "the secrets adapter %s is not loaded on this server", origin).
			WithRemedy("configure it with POST /api/v1/adapters and restart, or set the secret again to move it to the current secrets adapter")
	}
	return b, nil
}

// SweepDeletedApps removes the secrets of apps that no longer exist, from
// their adapters and from the store. It runs on the leader.
func (s *Service) SweepDeletedApps(ctx context.Context) error {
	backends, _ := s.d.Backends()
	r := s.d.Store.Read()
	gone, _ := Secrets.List(r, raftstore.Query{Filter: func(v any) bool { return !apps.Exists(r, v.(*Secret).AppID) }, Limit: 500})
	for _, it := range gone {
		row := it.Value
		b, ok := backends[row.Origin]
		if !ok {
			continue // its adapter is not loaded here: the row stays, so the value is not forgotten
		}
		if err := b.Delete(ctx, Ref{AppID: row.AppID, Key: row.Key}); err != nil {
			continue // the adapter is down: the next sweep tries again
		}
		_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
			cur, meta, ok := Secrets.Get(r, row.ID)
			if !ok || apps.Exists(r, cur.AppID) {
				return nil, nil
			}
			return []raftstore.Op{Secrets.DeleteIf(cur.ID, meta.ModifyIndex)}, nil
		})
		if err != nil {
			return fmt.Errorf("sweep secrets of deleted apps: %w", err)
		}
	}
	return nil
}
