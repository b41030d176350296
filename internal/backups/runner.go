package backups

import (
	"context"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/volumes"
	"github.com/svchost/svc/raftstore"
)

// runnerTick is how often the runner looks for work.
const runnerTick = 2 * time.Second

// Run is the leader loop of backups: it takes the pending ones (asked for,
// or the rolling ones it schedules: one per app with volumes every
// RollingEvery) one at a time, and removes the rolling ones retention no
// longer keeps. A backup left running by a leader that went away is
// failed (it is taken again at the next hour).
func (s *Service) Run(ctx context.Context) error {
	s.failInterrupted(ctx)
	t := time.NewTicker(runnerTick)
	defer t.Stop()
	lastRoll := time.Time{}
	for {
		for s.takePending(ctx) {
		}
		if now := s.d.Now(); now.Sub(lastRoll) >= time.Minute {
			lastRoll = now
			s.schedule(ctx, now)
			s.scheduleBundle(ctx, now)
			s.expire(ctx, now)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.kick: // a backup asked for on this server
		}
	}
}

// failInterrupted fails the backups a former leader left running.
func (s *Service) failInterrupted(ctx context.Context) {
	items, _ := Backups.List(s.d.Store.Read(), raftstore.Query{})
	for _, it := range items {
		if it.Value.State != StateRunning || it.Value.Kind == KindOnDelete {
			continue
		}
		b := it.Value
		s.record(ctx, b, errcode.New(errcode.StoreUnavailable, "the server taking backup %s stopped before it completed", b.ID).
			WithRemedy("take it again: POST /api/v1/backups"))
	}
}

// record fails a backup with err (its events with it).
func (s *Service) record(ctx context.Context, b Backup, err error) {
	_ = s.finish(ctx, b, backupOutcome{err: err})
}

// takePending takes the oldest pending backup; false when there was none.
func (s *Service) takePending(ctx context.Context) bool {
	items, _ := Backups.List(s.d.Store.Read(), raftstore.Query{Index: "pending", Prefix: true, Limit: 1})
	if len(items) == 0 || ctx.Err() != nil {
		return false
	}
	b, mi := items[0].Value, items[0].Meta.ModifyIndex
	b.State = StateRunning
	if _, err := s.d.Store.Update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) {
		return []raftstore.Op{Backups.PutIf(&b, mi)}, nil
	}); err != nil {
		s.d.Log.Warn("start a backup", "backup_id", b.ID, "err", err)
		return false
	}
	if err := s.take(ctx, b); err != nil {
		s.d.Log.Warn("backup failed", "backup_id", b.ID, "app_id", b.app(), "err", err)
	}
	return true
}

// schedule records a pending rolling backup of every app with volumes
// whose newest rolling backup is RollingEvery old.
func (s *Service) schedule(ctx context.Context, now time.Time) {
	r := s.d.Store.Read()
	newest := map[string]time.Time{}
	items, _ := Backups.List(r, raftstore.Query{})
	for _, it := range items {
		if b := it.Value; b.Kind == KindRolling && b.AppID != nil && b.CreatedAt.After(newest[*b.AppID]) {
			newest[*b.AppID] = b.CreatedAt
		}
	}
	for _, appID := range volumes.AppsWithVolumes(r) {
		if now.Sub(newest[appID]) < RollingEvery {
			continue
		}
		_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
			_, ops, err := s.newBackupOps(ctx, r, appID, KindRolling, StatePending, true, now)
			if errcode.Has(err, errcode.NotFound) || errcode.Has(err, errcode.StateInvalid) {
				return nil, nil // deleted, or its volumes gone, meanwhile
			}
			return ops, err
		})
		if err != nil {
			s.d.Log.Warn("schedule a rolling backup", "app_id", appID, "err", err)
		}
	}
}

// scheduleBundle records a pending installation bundle when bundles are
// scheduled (BundleEvery) and the newest scheduled one is that old.
func (s *Service) scheduleBundle(ctx context.Context, now time.Time) {
	if s.d.BundleEvery <= 0 {
		return
	}
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		items, _ := Backups.List(r, raftstore.Query{})
		for _, it := range items {
			if b := it.Value; b.Kind == KindDR && b.Scheduled && now.Sub(b.CreatedAt) < s.d.BundleEvery {
				return nil, nil
			}
		}
		_, ops, err := s.newBundleOps(ctx, r, true, now)
		return ops, err
	})
	if err != nil {
		s.d.Log.Warn("schedule an installation bundle", "err", err)
	}
}

// expire removes the rolling backups and scheduled bundles retention no
// longer keeps: from the repository first, then their records.
func (s *Service) expire(ctx context.Context, now time.Time) {
	byApp := map[string][]Backup{}
	var bundles []Backup
	items, _ := Backups.List(s.d.Store.Read(), raftstore.Query{})
	for _, it := range items {
		switch b := it.Value; {
		case b.Kind == KindRolling:
			byApp[b.app()] = append(byApp[b.app()], b)
		case b.Kind == KindDR && b.Scheduled:
			bundles = append(bundles, b)
		}
	}
	for _, id := range ExpiredBundles(bundles, s.d.BundleKeep, now) {
		if err := s.remove(ctx, id); err != nil {
			s.d.Log.Warn("remove an expired installation bundle", "backup_id", id, "err", err)
			return
		}
	}
	for _, list := range byApp {
		for _, id := range Expired(list, now) {
			if err := s.remove(ctx, id); err != nil {
				s.d.Log.Warn("remove an expired backup", "backup_id", id, "err", err)
				return
			}
		}
	}
}

// remove deletes a backup from the repository, then its record.
func (s *Service) remove(ctx context.Context, id string) error {
	repo, err := s.d.Repo()
	if err != nil {
		return err
	}
	if err := repo.Delete(ctx, id); err != nil {
		return err
	}
	_, err = s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		if _, _, ok := Backups.Get(r, id); !ok {
			return nil, nil
		}
		return []raftstore.Op{Backups.Delete(id)}, nil
	})
	return err
}
