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
	Apply(ctx context.Context, ops ...raftstore.Op) (uint64, error)
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

// attempts bounds the retries of a write that raced another write.
const attempts = 5

// Put sets a secret: a new secret, or a new version of an existing one
// (a rotation). Its audit entry and the app.secret_changed event (the key,
// never the value) commit with the row.
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
	for try := 1; ; try++ {
		r := s.d.Store.Read()
		app, appMeta, ok := apps.Apps.Get(r, ref.AppID)
		if !ok {
			return View{}, errcode.New(errcode.NotFound, "no app %s", ref.AppID)
		}
		old, meta, exists := Secrets.Get(r, RowID(ref.AppID, ref.Key))
		if !exists {
			if n, _ := Secrets.List(r, raftstore.Query{Index: "app", Key: ref.AppID, Limit: MaxPerApp}); len(n) >= MaxPerApp {
				return View{}, errcode.New(errcode.StateInvalid, "an app may have at most %d secrets", MaxPerApp)
			}
		}
		stored, err := backend.Put(ctx, ref, value)
		if err != nil {
			return View{}, fmt.Errorf("put secret %s: %w", ref.Key, err)
		}
		now := s.d.Now()
		row := Secret{ID: RowID(ref.AppID, ref.Key), AppID: ref.AppID, Key: ref.Key, Origin: primary,
			Version: stored.Version, Sealed: stored.Sealed, CreatedAt: now, UpdatedAt: now}
		if exists {
			row.CreatedAt = old.CreatedAt
		}
		_, err = s.d.Store.Apply(ctx,
			apps.Apps.Check(ref.AppID, appMeta.ModifyIndex),
			Secrets.PutIf(&row, meta.ModifyIndex),
			audit.Record(ctx, now, "secret.set", ref.AppID, audit.Target{Kind: "secret", ID: ref.Key},
				map[string]any{"key": ref.Key, "origin": row.Origin, "version": row.Version, "created": !exists}),
			events.Emit(ctx, now, "app.secret_changed", appRef(app), "", "", map[string]any{"key": ref.Key}),
		)
		if err == nil {
			if exists && old.Origin != row.Origin {
				dropFrom(ctx, backends, old.Origin, ref)
			}
			return row.view(), nil
		}
		if !raced(err) || try == attempts {
			return View{}, fmt.Errorf("put secret %s: %w", ref.Key, err)
		}
	}
}

// dropFrom removes a secret's value from the adapter that held it before it
// moved to the primary one; the row already names the new origin, so a
// failure only leaves an unreferenced copy behind.
func dropFrom(ctx context.Context, backends map[string]Backend, origin string, ref Ref) {
	if b, ok := backends[origin]; ok {
		_ = b.Delete(ctx, ref)
	}
}

func raced(err error) bool {
	return raftstore.IsReason(err, raftstore.ReasonStale) || raftstore.IsReason(err, raftstore.ReasonNotFound)
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
	value, err := backend.Get(ctx, ref, Stored{Version: row.Version, Sealed: row.Sealed})
	if err != nil {
		return "", fmt.Errorf("read secret %s: %w", ref.Key, err)
	}
	now := s.d.Now()
	if _, err := s.d.Store.Apply(ctx, audit.Record(ctx, now, "secret.read", ref.AppID,
		audit.Target{Kind: "secret", ID: ref.Key}, map[string]any{"key": ref.Key, "origin": row.Origin, "version": row.Version})); err != nil {
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
	value, err := backend.Get(ctx, Ref{AppID: appID, Key: key}, Stored{Version: row.Version, Sealed: row.Sealed})
	if err != nil {
		return "", 0, fmt.Errorf("read secret %s: %w", key, err)
	}
	return value, row.Version, nil
}

// Delete removes a secret from its adapter and then its row, with its audit
// entry and an app.secret_changed event.
func (s *Service) Delete(ctx context.Context, ref Ref) error {
	for try := 1; ; try++ {
		r := s.d.Store.Read()
		app, _, ok := apps.Apps.Get(r, ref.AppID)
		if !ok {
			return errcode.New(errcode.NotFound, "no app %s", ref.AppID)
		}
		row, meta, ok := Secrets.Get(r, RowID(ref.AppID, ref.Key))
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
		now := s.d.Now()
		_, err = s.d.Store.Apply(ctx,
			Secrets.DeleteIf(row.ID, meta.ModifyIndex),
			audit.Record(ctx, now, "secret.delete", ref.AppID, audit.Target{Kind: "secret", ID: ref.Key},
				map[string]any{"key": ref.Key, "origin": row.Origin}),
			events.Emit(ctx, now, "app.secret_changed", appRef(app), "", "", map[string]any{"key": ref.Key}),
		)
		if err == nil {
			return nil
		}
		if !raced(err) || try == attempts {
			return fmt.Errorf("delete secret %s: %w", ref.Key, err)
		}
	}
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
		if _, err := s.d.Store.Apply(ctx, Secrets.DeleteIf(row.ID, it.Meta.ModifyIndex)); err != nil && !raced(err) {
			return fmt.Errorf("sweep secrets of deleted apps: %w", err)
		}
	}
	return nil
}
