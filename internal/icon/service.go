package icon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
)

// Store is what the service needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

var _ Store = (*raftstore.Store)(nil)

// maxCachedTiles bounds the generated tiles kept in memory; past it the
// cache starts over.
const maxCachedTiles = 2048

// Service sets, removes and serves apps' tile images.
type Service struct {
	store Store
	now   func() time.Time

	mu    sync.Mutex
	tiles map[tileKey]Icon // generated tiles by app ID and name
}

type tileKey struct{ id, name string }

// NewService returns the icon service.
func NewService(store Store, now func() time.Time) *Service {
	return &Service{store: store, now: now, tiles: map[tileKey]Icon{}}
}

// Get returns the app's tile: the uploaded image, or (generated true) a PNG
// drawn from its name when none is set. NOT_FOUND when the app does not
// exist.
func (s *Service) Get(appID string) (Icon, bool, error) {
	r := s.store.Read()
	app, _, ok := apps.Apps.Get(r, appID)
	if !ok {
		return Icon{}, false, errcode.New(errcode.NotFound, "no app %s", appID)
	}
	if ic, _, ok := Icons.Get(r, appID); ok {
		return ic, false, nil
	}
	return s.generated(app), true, nil
}

func (s *Service) generated(app apps.App) Icon {
	k := tileKey{app.ID, app.Name}
	s.mu.Lock()
	ic, ok := s.tiles[k]
	s.mu.Unlock()
	if ok {
		return ic
	}
	b := Tile(app.ID, app.Name)
	ic = Icon{ID: app.ID, ContentType: PNG.ContentType(), Data: b, SHA256: tileHash(b), UpdatedAt: app.CreatedAt}
	s.mu.Lock()
	if len(s.tiles) >= maxCachedTiles {
		clear(s.tiles)
	}
	s.tiles[k] = ic
	s.mu.Unlock()
	return ic
}

// Put checks an uploaded image (Check) and makes it the app's tile: the
// icon row and the app's icon_updated_at in one write with its audit entry
// (icon.update: format, size and bytes, never the image). It returns the
// app as changed.
func (s *Service) Put(ctx context.Context, appID string, b []byte) (apps.App, error) {
	f, cfg, err := Check(b)
	if err != nil {
		return apps.App{}, err
	}
	sum := sha256.Sum256(b)
	hash := hex.EncodeToString(sum[:])
	details := map[string]any{"format": string(f), "width": cfg.Width, "height": cfg.Height, "bytes": len(b), "sha256": hash}
	return s.write(ctx, appID, func(_ *raftstore.Reader, now time.Time) (*time.Time, []raftstore.Op, error) {
		return &now, []raftstore.Op{
			Icons.Put(&Icon{ID: appID, ContentType: f.ContentType(), Data: b, SHA256: hash, UpdatedAt: now}),
			audit.Record(ctx, now, "icon.update", appID, audit.Target{Kind: "app", ID: appID}, details),
		}, nil
	})
}

// Delete removes the app's uploaded tile, so that it shows a generated one
// again, and clears its icon_updated_at, with the audit entry icon.delete.
// NOT_FOUND when the app has no uploaded tile.
func (s *Service) Delete(ctx context.Context, appID string) (apps.App, error) {
	return s.write(ctx, appID, func(r *raftstore.Reader, now time.Time) (*time.Time, []raftstore.Op, error) {
		_, meta, ok := Icons.Get(r, appID)
		if !ok {
			return nil, nil, errcode.New(errcode.NotFound, "app %s has no uploaded icon; its tile is already the generated one", appID)
		}
		return nil, []raftstore.Op{
			Icons.DeleteIf(appID, meta.ModifyIndex),
			audit.Record(ctx, now, "icon.delete", appID, audit.Target{Kind: "app", ID: appID}, nil),
		}, nil
	})
}

// write changes the icon (the operations change returns) and the app's
// icon_updated_at (through apps.SetIconOps) in one write; the app's other
// changes meanwhile are kept, not refused.
func (s *Service) write(ctx context.Context, appID string, change func(r *raftstore.Reader, now time.Time) (*time.Time, []raftstore.Op, error)) (apps.App, error) {
	now := s.now().UTC()
	var app apps.App
	_, err := s.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		if !apps.Exists(r, appID) {
			return nil, errcode.New(errcode.NotFound, "no app %s", appID)
		}
		at, ops, err := change(r, now)
		if err != nil {
			return nil, err
		}
		var appOps []raftstore.Op
		if app, appOps, err = apps.SetIconOps(r, appID, at, now); err != nil {
			return nil, err
		}
		return append(appOps, ops...), nil
	})
	if err != nil {
		return apps.App{}, fmt.Errorf("write icon of app %s: %w", appID, err)
	}
	return app, nil
}

// SweepDeletedApps removes the icons of apps that no longer exist. It runs
// on the leader.
func (s *Service) SweepDeletedApps(ctx context.Context) error {
	// Each icon is judged on a view at least as new as the sweep's: an app
	// created after the sweep began is not taken for a deleted one.
	if _, err := Icons.Sweep(ctx, s.store, raftstore.Query{}, func(i *Icon) bool { return !apps.Exists(s.store.Read(), i.ID) }, 100); err != nil {
		return fmt.Errorf("sweep icons of deleted apps: %w", err)
	}
	return nil
}
