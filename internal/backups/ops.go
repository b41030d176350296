package backups

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/volumes"
	"github.com/svchost/svc/raftstore"
)

// DeleteApp deletes an app with the caller's decision about its data
// (guarantee 4; the decision's rules are the apps package's): with backup,
// an on_delete backup of its volumes is taken first and the app is deleted
// only once it completed, named in app.deleted; with force the volumes'
// data is discarded. An app whose volumes no deploy made yet has no data
// to copy.
func (s *Service) DeleteApp(ctx context.Context, appID string, d apps.Decision, _ string) error {
	backupID := ""
	if d.Backup && !d.Force && len(volumes.Attached(s.d.Store.Read(), appID)) > 0 {
		b, err := s.takeNow(ctx, appID, KindOnDelete)
		if err != nil {
			return err
		}
		backupID = b.ID
	}
	return s.d.Volumes.DeleteApp(ctx, appID, d, backupID)
}

// RequireFinalCopy is the volumes.Guard of host policy's
// require_backup_before_destroy for a kept volume: its data may be
// discarded only while a completed backup holds it as it was when its
// app went: the app's final (on_delete) backup, or one taken after the
// app was deleted (a disaster-recovery bundle). Nothing writes a kept
// volume, so such a copy is fresh; an older rolling backup may not be.
// Otherwise POLICY_BACKUP_REQUIRED.
func RequireFinalCopy(r *raftstore.Reader, v volumes.Volume) error {
	all, _ := Backups.List(r, raftstore.Query{})
	for _, it := range all {
		b := it.Value
		if b.State != StateCompleted || !slices.ContainsFunc(b.Volumes, func(bv Volume) bool { return bv.ID == v.ID }) {
			continue
		}
		if b.Kind == KindOnDelete || (v.AppGoneAt != nil && !b.CreatedAt.Before(*v.AppGoneAt)) {
			return nil
		}
	}
	return errcode.New(errcode.PolicyBackupRequired, "host policy requires a backup before volume %s's data is discarded, and no completed backup holds it as its app left it", v.ID).
		WithDetail("setting", "require_backup_before_destroy").WithDetail("volume_id", v.ID).
		WithRemedy("take a disaster-recovery bundle (POST /api/v1/backups without app_id), which holds every kept volume, then delete the volume")
}

// takeNow records a running backup of the app and takes it in this call.
func (s *Service) takeNow(ctx context.Context, appID, kind string) (Backup, error) {
	now := s.d.Now()
	var b Backup
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		var ops []raftstore.Op
		var err error
		b, ops, err = s.newBackupOps(ctx, r, appID, kind, StateRunning, false, now)
		return ops, err
	})
	if err != nil {
		return Backup{}, fmt.Errorf("final backup: %w", err)
	}
	if err := s.take(ctx, b); err != nil {
		return Backup{}, fmt.Errorf("final backup %s: %w", b.ID, err)
	}
	return b, nil
}

// Verified is the outcome of a verification: the backup, whether every
// part is whole and decrypts, and the problems found.
type Verified struct {
	Backup   Backup           `json:"backup"`
	OK       bool             `json:"ok"`
	Problems []*errcode.Error `json:"problems"`
}

// maxProblems caps the problems a verification answers.
const maxProblems = 20

// Verify reads every part of a completed backup back from the
// repository, decrypting it and checking its integrity, without touching
// anything live; a whole backup is stamped verified_at.
func (s *Service) Verify(ctx context.Context, id string) (Verified, error) {
	b, err := s.completed(id)
	if err != nil {
		return Verified{}, err
	}
	problems, err := s.check(ctx, b)
	if err != nil {
		return Verified{}, err
	}
	out := Verified{Backup: b, OK: len(problems) == 0, Problems: problems}
	now := s.d.Now()
	_, err = s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		cur, meta, ok := Backups.Get(r, id)
		if !ok {
			return nil, errcode.New(errcode.NotFound, "no backup %s", id)
		}
		var ops []raftstore.Op
		if out.OK {
			cur.VerifiedAt = &now
			ops = append(ops, Backups.PutIf(&cur, meta.ModifyIndex))
		}
		out.Backup = cur
		return append(ops, audit.Record(ctx, now, "backup.verify", cur.app(), audit.Target{Kind: "backup", ID: id},
			map[string]any{"ok": out.OK, "problems": len(problems)})), nil
	})
	return out, err
}

// check verifies a backup in the repository and returns its problems as
// coded errors (BACKUP_INCOMPLETE, BACKUP_DECRYPT_FAILED); an error
// reaching the repository is returned as the error.
func (s *Service) check(ctx context.Context, b Backup) ([]*errcode.Error, error) {
	repo, err := s.d.Repo()
	if err != nil {
		return nil, err
	}
	errs := repo.Verify(ctx, b.ID)
	problems := []*errcode.Error{}
	for _, e := range errs {
		ce, ok := errcode.As(e)
		switch {
		case !ok:
			return nil, e
		case ce.Code != errcode.BackupIncomplete && ce.Code != errcode.BackupDecryptFailed && ce.Code != errcode.NotFound:
			return nil, e
		case ce.Code == errcode.NotFound:
			ce = errcode.New(errcode.BackupIncomplete, "backup %s is not in the backup storage: its manifest is missing", b.ID)
		}
		if len(problems) < maxProblems {
			problems = append(problems, ce)
		}
	}
	return problems, nil
}

// completed returns a backup that can be verified or restored.
func (s *Service) completed(id string) (Backup, error) {
	b, err := s.Get(id)
	if err != nil {
		return Backup{}, err
	}
	if b.State != StateCompleted {
		return Backup{}, errcode.New(errcode.StateInvalid, "backup %s is %s, not completed", id, b.State)
	}
	return b, nil
}

// RestoreRequest names the backup an app's volumes are restored from.
type RestoreRequest struct {
	BackupID string `json:"backup_id" doc:"the backup (one of this app's) to restore the app's volumes from"`
}

// RestoreApp restores an app's volumes from one of its backups. It checks
// the backup whole first (every part read back, decrypted and checked) and
// refuses an incomplete or undecryptable one (BACKUP_INCOMPLETE,
// BACKUP_DECRYPT_FAILED) before anything changes; then, in the background,
// it pauses the app, swaps every volume's data for the backup's all or
// nothing, and restarts the app, with app.data_restored and
// backup.restored. For an app whose volumes are copied from another
// machine, the backup is restored (every chunk checked) into staging
// directories of this server, and each volume copied in by its runtime in
// turn (each swapped whole on its node; not all of them at once). It
// returns the backup.
func (s *Service) RestoreApp(ctx context.Context, appID, backupID string) (Backup, error) {
	if backupID == "" {
		return Backup{}, errcode.Invalid("backup_id", "backup_id names the backup to restore").
			WithRemedy("GET /api/v1/backups?app_id=%s lists the app's backups", appID)
	}
	b, err := s.completed(backupID)
	if err != nil {
		return Backup{}, err
	}
	if b.app() != appID {
		return Backup{}, errcode.New(errcode.NotFound, "app %s has no backup %s", appID, backupID).WithDetail("field", "backup_id")
	}
	return b, s.restore(ctx, b)
}

// Restore restores from a backup by its ID alone (an app's, onto the app
// with its ID).
func (s *Service) Restore(ctx context.Context, backupID string) (Backup, error) {
	b, err := s.completed(backupID)
	if err != nil {
		return Backup{}, err
	}
	if b.Kind == KindDR {
		return Backup{}, errcode.New(errcode.PlanCapabilityUnsupp, "a disaster-recovery bundle is restored into a fresh installation, not over a running one").
			WithRemedy("restore it into a new installation with svc restore --bundle %s (docs/disaster-recovery.md)", b.ID)
	}
	return b, s.restore(ctx, b)
}

func (s *Service) restore(ctx context.Context, b Backup) error {
	appID := b.app()
	targets, err := s.targets(appID, b)
	if err != nil {
		return err
	}
	// What would stop the restore after it is answered is refused now:
	// a runtime that cannot pause the app, a backup that does not read
	// back whole.
	if err := s.d.Runner.CanQuiesce(appID); err != nil {
		return err
	}
	problems, err := s.check(ctx, b)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return problems[0]
	}
	s.mu.Lock()
	if s.restores[appID] {
		s.mu.Unlock()
		return errcode.New(errcode.StateInvalid, "a restore of app %s is under way", appID).WithRemedy("wait for its backup.restored event")
	}
	s.restores[appID] = true
	s.mu.Unlock()
	who := actor.From(ctx)
	now := s.d.Now()
	if _, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		return []raftstore.Op{audit.Record(ctx, now, "backup.restore", appID, audit.Target{Kind: "backup", ID: b.ID},
			map[string]any{"volumes": len(targets)})}, nil
	}); err != nil {
		s.done(appID)
		return err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.done(appID)
		ctx := actor.With(context.WithoutCancel(ctx), who)
		if err := s.apply(ctx, b, targets); err != nil {
			s.d.Log.Error("restore failed", "app_id", appID, "backup_id", b.ID, "err", err)
		}
	}()
	return nil
}

func (s *Service) done(appID string) {
	s.mu.Lock()
	delete(s.restores, appID)
	s.mu.Unlock()
}

// targets maps the backup's parts onto the app's volumes of the same
// names (for an app whose volumes are copied from elsewhere, onto
// directories of RemoteStaging they are copied in from); a volume the app
// no longer has is STATE_INVALID.
func (s *Service) targets(appID string, b Backup) (map[string]string, error) {
	remote, err := s.remote(appID)
	if err != nil {
		return nil, err
	}
	r := s.d.Store.Read()
	if !apps.Exists(r, appID) {
		return nil, errcode.New(errcode.StateInvalid, "app %s was deleted; its backup is restored onto a new app", appID).
			WithRemedy("create the app again, take its kept volumes over (POST /apps/{id}/volumes with volume_id), then restore")
	}
	live := volumes.Attached(r, appID)
	out := map[string]string{}
	for _, v := range b.Volumes {
		cur, ok := live[v.Name]
		if !ok {
			return nil, errcode.New(errcode.StateInvalid, "app %s has no volume %s any more", appID, v.Name).
				WithRemedy("declare the volume again (POST /api/v1/apps/%s/volumes) and deploy, then restore", appID)
		}
		out[partName(v.ID)] = s.d.Data.VolumePath(cur.ID)
		if remote {
			out[partName(v.ID)] = filepath.Join(s.restoreStaging(b), cur.ID)
		}
	}
	return out, nil
}

// restoreStaging is where a restore of an app whose volumes are copied
// from elsewhere stages them.
func (s *Service) restoreStaging(b Backup) string {
	return filepath.Join(s.d.RemoteStaging, "restore-"+b.ID)
}

// apply swaps the volumes' data with the app paused, restarts it, and
// records the outcome.
func (s *Service) apply(ctx context.Context, b Backup, targets map[string]string) error {
	appID := b.app()
	err := s.swap(ctx, b, targets)
	if err == nil {
		// New processes see the restored data (a sandbox bound the old
		// directory); an app that runs nothing is left as it is.
		if _, rerr := s.d.Runner.Restart(ctx, appID); rerr != nil && !errcode.Has(rerr, errcode.StateInvalid) {
			s.d.Log.Warn("restart after a restore", "app_id", appID, "err", rerr)
		}
	}
	now := s.d.Now()
	names := make([]string, 0, len(b.Volumes))
	for _, v := range b.Volumes {
		names = append(names, v.Name)
	}
	_, werr := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		ref := appRef(r, b)
		if err != nil {
			p := problemOf(err)
			return []raftstore.Op{events.Emit(ctx, now, "backup.failed", ref, "backup", b.ID, map[string]any{
				"scheduled": false, "message": "restore: " + p.Message, "remedy": p.Remedy, "reason": p.Code,
			})}, nil
		}
		return []raftstore.Op{
			events.Emit(ctx, now, "app.data_restored", ref, "backup", b.ID, map[string]any{"volumes": names}),
			events.Emit(ctx, now, "backup.restored", ref, "backup", b.ID, map[string]any{"restored": names}),
		}, nil
	})
	return errors.Join(err, werr)
}

// swap swaps the volumes' data for the backup's with the app paused, and
// hands it to the app's user; for an app whose volumes are copied from
// elsewhere, it restores them into staging directories and copies each in
// (CopyVolumeIn: the runtime's own swap), live.
func (s *Service) swap(ctx context.Context, b Backup, targets map[string]string) error {
	appID := b.app()
	repo, err := s.d.Repo()
	if err != nil {
		return err
	}
	resume, _, err := s.d.Runner.Quiesce(ctx, appID)
	if err != nil {
		return err
	}
	defer resume()
	remote, err := s.remote(appID)
	if err != nil {
		return err
	}
	if remote {
		// Restored (every chunk checked) into staging directories of
		// this server, then copied in, volume by volume.
		defer os.RemoveAll(s.restoreStaging(b))
	}
	if err := repo.Restore(ctx, b.ID, targets); err != nil {
		return err
	}
	if remote {
		for _, v := range b.Volumes {
			if err := s.d.Remote.CopyVolumeIn(ctx, appID, v.Name, targets[partName(v.ID)]); err != nil {
				return fmt.Errorf("copy volume %s of app %s in: %w", v.Name, appID, err)
			}
		}
		return nil
	}
	for _, v := range s.liveVolumes(appID, b) {
		if err := s.d.Data.HandOver(ctx, appID, v); err != nil {
			return err
		}
	}
	return nil
}

// Retention of rolling backups: the newest of each of the last
// KeepHourly hours, and of each of the last KeepDaily days.
const (
	KeepHourly   = 24
	KeepDaily    = 7
	RollingEvery = time.Hour
)

// Expired returns the rolling backups of one app to remove at now: every
// completed one that is neither the newest of one of the last KeepHourly
// hours nor the newest of one of the last KeepDaily days (UTC), and every
// failed one older than a day. It is pure; list is in any order.
func Expired(list []Backup, now time.Time) []string {
	newest := func(span time.Duration, n int) map[string]bool {
		by := map[time.Time]Backup{}
		for _, b := range list {
			k := b.CreatedAt.UTC().Truncate(span)
			if b.Kind != KindRolling || b.State != StateCompleted || now.UTC().Truncate(span).Sub(k) >= time.Duration(n)*span {
				continue
			}
			if cur, ok := by[k]; !ok || b.CreatedAt.After(cur.CreatedAt) {
				by[k] = b
			}
		}
		keep := map[string]bool{}
		for _, b := range by {
			keep[b.ID] = true
		}
		return keep
	}
	hourly, daily := newest(time.Hour, KeepHourly), newest(24*time.Hour, KeepDaily)
	var out []string
	for _, b := range list {
		switch {
		case b.Kind != KindRolling || hourly[b.ID] || daily[b.ID]:
		case b.State == StateCompleted, b.State == StateFailed && now.Sub(b.CreatedAt) > 24*time.Hour:
			out = append(out, b.ID)
		}
	}
	return out
}

// ExpiredBundles returns the scheduled installation bundles to remove at
// now: the completed ones but the newest keep (at least one), and failed
// ones older than a day. It is pure; list is in any order.
func ExpiredBundles(list []Backup, keep int, now time.Time) []string {
	keep = max(keep, 1)
	done := slices.DeleteFunc(slices.Clone(list), func(b Backup) bool { return b.State != StateCompleted })
	slices.SortFunc(done, func(a, b Backup) int { return -a.CreatedAt.Compare(b.CreatedAt) })
	var out []string
	for i, b := range done {
		if i >= keep {
			out = append(out, b.ID)
		}
	}
	for _, b := range list {
		if b.State == StateFailed && now.Sub(b.CreatedAt) > 24*time.Hour {
			out = append(out, b.ID)
		}
	}
	return out
}

// liveVolumes returns the IDs of the app's volumes the backup's map onto.
func (s *Service) liveVolumes(appID string, b Backup) []string {
	live := volumes.Attached(s.d.Store.Read(), appID)
	var out []string
	for _, v := range b.Volumes {
		if cur, ok := live[v.Name]; ok {
			out = append(out, cur.ID)
		}
	}
	return out
}
