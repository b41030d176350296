package adapters

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/raftstore"
)

// checkTimeout bounds one adapter's health check.
const checkTimeout = 10 * time.Second

// CheckHealth checks every loaded adapter once and records each change of
// health: adapter.unhealthy when a check starts failing (with the reason),
// adapter.recovered when it passes again. The last health is in the store,
// so a new leader carries on from where the old one stopped instead of
// announcing everything again. An adapter that did not open counts as
// failing.
func (s *Service) CheckHealth(ctx context.Context) error {
	set := s.loaded()
	var errs []error
	for _, l := range set.items {
		reason := s.probe(ctx, l)
		if err := s.record(ctx, l, reason); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Service) probe(ctx context.Context, l *Loaded) string {
	if l.Instance == nil {
		return errcode.MessageOf(l.Err)
	}
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	if err := l.Instance.Check(cctx); err != nil {
		if cctx.Err() != nil && ctx.Err() == nil {
			return fmt.Sprintf("the health check did not answer within %s", checkTimeout)
		}
		return errcode.MessageOf(err)
	}
	return ""
}

// record writes a health change; an unchanged health writes nothing (also
// when another leader recorded the change meanwhile), and neither does the
// health of an adapter deleted since it was loaded (its row went with it).
func (s *Service) record(ctx context.Context, l *Loaded, reason string) error {
	if ctx.Err() != nil {
		return nil
	}
	a := l.Adapter
	healthy := reason == ""
	changed := false
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		var guard []raftstore.Op
		if !l.Virtual {
			_, ameta, ok := Adapters.Get(r, a.ID)
			if !ok {
				changed = false
				return nil, nil
			}
			guard = append(guard, Adapters.Check(a.ID, ameta.ModifyIndex))
		}
		old, meta, known := Healths.Get(r, a.ID)
		if changed = !known || old.Healthy != healthy || old.Reason != reason; !changed {
			return nil, nil
		}
		now := s.d.Now()
		h := Health{ID: a.ID, Healthy: healthy, Reason: reason, Since: now}
		if known && old.Healthy == healthy {
			h.Since = old.Since // only the reason changed
		}
		ops := append(guard, Healths.PutIf(&h, meta.ModifyIndex))
		switch {
		case !healthy && (!known || old.Healthy):
			ops = append(ops, events.Emit(ctx, now, "adapter.unhealthy", nil, "adapter", a.ID,
				map[string]any{"adapter_id": a.ID, "category": a.Category, "reason": reason}))
		case healthy && known && !old.Healthy:
			ops = append(ops, events.Emit(ctx, now, "adapter.recovered", nil, "adapter", a.ID,
				map[string]any{"adapter_id": a.ID, "category": a.Category}))
		}
		return ops, nil
	})
	if err != nil {
		return fmt.Errorf("record health of adapter %s: %w", a.ID, err)
	}
	if !changed {
		return nil
	}
	if healthy {
		s.d.Logger.Info("adapter healthy", "adapter_id", a.ID, "category", a.Category)
	} else {
		s.d.Logger.Warn("adapter unhealthy", "adapter_id", a.ID, "category", a.Category, "reason", reason)
	}
	return nil
}
