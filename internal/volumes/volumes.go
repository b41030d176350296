// Package volumes owns apps' volumes as resources (the volumes table: a
// vol_ ID per volume, the app it belongs to, its name and size) and the
// declaration side: listing an app's volumes with where each is mounted,
// declaring a new one (a new spec revision, neither pinned nor deployed,
// and the volume's row, in one write with its audit entry), taking over a
// kept volume, keeping volumes past their app's deletion or marking them
// discarded, and deleting a kept one. A volume declared in a spec written
// another way gets its row when a job first mounts it (EnsureOps, from
// the scheduler). The revision itself is the spec package's to build
// (spec.AppendOps: numbering, validation, size cap).
//
// The data side (making the storage, measuring it, removing a discarded
// volume's data, backing it up, restoring it) belongs to the runtime and
// the backups: this package asks a Runtime to measure and remove. It must
// not touch HTTP or adapters, nor write the spec's or the apps' tables
// itself.
package volumes

import (
	"context"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/idle"
	"github.com/svchost/svc/internal/security"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// Store is what the service needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

var _ Store = (*raftstore.Store)(nil)

// Data is the runtime side of volumes that this package asks for: how
// much a volume holds, and removing a discarded volume's data.
type Data interface {
	UsedBytes(ctx context.Context, volumeID string) (int64, bool)
	RemoveVolume(volumeID string) error
}

// Service lists and declares apps' volumes.
type Service struct {
	store Store
	now   func() time.Time
	data  Data
}

// NewService returns the volumes service; data may be nil (used_bytes is
// then null, and discarded volumes wait for a runtime that can remove
// them).
func NewService(store Store, now func() time.Time, data Data) *Service {
	return &Service{store: store, now: now, data: data}
}

// Limits of a volume.
const (
	MinSizeBytes     int64 = 1 << 20 // 1 MiB
	MaxSizeBytes     int64 = 10 << 40
	DefaultSizeBytes int64 = 1 << 30 // a declaration that gives no size
)

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}$`)

// Mount is where a workload mounts a volume.
type Mount struct {
	Workload string `json:"workload"`
	Path     string `json:"path"`
}

// View is a volume as the API shows it. A volume a spec declares that no
// deploy has made yet has no ID nor creation time; one whose app was
// deleted has app_gone_at.
type View struct {
	ID    *string `json:"id"`
	AppID string  `json:"app_id"`
	// AppSlug is the slug of the app the volume was made for (a new app of
	// that slug may take it over once the app is gone); empty until made.
	AppSlug   string     `json:"app_slug,omitempty"`
	Name      string     `json:"name"`
	SizeBytes int64      `json:"size_bytes"`
	UsedBytes *int64     `json:"used_bytes"`
	Mounts    []Mount    `json:"mounts"`
	CreatedAt *time.Time `json:"created_at"`
	AppGoneAt *time.Time `json:"app_gone_at"`
}

// Request declares a volume mounted at Path in a workload (the primary
// one when Workload is empty), or takes over a kept volume (VolumeID).
type Request struct {
	Name      string `json:"name" doc:"the volume's name in the app's spec"`
	SizeBytes int64  `json:"size_bytes,omitempty" doc:"its size in bytes (default 1 GiB, or the kept volume's)"`
	Workload  string `json:"workload,omitempty" doc:"the workload that mounts it (default the primary)"`
	Path      string `json:"path" doc:"where it is mounted in the workload"`
	VolumeID  string `json:"volume_id,omitempty" doc:"a kept volume (its app deleted) to take over with its data: the app must have the deleted app's slug, and the caller needs install.backup.manage"`
}

// Created is a declared volume and the spec revision that declares it.
type Created struct {
	Volume View      `json:"volume"`
	Spec   spec.View `json:"spec"`
}

// List returns the volumes of the app's pinned spec revision (the latest
// when none is pinned), by name, with their mounts, IDs and use.
func (s *Service) List(ctx context.Context, appID string) ([]View, error) {
	r := s.store.Read()
	if !apps.Exists(r, appID) {
		return nil, errcode.New(errcode.NotFound, "no app %s", appID)
	}
	h, _, _ := spec.Heads.Get(r, appID)
	n := h.Pinned
	if n == 0 {
		n = h.Latest
	}
	out := []View{}
	rev, ok := spec.RevisionAt(r, appID, n)
	if n == 0 || !ok {
		return out, nil
	}
	doc, err := rev.Spec()
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	rows := Attached(r, appID)
	for _, name := range slices.Sorted(maps.Keys(doc.Volumes)) {
		v := viewOf(doc, name)
		v.AppID = appID
		if row, ok := rows[name]; ok {
			s.fill(ctx, &v, row)
		}
		out = append(out, v)
	}
	return out, nil
}

// ListAll returns every volume that has a row: those of live apps and the
// kept ones of deleted apps, by ID. Mounts are not shown here.
func (s *Service) ListAll(ctx context.Context) []View {
	items, _ := Volumes.List(s.store.Read(), raftstore.Query{})
	out := make([]View, 0, len(items))
	for _, it := range items {
		if it.Value.DiscardAt != nil {
			continue
		}
		v := View{Name: it.Value.Name, SizeBytes: it.Value.SizeBytes, Mounts: []Mount{}}
		s.fill(ctx, &v, it.Value)
		out = append(out, v)
	}
	return out
}

// fill completes a view from the volume's row and its measured use.
func (s *Service) fill(ctx context.Context, v *View, row Volume) {
	id, created := row.ID, row.CreatedAt
	v.ID, v.AppID, v.AppSlug, v.CreatedAt, v.AppGoneAt = &id, row.AppID, row.AppSlug, &created, row.AppGoneAt
	if s.data != nil {
		if used, ok := s.data.UsedBytes(ctx, row.ID); ok {
			v.UsedBytes = &used
		}
	}
}

func viewOf(doc spec.Document, name string) View {
	v := View{Name: name, SizeBytes: doc.Volumes[name].SizeBytes, Mounts: []Mount{}}
	for _, wl := range slices.Sorted(maps.Keys(doc.Workloads)) {
		for _, m := range doc.Workloads[wl].Mounts {
			if m.Volume == name {
				v.Mounts = append(v.Mounts, Mount{Workload: wl, Path: m.Path})
			}
		}
	}
	return v
}

func (req Request) check() error {
	switch {
	case !nameRE.MatchString(req.Name):
		return errcode.Invalid("name", "a volume's name is a lower-case letter, then up to 30 lower-case letters, digits and hyphens").
			WithRemedy("for example data")
	case req.SizeBytes != 0 && (req.SizeBytes < MinSizeBytes || req.SizeBytes > MaxSizeBytes):
		return errcode.Invalid("size_bytes", "size_bytes is from %d (1 MiB) to %d (10 TiB)", MinSizeBytes, MaxSizeBytes)
	case !path.IsAbs(req.Path) || path.Clean(req.Path) != req.Path || req.Path == "/" ||
		strings.ContainsFunc(req.Path, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return errcode.Invalid("path", "path is an absolute, clean path other than / (for example /data)")
	case len(req.VolumeID) > 64:
		return errcode.Invalid("volume_id", "volume_id is a vol_ ID")
	}
	return nil
}

// Create declares a volume: it writes the app's next spec revision, the
// latest one with the volume added and mounted at req.Path in the
// workload, neither pinned nor deployed, and the volume's row, with its
// audit entry (volume.create) in the same write. With req.VolumeID it
// takes over a kept volume instead (its data with it): one whose app was
// deleted, kept under the slug this app has now, by a caller holding
// install.backup.manage (the data was another app's). The revision is
// built by the spec package (spec.AppendOps: its numbering, validation and
// size cap). Concurrent declarations apply one after another, each over
// the revision the one before wrote; a name the spec declares already is
// STATE_INVALID.
func (s *Service) Create(ctx context.Context, c authz.Caller, appID string, req Request) (Created, error) {
	if err := req.check(); err != nil {
		return Created{}, err
	}
	if req.VolumeID != "" && !c.Has(authz.InstallBackupManage) {
		return Created{}, errcode.New(errcode.PermVerbRequired, "taking over a kept volume needs %s: its data was another app's", authz.InstallBackupManage).
			WithDetail("verb", string(authz.InstallBackupManage))
	}
	now := s.now()
	var out Created
	_, err := s.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		app, _, ok := apps.Apps.Get(r, appID)
		if !ok {
			return nil, errcode.New(errcode.NotFound, "no app %s", appID)
		}
		h, _, _ := spec.Heads.Get(r, appID)
		latest, ok := spec.RevisionAt(r, appID, h.Latest)
		if h.Latest == 0 || !ok {
			return nil, errcode.New(errcode.StateInvalid, "app %s has no spec yet: a volume is declared in it", appID).
				WithRemedy("write one with POST /api/v1/apps/%s/specs (or accept detection's proposal) first", appID)
		}
		doc, err := latest.Spec()
		if err != nil {
			return nil, err
		}
		req := req
		var ops []raftstore.Op
		if req.VolumeID != "" {
			kept, meta, err := keptFor(r, req.VolumeID, app.Slug)
			if err != nil {
				return nil, err
			}
			if req.SizeBytes == 0 {
				req.SizeBytes = kept.SizeBytes
			}
			kept.AppID, kept.Name, kept.SizeBytes, kept.AppGoneAt = appID, req.Name, req.SizeBytes, nil
			ops = append(ops, Volumes.PutIf(&kept, meta.ModifyIndex))
		} else if req.SizeBytes == 0 {
			req.SizeBytes = DefaultSizeBytes
		}
		next, workload, err := withVolume(doc, req)
		if err != nil {
			return nil, err
		}
		if _, taken := Attached(r, appID)[req.Name]; taken && req.VolumeID != "" {
			return nil, errcode.New(errcode.StateInvalid, "app %s has a volume %q already (declared in a revision since replaced)", appID, req.Name).
				WithDetail("field", "name").WithRemedy("take the kept volume over under another name")
		}
		revOps, rev, err := spec.AppendOps(ctx, r, appID, next, now)
		if err != nil {
			return nil, err
		}
		ops = append(ops, revOps...)
		rows, ensure := EnsureOps(r, appID, app.Slug, next, now)
		if req.VolumeID != "" {
			ensure = nil // the kept volume's put above is its row
			rows[req.Name] = Volume{ID: req.VolumeID, AppID: appID, Name: req.Name, SizeBytes: req.SizeBytes, CreatedAt: now}
		}
		ops = append(ops, ensure...)
		row := rows[req.Name]
		out = Created{Volume: viewOf(next, req.Name), Spec: spec.View{Summary: spec.Summary{
			ID: rev.ID, AppID: appID, Number: rev.Number, CreatedAt: rev.CreatedAt, CreatedBy: rev.CreatedBy}, Spec: next}}
		id, created := row.ID, row.CreatedAt
		out.Volume.ID, out.Volume.AppID, out.Volume.CreatedAt = &id, appID, &created
		return append(ops, audit.Record(ctx, now, "volume.create", appID, audit.Target{Kind: "volume", ID: row.ID}, map[string]any{
			"name": req.Name, "size_bytes": req.SizeBytes, "workload": workload, "path": req.Path,
			"spec_revision": rev.Number, "spec_id": rev.ID, "taken_over": req.VolumeID != "",
		})), nil
	})
	if err != nil {
		return Created{}, fmt.Errorf("declare volume %s: %w", req.Name, err)
	}
	return out, nil
}

// keptFor returns the kept volume id for an app of the slug to take over.
func keptFor(r *raftstore.Reader, id, slug string) (Volume, raftstore.Meta, error) {
	v, meta, ok := Volumes.Get(r, id)
	switch {
	case !ok || v.DiscardAt != nil:
		return v, meta, errcode.New(errcode.NotFound, "no volume %s", id).WithDetail("field", "volume_id")
	case v.AppGoneAt == nil:
		return v, meta, errcode.New(errcode.StateInvalid, "volume %s belongs to a live app", id).WithDetail("field", "volume_id").
			WithRemedy("only a volume kept after its app was deleted can be taken over")
	case v.AppSlug != slug:
		return v, meta, errcode.New(errcode.StateInvalid, "volume %s was kept from an app named %q; this app is %q", id, v.AppSlug, slug).
			WithDetail("field", "volume_id").WithRemedy("take it over from an app with the deleted app's slug")
	}
	return v, meta, nil
}

// Guard decides, in the write that discards a kept volume and from the
// store as that write sees it, whether the volume may go; an error
// refuses. Host policy's require_backup_before_destroy is one
// (backups.RequireFinalCopy).
type Guard func(r *raftstore.Reader, v Volume) error

// Delete discards a kept volume (its app deleted): the row is marked and
// the sweep removes the data, then the row. A volume of a live app is
// STATE_INVALID: it goes with the app, or out of its spec. guard, when
// not nil, may refuse.
func (s *Service) Delete(ctx context.Context, id string, guard Guard) error {
	now := s.now()
	_, err := s.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		v, meta, ok := Volumes.Get(r, id)
		switch {
		case !ok || v.DiscardAt != nil:
			return nil, errcode.New(errcode.NotFound, "no volume %s", id)
		case v.AppGoneAt == nil:
			return nil, errcode.New(errcode.StateInvalid, "volume %s belongs to app %s", id, v.AppID).
				WithRemedy("delete the app (with force=true to discard its data), or remove the volume from its spec")
		}
		if guard != nil {
			if err := guard(r, v); err != nil {
				return nil, err
			}
		}
		v.DiscardAt = &now
		return []raftstore.Op{Volumes.PutIf(&v, meta.ModifyIndex),
			audit.Record(ctx, now, "volume.delete", "", audit.Target{Kind: "volume", ID: id}, map[string]any{
				"name": v.Name, "app_id": v.AppID, "app_slug": v.AppSlug,
			})}, nil
	})
	if err != nil {
		return fmt.Errorf("delete volume %s: %w", id, err)
	}
	return nil
}

// hasStorage says whether an app has volumes: rows, or declared in its
// pinned (else latest) spec revision.
func hasStorage(r *raftstore.Reader, appID string) bool {
	if len(Attached(r, appID)) > 0 {
		return true
	}
	h, _, _ := spec.Heads.Get(r, appID)
	n := h.Pinned
	if n == 0 {
		n = h.Latest
	}
	rev, ok := spec.RevisionAt(r, appID, n)
	if !ok {
		return false
	}
	doc, err := rev.Spec()
	return err != nil || len(doc.Volumes) > 0 // unreadable: decide as if it had
}

// DeleteApp deletes an app in one write with its volumes kept (or, with
// d.Force, marked discarded for the sweep to remove their data) and
// app.deleted naming backupID, the final backup the caller took ("" for
// none), its activity record (internal/idle) removed. Whether the app
// has storage is decided here (d.Storage is ignored): rows, or volumes
// its spec declares.
func (s *Service) DeleteApp(ctx context.Context, appID string, d apps.Decision, backupID string) error {
	now := s.now()
	_, err := s.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		d := d
		d.Storage = hasStorage(r, appID)
		ops, err := apps.DeleteOps(ctx, r, appID, d, backupID, now)
		if err != nil {
			return nil, err
		}
		_, kept := AppGoneOps(r, appID, d.Force, now)
		ops = append(append(ops, kept...), idle.ForgetOps(r, appID)...)
		return append(ops, security.ForgetOps(r, appID)...), nil
	})
	if err != nil {
		return fmt.Errorf("delete app: %w", err)
	}
	return nil
}

// Sweep removes the data of discarded volumes, then their rows (a leader
// loop's pass). A removal that fails is tried again at the next pass.
func (s *Service) Sweep(ctx context.Context) error {
	if s.data == nil {
		return nil
	}
	items, _ := Volumes.List(s.store.Read(), raftstore.Query{Index: "discard", Prefix: true})
	for _, it := range items {
		if err := s.data.RemoveVolume(it.Value.ID); err != nil {
			return err
		}
		id, mi := it.Value.ID, it.Meta.ModifyIndex
		if _, err := s.store.Update(ctx, func(*raftstore.Reader) ([]raftstore.Op, error) {
			return []raftstore.Op{Volumes.DeleteIf(id, mi)}, nil
		}); err != nil && !errcode.Has(err, errcode.StateInvalid) {
			return err
		}
	}
	return nil
}

// withVolume returns a copy of doc declaring the volume and mounting it in
// the workload, and the workload's name; doc itself is not changed.
func withVolume(doc spec.Document, req Request) (spec.Document, string, error) {
	if _, ok := doc.Volumes[req.Name]; ok {
		return spec.Document{}, "", errcode.New(errcode.StateInvalid, "the spec already declares a volume %q", req.Name).
			WithDetail("field", "name").WithRemedy("choose another name; a volume's size is changed in the spec itself")
	}
	wl := req.Workload
	if wl == "" {
		p := doc.Primary()
		if p == "" {
			return spec.Document{}, "", errcode.Invalid("workload", "the spec names no primary workload: say which workload mounts the volume")
		}
		wl = p
	}
	w, ok := doc.Workloads[wl]
	if !ok {
		return spec.Document{}, "", errcode.Invalid("workload", "the spec has no workload %q", wl).
			WithDetail("workloads", slices.Sorted(maps.Keys(doc.Workloads)))
	}
	for _, m := range w.Mounts {
		if m.Path == req.Path {
			return spec.Document{}, "", errcode.Invalid("path", "workload %s already mounts the volume %s at %s", wl, m.Volume, req.Path)
		}
	}
	next := doc
	next.Volumes = maps.Clone(doc.Volumes)
	if next.Volumes == nil {
		next.Volumes = map[string]spec.Volume{}
	}
	next.Volumes[req.Name] = spec.Volume{SizeBytes: req.SizeBytes}
	next.Workloads = maps.Clone(doc.Workloads)
	w.Mounts = append(slices.Clone(w.Mounts), spec.Mount{Volume: req.Name, Path: req.Path})
	next.Workloads[wl] = w
	return next, wl, nil
}
