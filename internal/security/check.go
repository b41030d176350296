package security

import (
	"context"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/raftstore"
)

// Check is the leader loop: every CheckEvery, CheckOnce.
func (s *Service) Check(ctx context.Context) error {
	return raftstore.Every(CheckEvery, func(ctx context.Context) error {
		s.CheckOnce(ctx)
		return nil
	})(ctx)
}

// CheckOnce scans, one after the other, every app Due says is due (a
// deploy since its last scan, a day since it, never scanned), then
// applies Gate to every app with a result.
func (s *Service) CheckOnce(ctx context.Context) {
	ctx = actor.With(ctx, actor.System)
	r := s.d.Store.Read()
	items, _ := apps.Apps.List(r, raftstore.Query{})
	for _, it := range items {
		if ctx.Err() != nil {
			return
		}
		if began, ok := s.claim(ctx, it.Value.ID); ok {
			s.run(ctx, it.Value.ID, began)
		}
	}
	for _, it := range items {
		if ctx.Err() != nil {
			return
		}
		s.gate(ctx, it.Value.ID)
	}
}

// due reads Due's inputs for the app from the view r.
func (s *Service) due(r *raftstore.Reader, a apps.App, now time.Time) bool {
	row, _, had := Results.Get(r, a.ID)
	var released time.Time
	if s.d.Releases != nil {
		_, released, _ = s.d.Releases.Deployed(r, a.ID)
	}
	return Due(now, row, had, a.Pinned != nil, released)
}

// claim marks the app's result scanning if a scan is due, deciding again
// on the view the write reads; it answers when the scan began.
func (s *Service) claim(ctx context.Context, appID string) (time.Time, bool) {
	now := s.d.Now().UTC()
	if a, _, ok := apps.Apps.Get(s.d.Store.Read(), appID); !ok || !s.due(s.d.Store.Read(), a, now) {
		return time.Time{}, false
	}
	claimed := false
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		a, _, ok := apps.Apps.Get(r, appID)
		if claimed = ok && s.due(r, a, now); !claimed {
			return nil, nil
		}
		row, meta, had := Results.Get(r, appID)
		row = begin(row, appID, now)
		return []raftstore.Op{put(&row, meta, had)}, nil
	})
	if err != nil {
		s.d.Log.Warn("security: could not begin a scan; the next check tries again", "app_id", appID, "err", errcode.MessageOf(err))
		return time.Time{}, false
	}
	return now, claimed
}

// running says whether the app is meant to run a release.
func (s *Service) running(r *raftstore.Reader, a apps.App) bool {
	if a.DesiredState != apps.DesiredRunning || s.d.Releases == nil {
		return false
	}
	_, _, ok := s.d.Releases.Deployed(r, a.ID)
	return ok
}

// still decides Gate again on the view r: the step, the app and its row.
func (s *Service) still(r *raftstore.Reader, appID string, now time.Time) (Step, apps.App, Record, raftstore.Meta) {
	a, _, ok := apps.Apps.Get(r, appID)
	row, meta, had := Results.Get(r, appID)
	if !ok || !had {
		return Stay, a, row, meta
	}
	return Gate(now, s.d.Policy.Current(), row, s.running(r, a)), a, row, meta
}

// gate applies what Gate says to the app: tell it fell below, stop it,
// or tell it recovered.
func (s *Service) gate(ctx context.Context, appID string) {
	now := s.d.Now().UTC()
	step, _, _, _ := s.still(s.d.Store.Read(), appID, now)
	pol := s.d.Policy.Current()
	var err error
	switch step {
	case Stay:
		return
	case Stop:
		if s.d.Stopper == nil {
			return
		}
		var stopped bool
		stopped, err = s.d.Stopper.StopBecause(ctx, appID, apps.StoppedInsecure, func(r *raftstore.Reader, _ apps.App) ([]raftstore.Op, bool, error) {
			step, a, row, meta := s.still(r, appID, now)
			if step != Stop {
				return nil, false, nil
			}
			since := *row.BelowSince
			row.StoppedAt = &now
			return []raftstore.Op{Results.PutIf(&row, meta.ModifyIndex),
				events.Emit(ctx, now, "security.insecure_stopped", ref(a), "app", a.ID, map[string]any{
					"grace_hours": pol.InsecureGraceHours, "insecure_since": since,
				})}, true, nil
		})
		if stopped {
			s.d.Log.Warn("security: stopped the app: its score stayed below the installation's minimum past the grace hours; it stays stopped until somebody starts it",
				"app_id", appID, "minimum", pol.MinSecurityScore, "grace_hours", pol.InsecureGraceHours)
		}
	default:
		_, err = s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
			cur, a, row, meta := s.still(r, appID, now)
			if cur != step {
				return nil, nil
			}
			if step == Recover {
				row.BelowSince, row.StoppedAt = nil, nil
				return []raftstore.Op{Results.PutIf(&row, meta.ModifyIndex), events.Emit(ctx, now, "security.recovered", ref(a), "app", a.ID, nil)}, nil
			}
			row.BelowSince = &now
			return []raftstore.Op{Results.PutIf(&row, meta.ModifyIndex), events.Emit(ctx, now, "security.below_minimum", ref(a), "app", a.ID, map[string]any{
				"grace_hours": pol.InsecureGraceHours, "action": pol.InsecureAction,
			})}, nil
		})
	}
	if err != nil {
		s.d.Log.Warn("security: could not apply the minimum score; the next check tries again", "app_id", appID, "err", errcode.MessageOf(err))
	}
}
