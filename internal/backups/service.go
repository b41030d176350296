package backups

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/volumes"
	"github.com/svchost/svc/raftstore"
)

// Store is what the service needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

var _ Store = (*raftstore.Store)(nil)

// Repo is the backup repository the service writes backups to (the
// encrypted repository of internal/backuprepo on the configured backup
// storage). Verify and Restore check every part; their refusals are
// BACKUP_INCOMPLETE or BACKUP_DECRYPT_FAILED (NOT_FOUND for a backup the
// storage does not hold).
type Repo interface {
	Write(ctx context.Context, backupID string, parts []Part) (Stored, error)
	Verify(ctx context.Context, backupID string) []error
	Restore(ctx context.Context, backupID string, targets map[string]string) error
	Delete(ctx context.Context, backupID string) error
}

// Part is one directory tree a backup holds, by name; Hold, if set,
// pauses what writes it while it is read.
type Part struct {
	Name string
	Dir  string
	Hold func(ctx context.Context) (release func(), err error)
}

// Stored is what a backup came to in the repository: the bytes stored
// for it (new and reused chunks) and the bytes it holds.
type Stored struct {
	SizeBytes  int64
	PlainBytes int64
}

// Data is where volumes' data is (the runtime that keeps it): a
// volume's directory, and handing restored data to the app's user.
type Data interface {
	VolumePath(volumeID string) string
	HandOver(ctx context.Context, appID, volumeID string) error
}

// Runner pauses and restarts what an app runs around a copy or a
// restore (the scheduler).
type Runner interface {
	Quiesce(ctx context.Context, appID string) (resume func(), how string, err error)
	CanQuiesce(appID string) error
	Restart(ctx context.Context, appID string) (apps.App, error)
}

// Remote copies the volumes of apps whose runtime keeps them on other
// machines (the scheduler, for Nomad's host volumes) to and from a
// directory of this server: CopiesVolumes says whether an app's runtime
// does; CopyVolumeOut copies a volume (by its name in the app) into dst,
// CopyVolumeIn replaces its contents with src's.
type Remote interface {
	CopiesVolumes(appID string) bool
	CopyVolumeOut(ctx context.Context, appID, volume, dst string) error
	CopyVolumeIn(ctx context.Context, appID, volume, src string) error
}

// AppDeleter deletes an app keeping or discarding its volumes (the
// volumes package), naming the final backup.
type AppDeleter interface {
	DeleteApp(ctx context.Context, appID string, d apps.Decision, backupID string) error
}

var _ AppDeleter = (*volumes.Service)(nil)

// Deps are the service's collaborators. Repo returns the repository over
// the configured backup storage (ADAPTER_UNAVAILABLE when there is none).
type Deps struct {
	Store   Store
	Repo    func() (Repo, error)
	Data    Data
	Runner  Runner
	Volumes AppDeleter
	// Installation saves the store for disaster-recovery bundles, which
	// also hold Dirs (part name → directory of this server: the keyring,
	// apps' sources, builds); Staging is a directory of this server for
	// the store's files while a bundle is written.
	Installation Installation
	Dirs         map[string]string
	Staging      string
	// BundleEvery schedules an installation bundle that often (0: only
	// when asked); the newest BundleKeep completed scheduled ones are kept.
	BundleEvery time.Duration
	BundleKeep  int
	// Remote copies the volumes of apps whose runtime keeps them
	// elsewhere, through RemoteStaging, a directory of this server each
	// is copied into before it is written to the repository, and restored
	// into before it is copied back; nil when no runtime does.
	Remote        Remote
	RemoteStaging string
	Now           func() time.Time
	Log           *slog.Logger
}

// Service takes, lists, verifies and restores backups.
type Service struct {
	d Deps
	// restores are the restores under way, by app ID: one at a time.
	mu       sync.Mutex
	restores map[string]bool
	wg       sync.WaitGroup
	// kick wakes the runner for a backup asked for now.
	kick chan struct{}
}

// New returns the backups service.
func New(d Deps) *Service {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{d: d, restores: map[string]bool{}, kick: make(chan struct{}, 1)}
}

// Wait waits for restores under way (a server shutting down).
func (s *Service) Wait() { s.wg.Wait() }

// Filter narrows a listing.
type Filter struct {
	AppID string
	Kind  string
}

// List returns the backups, newest first.
func (s *Service) List(f Filter) ([]Backup, error) {
	if f.Kind != "" && !slices.Contains([]string{KindRolling, KindOnDelete, KindDR}, f.Kind) {
		return nil, errcode.Invalid("kind", "kind is rolling, on_delete or dr_bundle")
	}
	q := raftstore.Query{}
	if f.AppID != "" {
		q = raftstore.Query{Index: "app", Key: f.AppID}
	}
	items, _ := Backups.List(s.d.Store.Read(), q)
	out := []Backup{}
	for _, it := range items {
		if f.Kind == "" || it.Value.Kind == f.Kind {
			out = append(out, it.Value)
		}
	}
	slices.SortFunc(out, func(a, b Backup) int { return -a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// Get returns one backup.
func (s *Service) Get(id string) (Backup, error) {
	b, _, ok := Backups.Get(s.d.Store.Read(), id)
	if !ok {
		return Backup{}, errcode.New(errcode.NotFound, "no backup %s", id)
	}
	return b, nil
}

// Request asks for a backup now: of an app's volumes, or without AppID a
// disaster-recovery bundle of the whole installation.
type Request struct {
	AppID string `json:"app_id,omitempty" doc:"the app whose volumes to back up; without it, a dr_bundle of the whole installation"`
}

// Create records a backup asked for now (pending; the leader's runner
// takes it) and answers it.
func (s *Service) Create(ctx context.Context, req Request) (Backup, error) {
	now := s.d.Now()
	var out Backup
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		if req.AppID == "" {
			b, ops, err := s.newBundleOps(ctx, r, false, now)
			out = b
			return ops, err
		}
		b, ops, err := s.newBackupOps(ctx, r, req.AppID, KindRolling, StatePending, false, now)
		out = b
		return ops, err
	})
	if err != nil {
		return Backup{}, fmt.Errorf("create backup: %w", err)
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return out, nil
}

// newBackupOps builds a new backup of an app's volumes, with its audit
// entry; STATE_INVALID for an app without volumes.
func (s *Service) newBackupOps(ctx context.Context, r *raftstore.Reader, appID, kind, state string, scheduled bool, now time.Time) (Backup, []raftstore.Op, error) {
	app, _, ok := apps.Apps.Get(r, appID)
	if !ok {
		return Backup{}, nil, errcode.New(errcode.NotFound, "no app %s", appID).WithDetail("field", "app_id")
	}
	vols := volumes.Attached(r, appID)
	if len(vols) == 0 {
		return Backup{}, nil, errcode.New(errcode.StateInvalid, "app %s has no volumes to back up", appID).
			WithRemedy("a volume is made when a deploy first mounts it")
	}
	id := appID
	b := Backup{ID: ids.NewAt(ids.Backup, now), Kind: kind, AppID: &id, AppSlug: app.Slug, State: state, Scheduled: scheduled, CreatedAt: now}
	for _, name := range slices.Sorted(maps.Keys(vols)) {
		v := vols[name]
		b.Volumes = append(b.Volumes, Volume{ID: v.ID, Name: v.Name, SizeBytes: v.SizeBytes})
	}
	return b, []raftstore.Op{Backups.Insert(&b), audit.Record(ctx, now, "backup.create", appID, audit.Target{Kind: "backup", ID: b.ID},
		map[string]any{"kind": kind, "scheduled": scheduled, "volumes": len(b.Volumes)})}, nil
}

// take copies a running backup's volumes into the repository and records
// the outcome. It returns the failure.
func (s *Service) take(ctx context.Context, b Backup) error {
	if b.Kind == KindDR {
		return s.takeBundle(ctx, b)
	}
	man, how, err := s.copyVolumes(ctx, b)
	return errors.Join(err, s.finish(ctx, b, backupOutcome{stored: man, how: how, err: err}))
}

// backupOutcome is what taking a backup came to.
type backupOutcome struct {
	stored Stored
	how    string
	err    error
	store  *raftstore.Saved
	// skipped are the volumes a bundle left out.
	skipped []Volume
}

// finish records a backup's outcome: completed with backup.completed, or
// failed with backup.failed.
func (s *Service) finish(ctx context.Context, b Backup, o backupOutcome) error {
	now := s.d.Now()
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		cur, meta, ok := Backups.Get(r, b.ID)
		if !ok {
			return nil, nil
		}
		cur.CompletedAt, cur.Consistency, cur.Store, cur.Skipped = &now, o.how, o.store, o.skipped
		ref := appRef(r, cur)
		if o.err != nil {
			cur.State, cur.Error = StateFailed, problemOf(o.err)
			return []raftstore.Op{Backups.PutIf(&cur, meta.ModifyIndex),
				events.Emit(ctx, now, "backup.failed", ref, "backup", cur.ID, map[string]any{
					"scheduled": cur.Scheduled, "message": cur.Error.Message, "remedy": cur.Error.Remedy, "reason": cur.Error.Code,
				})}, nil
		}
		cur.State, cur.SizeBytes, cur.PlainBytes = StateCompleted, o.stored.SizeBytes, o.stored.PlainBytes
		return []raftstore.Op{Backups.PutIf(&cur, meta.ModifyIndex),
			events.Emit(ctx, now, "backup.completed", ref, "backup", cur.ID, map[string]any{
				"backup_id": cur.ID, "kind": cur.Kind, "size_bytes": cur.SizeBytes,
			})}, nil
	})
	return err
}

// copyVolumes writes the backup's volumes to the repository with the app
// quiesced, and says how the copy was consistent.
func (s *Service) copyVolumes(ctx context.Context, b Backup) (Stored, string, error) {
	repo, err := s.d.Repo()
	if err != nil {
		return Stored{}, "", err
	}
	remote, err := s.remote(b.app())
	if err != nil {
		return Stored{}, "", err
	}
	staging := filepath.Join(s.d.RemoteStaging, b.ID)
	if remote {
		defer os.RemoveAll(staging)
	}
	parts := make([]Part, 0, len(b.Volumes))
	for _, v := range b.Volumes {
		if remote {
			parts = append(parts, s.copiedPart(b.app(), v, filepath.Join(staging, v.ID)))
			continue
		}
		dir := s.d.Data.VolumePath(v.ID)
		// A volume no job mounted yet is empty.
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return Stored{}, "", fmt.Errorf("volume %s: %w", v.ID, err)
		}
		parts = append(parts, Part{Name: partName(v.ID), Dir: dir})
	}
	resume, how, err := s.d.Runner.Quiesce(ctx, b.app())
	if _, coded := errcode.As(err); err != nil && !coded {
		err = errcode.Wrap(err, errcode.AdapterFailed, "pause app %s for the copy: %v", b.app(), err)
	}
	if err != nil {
		return Stored{}, "", err
	}
	defer resume()
	man, err := repo.Write(ctx, b.ID, parts)
	return man, how, err
}

// remote says whether the app's volumes are copied from elsewhere
// (Deps.Remote); such an app on a server without RemoteStaging is
// PLAN_CAPABILITY_UNSUPPORTED.
func (s *Service) remote(appID string) (bool, error) {
	if appID == "" || s.d.Remote == nil || !s.d.Remote.CopiesVolumes(appID) {
		return false, nil
	}
	if s.d.RemoteStaging == "" {
		return false, errcode.New(errcode.PlanCapabilityUnsupp, "app %s keeps its volumes on another machine, and this server has no staging directory to copy them through", appID)
	}
	return true, nil
}

// copiedPart is the part of a volume copied from elsewhere: when the
// repository is about to read it, the volume is copied out into dir (a
// volume no deploy made yet is empty), which is removed once it was read,
// so that one volume at a time is staged on this server.
func (s *Service) copiedPart(appID string, v Volume, dir string) Part {
	return Part{Name: partName(v.ID), Dir: dir, Hold: func(ctx context.Context) (func(), error) {
		_ = os.RemoveAll(dir)
		err := s.d.Remote.CopyVolumeOut(ctx, appID, v.Name, dir)
		if errcode.Has(err, errcode.NotFound) {
			err = os.MkdirAll(dir, 0o700)
		}
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("copy volume %s of app %s: %w", v.Name, appID, err)
		}
		return func() { _ = os.RemoveAll(dir) }, nil
	}}
}

// partName is a volume's part in a backup.
func partName(volumeID string) string { return "volume/" + volumeID }

// appRef names the backup's app for its events (nil for a bundle, or an
// app deleted meanwhile: the event is then install-wide).
func appRef(r *raftstore.Reader, b Backup) *events.AppRef {
	if b.AppID == nil {
		return nil
	}
	a, _, ok := apps.Apps.Get(r, *b.AppID)
	if !ok {
		return &events.AppRef{ID: *b.AppID, Slug: b.AppSlug, Name: b.AppSlug}
	}
	return &events.AppRef{ID: a.ID, Name: a.Name, Slug: a.Slug}
}

// problemOf records an error: its code, message and remedy.
func problemOf(err error) *Problem {
	if e, ok := errcode.As(err); ok {
		return &Problem{Code: string(e.Code), Message: e.Message, Remedy: e.Remedy}
	}
	return &Problem{Code: string(errcode.Internal), Message: "the backup failed; the server's log has the cause"}
}
