package idle

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// How often the loops run, and how far a stamp moves before a flush
// writes it.
const (
	FlushEvery = 5 * time.Minute
	FlushStep  = time.Hour
	CheckEvery = 10 * time.Minute
)

// flushBatch caps the rows one flush write carries.
const flushBatch = 200

// Store is what the service needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

var _ Store = (*raftstore.Store)(nil)

// Stamps are the edge's activity stamps on this server (edge.Proxy).
type Stamps interface {
	LastActivity(appID string) time.Time
	Activity() map[string]time.Time
}

// Releases says what an app runs (the scheduler), from a view: the spec
// its release runs and when it was released; false for an app that runs
// none.
type Releases interface {
	Deployed(r *raftstore.Reader, appID string) (spec.Document, time.Time, bool)
}

// Stopper stops an app for the system (the scheduler): in one write with
// the ops more builds, if more says so.
type Stopper interface {
	StopBecause(ctx context.Context, appID, reason string, more func(r *raftstore.Reader, a apps.App) ([]raftstore.Op, bool, error)) (bool, error)
}

// Deleter deletes an app with a decision about its data (the backups
// service: an on_delete backup first when the app has volumes).
type Deleter interface {
	DeleteApp(ctx context.Context, appID string, d apps.Decision, backupID string) error
}

// Deps are the service's collaborators; Stamps may be nil (no edge).
type Deps struct {
	Store    Store
	Stamps   Stamps
	Releases Releases
	Stopper  Stopper
	Deleter  Deleter
	Now      func() time.Time
	Log      *slog.Logger
}

// Service keeps activity records and acts on idle apps.
type Service struct{ d Deps }

// New returns the service.
func New(d Deps) *Service {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{d: d}
}

// Flush writes this server's stamps that moved past the stored activity
// by FlushStep or more (an app without a record gets one), for apps that
// exist, at most flushBatch per write.
func (s *Service) Flush(ctx context.Context) error { return s.flush(ctx, FlushStep) }

// FlushAll writes every stamp that moved past the stored activity at all
// (at its resolution): what a server does once as it shuts down, so that
// a restart loses no activity.
func (s *Service) FlushAll(ctx context.Context) error { return s.flush(ctx, Resolution) }

func (s *Service) flush(ctx context.Context, step time.Duration) error {
	if s.d.Stamps == nil {
		return nil
	}
	stamps := s.d.Stamps.Activity()
	due := func(r *raftstore.Reader, id string) bool {
		row, _, ok := Activities.Get(r, id)
		return (!ok || coarse(stamps[id]).Sub(row.Last) >= step) && apps.Exists(r, id)
	}
	r := s.d.Store.Read()
	ids := slices.DeleteFunc(slices.Sorted(maps.Keys(stamps)), func(id string) bool { return !due(r, id) })
	for batch := range slices.Chunk(ids, flushBatch) {
		_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
			var ops []raftstore.Op
			for _, id := range batch {
				if due(r, id) {
					ops = append(ops, ActiveOps(r, id, stamps[id])...)
				}
			}
			return ops, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Flushing is every server's loop: every FlushEvery, Flush; a failed
// flush is logged and tried again at the next.
func (s *Service) Flushing(ctx context.Context) error {
	return raftstore.Every(FlushEvery, func(ctx context.Context) error {
		if err := s.Flush(ctx); err != nil && ctx.Err() == nil {
			s.d.Log.Warn("idle: could not store the edge's activity stamps; the next flush tries again", "err", errcode.MessageOf(err))
		}
		return nil
	})(ctx)
}

// Check is the leader loop: every CheckEvery, CheckOnce.
func (s *Service) Check(ctx context.Context) error {
	return raftstore.Every(CheckEvery, func(ctx context.Context) error {
		s.CheckOnce(ctx)
		return nil
	})(ctx)
}

// candidate is a running app whose deployed spec sets idle days.
type candidate struct {
	app      apps.App
	days     int
	action   string
	released time.Time
}

// CheckOnce looks at every running app whose deployed spec sets idle
// days and warns, stops or deletes it as Decide says; then it removes
// the records of apps that no longer exist.
func (s *Service) CheckOnce(ctx context.Context) {
	ctx = actor.With(ctx, actor.System)
	r := s.d.Store.Read()
	items, _ := apps.Apps.List(r, raftstore.Query{})
	for _, it := range items {
		if ctx.Err() != nil {
			return
		}
		c, ok := s.candidate(r, it.Value)
		if !ok {
			continue
		}
		last, w := s.reading(r, c)
		switch v := Decide(s.d.Now(), last, c.days, w); v.Do {
		case Warn:
			s.warn(ctx, c)
		case Act:
			s.act(ctx, c)
		}
	}
	s.sweep(ctx)
}

// candidate says whether an app is one the lifecycle concerns: running
// (meant to run, and running or degraded), its deployed spec setting idle
// days.
func (s *Service) candidate(r *raftstore.Reader, a apps.App) (candidate, bool) {
	if a.DesiredState != apps.DesiredRunning || (a.State != apps.StateRunning && a.State != apps.StateDegraded) {
		return candidate{}, false
	}
	doc, released, ok := s.d.Releases.Deployed(r, a.ID)
	if !ok {
		return candidate{}, false
	}
	days, action := doc.Idle()
	return candidate{app: a, days: days, action: action, released: released}, days > 0
}

// reading is an app's last activity, the newest of its record, this
// server's stamp, its release and its creation (at the stored
// resolution), and the warning its record remembers.
func (s *Service) reading(r *raftstore.Reader, c candidate) (time.Time, Warning) {
	row, _, _ := Activities.Get(r, c.app.ID)
	last := later(row.Last, later(c.released, c.app.CreatedAt))
	if s.d.Stamps != nil {
		last = later(last, s.d.Stamps.LastActivity(c.app.ID))
	}
	var w Warning
	if row.WarnedAt != nil && row.WarnedFor != nil {
		w = Warning{At: *row.WarnedAt, For: *row.WarnedFor}
	}
	return coarse(last), w
}

// still decides again on the view a write reads: the verdict for the app
// as it is there (Nothing when it is no longer a candidate), and the
// candidate as it is.
func (s *Service) still(r *raftstore.Reader, appID string, now time.Time) (Verdict, candidate, time.Time) {
	a, _, ok := apps.Apps.Get(r, appID)
	if !ok {
		return Verdict{}, candidate{}, time.Time{}
	}
	c, ok := s.candidate(r, a)
	if !ok {
		return Verdict{}, c, time.Time{}
	}
	last, w := s.reading(r, c)
	return Decide(now, last, c.days, w), c, last
}

// warn writes app.idle_warning and remembers it in the app's record, if
// the warning is still due.
func (s *Service) warn(ctx context.Context, c candidate) {
	now := s.d.Now()
	var said Verdict
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		v, cur, last := s.still(r, c.app.ID, now)
		if said = v; v.Do != Warn {
			return nil, nil
		}
		row, meta, ok := Activities.Get(r, c.app.ID)
		at, about := now.UTC(), last
		row.AppID, row.Last, row.WarnedAt, row.WarnedFor = c.app.ID, later(row.Last, last), &at, &about
		put := Activities.Insert(&row)
		if ok {
			put = Activities.PutIf(&row, meta.ModifyIndex)
		}
		return []raftstore.Op{put, events.Emit(ctx, now, "app.idle_warning", ref(cur.app), "", "", map[string]any{
			"action": cur.action, "days": cur.days, "last_activity": last, "action_at": v.ActionAt.UTC(),
		})}, nil
	})
	attrs := []any{"app_id", c.app.ID, "action", c.action, "days", c.days}
	switch {
	case err != nil:
		s.d.Log.Warn("idle: could not warn of the idle action; the next check tries again", append(attrs, "err", errcode.MessageOf(err))...)
	case said.Do == Warn:
		s.d.Log.Info("idle: warned the owner of the idle action", append(attrs, "action_at", said.ActionAt)...)
	}
}

// act stops or deletes an idle app whose action is due.
func (s *Service) act(ctx context.Context, c candidate) {
	attrs := []any{"app_id", c.app.ID, "action", c.action, "days", c.days}
	var done bool
	var err error
	if c.action == spec.IdleDelete {
		done, err = s.delete(ctx, c)
	} else {
		done, err = s.stop(ctx, c)
	}
	switch {
	case err != nil:
		s.d.Log.Warn("idle: could not act on the idle app; the next check tries again", append(attrs, "err", errcode.MessageOf(err))...)
	case done && c.action == spec.IdleDelete:
		s.d.Log.Warn("idle: deleted the app: no request for its idle days", attrs...)
	case done:
		s.d.Log.Warn("idle: stopped the app: no request for its idle days; it stays stopped until somebody starts it", attrs...)
	}
}

// stop stops the app through the scheduler, with app.idle_stopped, if
// the action is still due on the view the write reads.
func (s *Service) stop(ctx context.Context, c candidate) (bool, error) {
	now := s.d.Now()
	return s.d.Stopper.StopBecause(ctx, c.app.ID, apps.StoppedIdle, func(r *raftstore.Reader, a apps.App) ([]raftstore.Op, bool, error) {
		v, cur, last := s.still(r, c.app.ID, now)
		if v.Do != Act || cur.action != spec.IdleStop {
			return nil, false, nil
		}
		return []raftstore.Op{events.Emit(ctx, now, "app.idle_stopped", ref(a), "app", a.ID, map[string]any{
			"days": cur.days, "last_activity": last,
		})}, true, nil
	})
}

// delete deletes the app as DELETE /apps/{id}?backup=true does (an
// on_delete backup first when it has volumes), with app.deleted's reason
// idle, if the action is still due on a fresh view.
func (s *Service) delete(ctx context.Context, c candidate) (bool, error) {
	if v, cur, _ := s.still(s.d.Store.Read(), c.app.ID, s.d.Now()); v.Do != Act || cur.action != spec.IdleDelete {
		return false, nil
	}
	if err := s.d.Deleter.DeleteApp(ctx, c.app.ID, apps.Decision{Backup: true, Reason: "idle"}, ""); err != nil {
		if errcode.Has(err, errcode.NotFound) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// sweep removes the records of apps that no longer exist (a flush that
// raced a deletion).
func (s *Service) sweep(ctx context.Context) {
	r := s.d.Store.Read()
	items, _ := Activities.List(r, raftstore.Query{Filter: func(v any) bool { return !apps.Exists(r, v.(*Activity).AppID) }})
	if len(items) == 0 {
		return
	}
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		var ops []raftstore.Op
		for _, it := range items {
			if !apps.Exists(r, it.Value.AppID) {
				ops = append(ops, ForgetOps(r, it.Value.AppID)...)
			}
		}
		return ops, nil
	})
	if err != nil {
		s.d.Log.Warn("idle: could not remove the activity records of deleted apps", "err", errcode.MessageOf(err))
	}
}

func ref(a apps.App) *events.AppRef { return &events.AppRef{ID: a.ID, Name: a.Name, Slug: a.Slug} }
