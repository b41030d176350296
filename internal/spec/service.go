package spec

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/raftstore"
)

// Store is what the service needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Retain(ctx context.Context, table raftstore.Def, ids ...string) (uint64, error)
	Read() *raftstore.Reader
}

var _ Store = (*raftstore.Store)(nil)

// Service creates, lists, reads, pins, compares and exports spec
// revisions, and sweeps those retention lets go.
type Service struct {
	store Store
	now   func() time.Time
}

// NewService returns the spec service.
func NewService(store Store, now func() time.Time) *Service {
	return &Service{store: store, now: now}
}

// Summary is a revision as GET /specs lists it: without its document.
type Summary struct {
	ID        string    `json:"id"`
	AppID     string    `json:"app_id"`
	Number    uint64    `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
	Pinned    bool      `json:"pinned"`
}

// View is a revision as the API shows it: {id, app_id, revision,
// created_at, created_by, pinned, spec}.
type View struct {
	Summary
	Spec Document `json:"spec"`
}

// Listing is a page of an app's revisions, newest first, and the pinned
// revision (0 when none is).
type Listing struct {
	Items  []Summary
	Pinned uint64
	More   bool
}

func noApp(appID string) error { return errcode.New(errcode.NotFound, "no app %s", appID) }

func noRevision(appID string, n uint64) error {
	return errcode.New(errcode.NotFound, "app %s has no revision %d", appID, n).
		WithRemedy("GET /api/v1/apps/%s/specs lists its revisions; retention removes old unpinned ones", appID)
}

func summaryOf(r Revision, h Head) Summary {
	return Summary{ID: r.ID, AppID: r.AppID, Number: r.Number, CreatedAt: r.CreatedAt, CreatedBy: r.CreatedBy, Pinned: h.Pinned == r.Number}
}

func viewOf(r Revision, h Head) (View, error) {
	d, err := r.Spec()
	if err != nil {
		return View{}, err
	}
	return View{Summary: summaryOf(r, h), Spec: d}, nil
}

// List returns up to limit of an app's revisions, newest first, below the
// revision number before (0: from the newest), without their documents.
func (s *Service) List(appID string, before uint64, limit int) (Listing, error) {
	r := s.store.Read()
	if !apps.Exists(r, appID) {
		return Listing{}, noApp(appID)
	}
	h, _, _ := Heads.Get(r, appID)
	items, more := Revisions.List(r, raftstore.Query{
		Index: "app_revision", Key: raftstore.Key(appID, ""), Prefix: true, Reverse: true, Limit: limit,
		Filter: func(v any) bool { return before == 0 || v.(*Revision).Number < before },
	})
	out := Listing{Items: make([]Summary, len(items)), Pinned: h.Pinned, More: more}
	for i, it := range items {
		out.Items[i] = summaryOf(it.Value, h)
	}
	return out, nil
}

// Get returns one revision in full.
func (s *Service) Get(appID string, n uint64) (View, error) {
	r := s.store.Read()
	if !apps.Exists(r, appID) {
		return View{}, noApp(appID)
	}
	rev, _, ok := revision(r, appID, n)
	if !ok {
		return View{}, noRevision(appID, n)
	}
	h, _, _ := Heads.Get(r, appID)
	return viewOf(rev, h)
}

func revision(r *raftstore.Reader, appID string, n uint64) (Revision, raftstore.Meta, bool) {
	return Revisions.First(r, "app_revision", raftstore.Key(appID, raftstore.Uint(n)))
}

// Create validates a document and writes it as the app's next revision,
// neither pinned nor deployed, in one write with its audit entry
// (spec.create). No event: the catalogue has none for it.
func (s *Service) Create(ctx context.Context, appID string, d Document) (View, error) {
	v, err := s.write(ctx, appID, d, false, "")
	if err != nil {
		return View{}, fmt.Errorf("create spec revision: %w", err)
	}
	return v, nil
}

// CreateAndPin validates a document, writes it as the app's next revision
// and pins it, in one write with one audit entry (spec.create, or
// detection.accept for the trigger "accept"; details pinned: true and the
// trigger), for flows that
// write a revision to run it (detection's accept).
func (s *Service) CreateAndPin(ctx context.Context, appID string, d Document, trigger string) (View, error) {
	v, err := s.write(ctx, appID, d, true, trigger)
	if err != nil {
		return View{}, fmt.Errorf("create and pin spec revision: %w", err)
	}
	return v, nil
}

func (s *Service) write(ctx context.Context, appID string, d Document, pin bool, trigger string) (View, error) {
	raw, err := validEncoding(d)
	if err != nil {
		return View{}, err
	}
	now := s.now()
	var (
		rev  Revision
		head Head
	)
	_, err = s.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		var ops []raftstore.Op
		var err error
		if ops, rev, head, err = appendOps(ctx, r, appID, raw, pin, now); err != nil {
			return nil, err
		}
		details := map[string]any{"revision": rev.Number}
		if pin {
			details["pinned"], details["trigger"] = true, trigger
		}
		return append(ops, audit.Record(ctx, now, actionOf(trigger), appID, audit.Target{Kind: "spec", ID: rev.ID}, details)), nil
	})
	if err != nil {
		return View{}, err
	}
	return viewOf(rev, head)
}

// actionOf is the audit action of a revision's write: spec.create, or
// detection.accept when accepting detection's proposal wrote it (one entry
// for the whole request).
func actionOf(trigger string) string {
	if trigger == "accept" {
		return "detection.accept"
	}
	return "spec.create"
}

// Pin makes a revision the app's pinned one (the target of the reconciler
// and of the next deploy): the head's pin and the app row's pinned
// {spec_id, revision} change in one write with the audit entry
// (spec.pin). A revision the app does not have is NOT_FOUND.
func (s *Service) Pin(ctx context.Context, appID string, n uint64) (View, error) {
	now := s.now()
	var (
		rev  Revision
		head Head
	)
	_, err := s.store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		if !apps.Exists(r, appID) {
			return nil, noApp(appID)
		}
		var revMeta raftstore.Meta
		var ok bool
		if rev, revMeta, ok = revision(r, appID, n); !ok {
			return nil, noRevision(appID, n)
		}
		cur, headMeta, _ := Heads.Get(r, appID)
		head = cur.Pin(n)
		_, pinOps, err := apps.PinOps(r, appID, apps.Pin{SpecID: rev.ID, Revision: int(n)}, now)
		if err != nil {
			return nil, err
		}
		return append([]raftstore.Op{
			Revisions.Check(rev.ID, revMeta.ModifyIndex),
			Heads.PutIf(&head, headMeta.ModifyIndex),
			audit.Record(ctx, now, "spec.pin", appID, audit.Target{Kind: "spec", ID: rev.ID},
				map[string]any{"revision": n, "previous": cur.Pinned}),
		}, pinOps...), nil
	})
	if err != nil {
		return View{}, fmt.Errorf("pin spec revision %d: %w", n, err)
	}
	return viewOf(rev, head)
}

// Diff classifies the difference between two of an app's revisions.
func (s *Service) Diff(appID string, a, b uint64) (DiffResult, error) {
	r := s.store.Read()
	if !apps.Exists(r, appID) {
		return DiffResult{}, noApp(appID)
	}
	var docs [2]Document
	for i, n := range []uint64{a, b} {
		rev, _, ok := revision(r, appID, n)
		if !ok {
			return DiffResult{}, noRevision(appID, n)
		}
		d, err := rev.Spec()
		if err != nil {
			return DiffResult{}, fmt.Errorf("diff spec revisions: %w", err)
		}
		docs[i] = d
	}
	return Diff(docs[0], docs[1]), nil
}

// Export returns the app's configuration as a document, with every secret
// redacted: the pinned revision (the latest when none is pinned), and the
// app's secrets by key.
func (s *Service) Export(appID string) (Export, error) {
	r := s.store.Read()
	app, _, ok := apps.Apps.Get(r, appID)
	if !ok {
		return Export{}, noApp(appID)
	}
	rows, _ := secrets.Secrets.List(r, raftstore.Query{Index: "app", Key: appID})
	keys := make([]string, len(rows))
	for i, row := range rows {
		keys[i] = row.Value.Key
	}
	slices.Sort(keys)
	h, _, _ := Heads.Get(r, appID)
	n := h.Pinned
	if n == 0 {
		n = h.Latest
	}
	var doc *Document
	if rev, _, ok := revision(r, appID, n); ok {
		d, err := rev.Spec()
		if err != nil {
			return Export{}, fmt.Errorf("export app %s: %w", appID, err)
		}
		doc = &d
	}
	return NewExport(ExportApp{Name: app.Name, Slug: app.Slug}, doc, n, keys), nil
}

// retainBatch caps the revisions one retention command removes.
const retainBatch = 500

// SweepRetention removes the revisions the table's retention rule lets go:
// those neither pinned nor among the last ten pinned, and older than the
// newest of those. It runs on the leader; a sweep that races a pin fails
// whole and the next one tries again.
func (s *Service) SweepRetention(ctx context.Context) error {
	r := s.store.Read()
	heads, _ := Heads.List(r, raftstore.Query{})
	var drop []string
	flush := func() error {
		if len(drop) == 0 {
			return nil
		}
		if _, err := s.store.Retain(ctx, Revisions, drop...); err != nil {
			return fmt.Errorf("sweep spec revisions: %w", err)
		}
		drop = drop[:0]
		return nil
	}
	for _, it := range heads {
		h := it.Value
		if len(h.PinHistory) == 0 {
			continue
		}
		newest := slices.Max(h.PinHistory)
		revs, _ := Revisions.List(r, raftstore.Query{Index: "app_revision", Key: raftstore.Key(h.AppID, ""), Prefix: true})
		for _, rv := range revs {
			n := rv.Value.Number
			if n >= newest {
				break // by number from here on
			}
			if n == h.Pinned || slices.Contains(h.PinHistory, n) {
				continue
			}
			drop = append(drop, rv.Value.ID)
			if len(drop) == retainBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}
