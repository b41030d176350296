package backups

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/volumes"
	"github.com/svchost/svc/raftstore"
)

// A disaster-recovery bundle holds the whole installation, as parts of one
// backup:
//
//   - PartStore: the replicated store saved consistently at one index (its
//     FSM snapshot and history chain, raftstore.Save), with its digest;
//   - the server's directories that are not in the store (Deps.Dirs: the
//     keyring, apps' sources, the process runtime's builds), by name;
//   - "volume/<vol_ID>": every volume's data, live or kept, each app's
//     volumes read while the app is paused, as a backup of the app is (or
//     copied live from the runtime that keeps them elsewhere, Remote).
//
// The store is saved first; the volumes are each as of their own copy, a
// little later. svc restore --bundle installs it all into a new work
// directory.
const PartStore = "store"

// Installation is what saves the replicated store for a bundle (the store
// itself).
type Installation interface {
	Save(ctx context.Context, dir string) (raftstore.Saved, error)
}

var _ Installation = (*raftstore.Store)(nil)

// VolumeOfPart returns the volume ID of a volume part.
func VolumeOfPart(part string) (string, bool) {
	id, ok := strings.CutPrefix(part, "volume/")
	return id, ok && id != ""
}

// newBundleOps builds a new disaster-recovery bundle of every volume the
// store records, with its audit entry.
func (s *Service) newBundleOps(ctx context.Context, r *raftstore.Reader, scheduled bool, now time.Time) (Backup, []raftstore.Op, error) {
	b := Backup{ID: ids.NewAt(ids.Backup, now), Kind: KindDR, State: StatePending, Scheduled: scheduled, CreatedAt: now, Volumes: []Volume{}}
	items, _ := volumes.Volumes.List(r, raftstore.Query{})
	for _, it := range items {
		if v := it.Value; v.DiscardAt == nil {
			b.Volumes = append(b.Volumes, Volume{ID: v.ID, Name: v.Name, SizeBytes: v.SizeBytes, AppID: v.AppID})
		}
	}
	return b, []raftstore.Op{Backups.Insert(&b), audit.Record(ctx, now, "backup.create", "", audit.Target{Kind: "backup", ID: b.ID},
		map[string]any{"kind": KindDR, "scheduled": scheduled, "volumes": len(b.Volumes)})}, nil
}

// takeBundle saves the store, then writes it, the server's directories and
// every volume to the repository, and records the outcome.
func (s *Service) takeBundle(ctx context.Context, b Backup) error {
	o := backupOutcome{how: "paused"}
	var saved raftstore.Saved
	var live bool
	saved, o.stored, o.skipped, live, o.err = s.writeBundle(ctx, b)
	if live {
		o.how = "live"
	}
	if o.err == nil {
		o.store = &saved
	}
	return errors.Join(o.err, s.finish(ctx, b, o))
}

// writeBundle writes the bundle's parts. The volumes of an app whose
// runtime copies them from elsewhere (Nomad's host volumes) are copied
// out, live (which it says), each just before it is written; a volume
// whose app runs on a runtime that keeps volumes elsewhere and cannot copy
// them is left out and returned as skipped.
func (s *Service) writeBundle(ctx context.Context, b Backup) (saved raftstore.Saved, stored Stored, skipped []Volume, live bool, err error) {
	if s.d.Installation == nil || s.d.Staging == "" {
		return saved, stored, nil, false, errcode.New(errcode.PlanCapabilityUnsupp, "this server cannot take disaster-recovery bundles")
	}
	repo, err := s.d.Repo()
	if err != nil {
		return saved, stored, nil, false, err
	}
	// One bundle at a time (the runner's): what a killed one left goes.
	_ = os.RemoveAll(s.d.Staging)
	staging := filepath.Join(s.d.Staging, b.ID)
	defer os.RemoveAll(staging)
	saved, err = s.d.Installation.Save(ctx, filepath.Join(staging, PartStore))
	if err != nil {
		return saved, stored, nil, false, fmt.Errorf("save the store: %w", err)
	}
	parts := []Part{{Name: PartStore, Dir: filepath.Join(staging, PartStore)}}
	for _, name := range slices.Sorted(maps.Keys(s.d.Dirs)) {
		dir := s.d.Dirs[name]
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			// Nothing of it yet (no app has a source): an empty part.
			dir = filepath.Join(staging, "empty")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return saved, stored, nil, false, err
			}
		}
		parts = append(parts, Part{Name: name, Dir: dir})
	}
	// An app's volumes are read while the app is paused; one pause per
	// app, from its first volume to its last.
	held := map[string]*appHold{}
	for _, v := range b.Volumes {
		running := v.AppID != "" && s.appLive(v.AppID)
		if running && errcode.Has(s.d.Runner.CanQuiesce(v.AppID), errcode.PlanCapabilityUnsupp) {
			skipped = append(skipped, v)
			continue
		}
		if running {
			remote, err := s.remote(v.AppID)
			if err != nil {
				return saved, stored, nil, false, err
			}
			if remote {
				parts = append(parts, s.copiedPart(v.AppID, v, filepath.Join(staging, "volumes", v.ID)))
				live = true
				continue
			}
		}
		dir := s.d.Data.VolumePath(v.ID)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return saved, stored, nil, false, fmt.Errorf("volume %s: %w", v.ID, err)
		}
		p := Part{Name: partName(v.ID), Dir: dir}
		if running {
			h := held[v.AppID]
			if h == nil {
				h = &appHold{s: s, appID: v.AppID}
				held[v.AppID] = h
			}
			h.parts++
			p.Hold = h.hold
		}
		parts = append(parts, p)
	}
	defer func() {
		for _, h := range held {
			h.done()
		}
	}()
	stored, err = repo.Write(ctx, b.ID, parts)
	return saved, stored, skipped, live, err
}

// appLive says whether the app still exists (a kept volume's app may not).
func (s *Service) appLive(appID string) bool {
	return len(volumes.Attached(s.d.Store.Read(), appID)) > 0
}

// appHold pauses an app from the first of its volume parts read to the
// last.
type appHold struct {
	s      *Service
	appID  string
	parts  int
	resume func()
}

func (h *appHold) hold(ctx context.Context) (func(), error) {
	if h.resume == nil {
		resume, _, err := h.s.d.Runner.Quiesce(ctx, h.appID)
		if _, coded := errcode.As(err); err != nil && !coded {
			err = errcode.Wrap(err, errcode.AdapterFailed, "pause app %s for the copy: %v", h.appID, err)
		}
		if err != nil {
			return nil, err
		}
		h.resume = resume
	}
	return func() {
		if h.parts--; h.parts == 0 {
			h.done()
		}
	}, nil
}

func (h *appHold) done() {
	if h.resume != nil {
		h.resume()
		h.resume = nil
	}
}

// RecordRestored completes, in an installation restored from it, the
// record of the bundle itself: the store was saved while the bundle was
// being taken, so it holds the bundle as running. plainBytes is what the
// bundle holds.
func RecordRestored(ctx context.Context, st Store, id string, saved raftstore.Saved, plainBytes int64, now time.Time) error {
	_, err := st.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		b, meta, ok := Backups.Get(r, id)
		if !ok || b.Kind != KindDR || b.State == StateCompleted {
			return nil, nil
		}
		b.State, b.CompletedAt, b.Store, b.PlainBytes, b.Consistency, b.Error = StateCompleted, &now, &saved, plainBytes, "paused", nil
		return []raftstore.Op{Backups.PutIf(&b, meta.ModifyIndex)}, nil
	})
	return err
}
