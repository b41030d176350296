package scheduler

import (
	"context"
	"fmt"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/internal/volumes"
	"github.com/svchost/svc/raftstore"
)

// volumesOf returns the app's volumes by name, making the rows (vol_ IDs)
// of those doc declares that have none yet: a volume becomes a resource
// when a job first mounts it. Rows that exist already cost no write.
func (s *Service) volumesOf(ctx context.Context, appID string, doc spec.Document) (map[string]volumes.Volume, error) {
	if len(doc.Volumes) == 0 {
		return nil, nil
	}
	if have, ops := volumes.EnsureOps(s.d.Store.Read(), appID, "", doc, s.d.Now()); len(ops) == 0 {
		return have, nil
	}
	var out map[string]volumes.Volume
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		app, _, ok := apps.Apps.Get(r, appID)
		if !ok {
			return nil, errcode.New(errcode.NotFound, "no app %s", appID)
		}
		have, ops := volumes.EnsureOps(r, appID, app.Slug, doc, s.d.Now())
		out = have
		return ops, nil
	})
	if err != nil {
		return nil, fmt.Errorf("record the app's volumes: %w", err)
	}
	return out, nil
}
