package apps

import (
	"context"
	"fmt"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/raftstore"
)

// Patch is a change of an app's name or slug; nil fields stay.
type Patch struct {
	Name *string
	Slug *string
}

// check validates the fields the patch sets.
func (p Patch) check() error {
	if p.Name != nil {
		if err := checkName(*p.Name); err != nil {
			return err
		}
	}
	if p.Slug != nil {
		if err := checkSlug(*p.Slug); err != nil {
			return err
		}
	}
	return nil
}

// Update renames an app or changes its slug, audited as app.update.
// Concurrent patches apply one after another; a slug another app holds is
// STATE_INVALID.
func (s *Service) Update(ctx context.Context, id string, p Patch) (App, error) {
	if err := p.check(); err != nil {
		return App{}, err
	}
	now := s.now()
	var a App
	_, err := s.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		cur, meta, ok := Apps.Get(r, id)
		if !ok {
			return nil, errcode.New(errcode.NotFound, "no app %s", id)
		}
		a = cur
		changed := []string{}
		if p.Name != nil && *p.Name != a.Name {
			a.Name = *p.Name
			changed = append(changed, "name")
		}
		if p.Slug != nil && *p.Slug != a.Slug {
			if other, _, taken := Apps.First(r, "slug", *p.Slug); taken && other.ID != id {
				return nil, slugTaken(*p.Slug)
			}
			a.Slug = *p.Slug
			changed = append(changed, "slug")
		}
		if len(changed) == 0 {
			return nil, nil
		}
		a.UpdatedAt = now
		return []raftstore.Op{
			Apps.PutIf(&a, meta.ModifyIndex),
			audit.Record(ctx, now, "app.update", id, audit.Target{Kind: "app", ID: id}, map[string]any{"changed": changed}),
		}, nil
	})
	if raftstore.IsReason(err, raftstore.ReasonConflict) {
		return App{}, slugTaken(a.Slug)
	}
	if err != nil {
		return App{}, fmt.Errorf("update app: %w", err)
	}
	return a, nil
}
