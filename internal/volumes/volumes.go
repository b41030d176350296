// Package volumes owns the declaration side of apps' volumes (paths kept
// between deploys): listing the volumes an app's spec declares, with where
// each is mounted, and declaring a new one. A volume is part of the spec
// document, so declaring one writes a new spec revision: the latest
// revision plus the volume and its mount, neither pinned nor deployed, in
// one write with its audit entry (volume.create). It takes effect when that
// revision is pinned and deployed. The revision itself is the spec
// package's to build (spec.AppendOps: numbering, validation, size cap).
//
// The data side (making the storage, sizing, backing it up, restoring it)
// belongs to the runtime and the backups. This package must not touch HTTP
// or adapters, nor write the spec's tables itself.
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
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// Store is what the service needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

var _ Store = (*raftstore.Store)(nil)

// Service lists and declares apps' volumes.
type Service struct {
	store Store
	now   func() time.Time
}

// NewService returns the volumes service.
func NewService(store Store, now func() time.Time) *Service {
	return &Service{store: store, now: now}
}

// Limits of a volume.
const (
	MinSizeBytes int64 = 1 << 20 // 1 MiB
	MaxSizeBytes int64 = 10 << 40
)

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}$`)

// Mount is where a workload mounts a volume.
type Mount struct {
	Workload string `json:"workload"`
	Path     string `json:"path"`
}

// View is a volume as the API shows it.
type View struct {
	Name      string  `json:"name"`
	SizeBytes int64   `json:"size_bytes"`
	Mounts    []Mount `json:"mounts"`
}

// Request declares a volume mounted at Path in a workload (the primary
// one when Workload is empty).
type Request struct {
	Name      string `json:"name" doc:"the volume's name"`
	SizeBytes int64  `json:"size_bytes" doc:"its size"`
	Workload  string `json:"workload,omitempty" doc:"the workload that mounts it (default the primary)"`
	Path      string `json:"path" doc:"where it is mounted in the workload"`
}

// Created is a declared volume and the spec revision that declares it.
type Created struct {
	Volume       View   `json:"volume"`
	SpecRevision uint64 `json:"spec_revision"`
}

// List returns the volumes of the app's pinned spec revision (the latest
// when none is pinned), by name, with their mounts.
func (s *Service) List(appID string) ([]View, error) {
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
	if n == 0 {
		return out, nil
	}
	rev, ok := spec.RevisionAt(r, appID, n)
	if !ok {
		return out, nil
	}
	doc, err := rev.Spec()
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(doc.Volumes)) {
		out = append(out, viewOf(doc, name))
	}
	return out, nil
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
	case req.SizeBytes < MinSizeBytes || req.SizeBytes > MaxSizeBytes:
		return errcode.Invalid("size_bytes", "size_bytes is from %d (1 MiB) to %d (10 TiB)", MinSizeBytes, MaxSizeBytes)
	case !path.IsAbs(req.Path) || path.Clean(req.Path) != req.Path || req.Path == "/" ||
		strings.ContainsFunc(req.Path, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return errcode.Invalid("path", "path is an absolute, clean path other than / (for example /data)")
	}
	return nil
}

// Create declares a volume: it writes the app's next spec revision, the
// latest one with the volume added and mounted at req.Path in the
// workload, neither pinned nor deployed, with its audit entry
// (volume.create) in the same write. The revision is built by the spec
// package (spec.AppendOps: its numbering, validation and size cap).
// Concurrent declarations apply one after another, each over the revision
// the one before wrote; a name the spec declares already is
// STATE_INVALID.
func (s *Service) Create(ctx context.Context, appID string, req Request) (Created, error) {
	if err := req.check(); err != nil {
		return Created{}, err
	}
	now := s.now()
	var out Created
	_, err := s.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		if !apps.Exists(r, appID) {
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
		next, workload, err := withVolume(doc, req)
		if err != nil {
			return nil, err
		}
		ops, rev, err := spec.AppendOps(ctx, r, appID, next, now)
		if err != nil {
			return nil, err
		}
		out = Created{Volume: viewOf(next, req.Name), SpecRevision: rev.Number}
		return append(ops, audit.Record(ctx, now, "volume.create", appID, audit.Target{Kind: "volume", ID: req.Name}, map[string]any{
			"name": req.Name, "size_bytes": req.SizeBytes, "workload": workload, "path": req.Path,
			"spec_revision": rev.Number, "spec_id": rev.ID,
		})), nil
	})
	if err != nil {
		return Created{}, fmt.Errorf("declare volume %s: %w", req.Name, err)
	}
	return out, nil
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
