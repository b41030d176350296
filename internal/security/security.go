package security

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/scan"
	"github.com/svchost/svc/internal/source"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// CheckEvery is how often the leader looks for scans due and applies the
// minimum score to running apps.
const CheckEvery = time.Minute

// Store is what the service needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

// Checkouts gives the app's current source checkout on this server
// (internal/source), fetched from another server when it is not here.
type Checkouts interface {
	Ensure(ctx context.Context, appID string) (source.Checkout, error)
}

// Policies is host policy in force.
type Policies interface {
	Current() policy.Policy
}

// Releases says what an app runs (the scheduler): its release's spec and
// when it was released; false for an app that runs none.
type Releases interface {
	Deployed(r *raftstore.Reader, appID string) (spec.Document, time.Time, bool)
}

// Stopper stops an app for the system (the scheduler), in one write with
// the ops more builds, if more says so.
type Stopper interface {
	StopBecause(ctx context.Context, appID, reason string, more func(r *raftstore.Reader, a apps.App) ([]raftstore.Op, bool, error)) (bool, error)
}

// Databases gives the OSV database of the primary scanner adapter; nil
// (and no error) when none is configured.
type Databases interface {
	Database(ctx context.Context) (*scan.DB, error)
}

var (
	_ Store    = (*raftstore.Store)(nil)
	_ Policies = (*policy.Service)(nil)
)

// Deps are the service's collaborators. Databases, Screeners, Releases
// and Stopper may be nil (no dependency matching; no AI screening; no
// gating of running apps).
type Deps struct {
	Store     Store
	Checkouts Checkouts
	Policy    Policies
	Databases Databases
	Screeners Screeners
	Releases  Releases
	Stopper   Stopper
	// Context bounds the scans run in the background (the server's
	// lifetime).
	Context context.Context
	Now     func() time.Time
	Log     *slog.Logger
}

// maxBackground is how many requested scans run at once on a server.
const maxBackground = 2

// Service keeps security results, runs scans and gates running apps.
type Service struct {
	d     Deps
	slots chan struct{}
	wg    sync.WaitGroup
}

// New returns the service.
func New(d Deps) *Service {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Context == nil {
		d.Context = context.Background()
	}
	return &Service{d: d, slots: make(chan struct{}, maxBackground)}
}

func noApp(appID string) error { return errcode.New(errcode.NotFound, "no app %s", appID) }

// Get is the app's security result; never_scanned before its first scan.
func (s *Service) Get(appID string) (View, error) {
	r := s.d.Store.Read()
	if !apps.Exists(r, appID) {
		return View{}, noApp(appID)
	}
	row, _, ok := Results.Get(r, appID)
	return view(row, ok), nil
}

// Score is the app's last score; nil when it was never scanned to the end
// (internal/plan refuses a deploy under min_security_score with it).
func (s *Service) Score(appID string) *int { return ScoreOf(s.d.Store.Read(), appID) }

// Request starts a scan of the app now, in the background: the result
// goes to scanning in the write that audits the request (security.scan),
// and the answer is the result so. A scan under way already is not
// started again. An app without a pinned revision has nothing to scan
// (STATE_INVALID).
func (s *Service) Request(ctx context.Context, appID string) (View, error) {
	now := s.d.Now().UTC()
	var v View
	var start bool
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		a, _, ok := apps.Apps.Get(r, appID)
		if !ok {
			return nil, noApp(appID)
		}
		if a.Pinned == nil {
			return nil, errcode.New(errcode.StateInvalid, "app %s has no pinned spec revision to scan", appID).
				WithRemedy("accept detection's proposal, or write a revision and pin it")
		}
		row, meta, had := Results.Get(r, appID)
		start = !had || row.State != Scanning || now.Sub(row.RequestedAt) >= ScanTimeout
		ops := []raftstore.Op{audit.Record(ctx, now, "security.scan", appID, audit.Target{Kind: "app", ID: appID}, map[string]any{"started": start})}
		if start {
			row = begin(row, appID, now)
			ops = append(ops, put(&row, meta, had))
		}
		v = view(row, true)
		return ops, nil
	})
	if err != nil {
		return View{}, err
	}
	if start {
		s.background(appID, now)
	}
	return v, nil
}

// begin is the row as a scan begins at now.
func begin(row Record, appID string, now time.Time) Record {
	row.AppID, row.State, row.RequestedAt, row.Reason = appID, Scanning, now, ""
	return row
}

// put writes the row: an insert when there was none, else only over the
// row read.
func put(row *Record, meta raftstore.Meta, had bool) raftstore.Op {
	if had {
		return Results.PutIf(row, meta.ModifyIndex)
	}
	return Results.Insert(row)
}

// background runs a requested scan on this server, at most maxBackground
// at once.
func (s *Service) background(appID string, began time.Time) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx := actor.With(s.d.Context, actor.System)
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-s.slots }()
		s.run(ctx, appID, began)
	}()
}

// Wait waits for the scans running in the background (which end with
// Deps.Context).
func (s *Service) Wait() { s.wg.Wait() }

// run scans the app and records the outcome of the scan begun at began.
func (s *Service) run(ctx context.Context, appID string, began time.Time) {
	res, specID, err := s.scan(ctx, appID)
	if ctx.Err() != nil {
		return // the server stops: the leader scans again once the scan is lost
	}
	s.record(ctx, appID, began, res, specID, err)
}

// scan runs internal/scan over the app's checkout (an empty tree for an
// app without a source: its spec is still read) with its pinned revision's
// spec, the scanner adapter's OSV database and ignore_unfixable_findings,
// then the AI screening adapters unless disable_ai_screening (screen).
func (s *Service) scan(ctx context.Context, appID string) (scan.Result, string, error) {
	r := s.d.Store.Read()
	a, _, ok := apps.Apps.Get(r, appID)
	if !ok {
		return scan.Result{}, "", noApp(appID)
	}
	if a.Pinned == nil {
		return scan.Result{}, "", errcode.New(errcode.StateInvalid, "app %s has no pinned spec revision to scan", appID)
	}
	rev, ok := spec.RevisionAt(r, appID, uint64(a.Pinned.Revision))
	if !ok {
		return scan.Result{}, "", errcode.New(errcode.StateInvalid, "app %s: spec revision %d is gone", appID, a.Pinned.Revision)
	}
	doc, err := rev.Spec()
	if err != nil {
		return scan.Result{}, "", fmt.Errorf("app %s: spec revision %d cannot be read", appID, a.Pinned.Revision)
	}
	dir, done, err := s.tree(ctx, a)
	if err != nil {
		return scan.Result{}, "", err
	}
	defer done()
	var db *scan.DB
	if s.d.Databases != nil {
		if db, err = s.d.Databases.Database(ctx); err != nil {
			return scan.Result{}, "", err
		}
	}
	pol := s.d.Policy.Current()
	res, err := scan.Scan(ctx, scan.Input{Dir: dir, Spec: doc, DB: db, IgnoreUnfixable: pol.IgnoreUnfixableFindings})
	if err != nil {
		return scan.Result{}, "", err
	}
	return s.screen(ctx, dir, doc, res, pol.IgnoreUnfixableFindings, pol.DisableAIScreening), rev.ID, nil
}

// tree is the directory to scan: the app's checkout, or an empty
// directory for an app without a source.
func (s *Service) tree(ctx context.Context, a apps.App) (string, func(), error) {
	if a.Source == nil {
		dir, err := os.MkdirTemp("", "svc-scan-")
		if err != nil {
			return "", nil, err
		}
		return dir, func() { _ = os.RemoveAll(dir) }, nil
	}
	co, err := s.d.Checkouts.Ensure(ctx, a.ID)
	if err != nil {
		return "", nil, err
	}
	return co.AppDir(), func() {}, nil
}

// record writes the outcome of the scan begun at began, unless the app is
// gone or a later scan began meanwhile: done with security.scanned, or
// failed (the last score kept) with security.scan_failed.
func (s *Service) record(ctx context.Context, appID string, began time.Time, res scan.Result, specID string, cause error) {
	now := s.d.Now().UTC()
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		a, _, ok := apps.Apps.Get(r, appID)
		row, meta, had := Results.Get(r, appID)
		if !ok || !had || !row.RequestedAt.Equal(began) || row.State != Scanning {
			return nil, nil
		}
		if cause != nil {
			row.State, row.Reason = Failed, reason(cause)
			return []raftstore.Op{Results.PutIf(&row, meta.ModifyIndex),
				events.Emit(ctx, now, "security.scan_failed", ref(a), "app", a.ID, map[string]any{"reason": row.Reason})}, nil
		}
		score, id := res.Score, specID
		row.State, row.Score, row.ScannedAt, row.SpecID = Done, &score, &now, &id
		row.Basis, row.Findings, row.Counts = res.Basis, res.Findings, res.Counts
		return []raftstore.Op{Results.PutIf(&row, meta.ModifyIndex),
			events.Emit(ctx, now, "security.scanned", ref(a), "app", a.ID, map[string]any{
				"score": score, "critical": res.Counts.Critical, "high": res.Counts.High,
				"medium": res.Counts.Medium, "low": res.Counts.Low, "spec_id": id,
			})}, nil
	})
	switch {
	case err != nil:
		s.d.Log.Warn("security: could not record a scan; the leader scans again", "app_id", appID, "err", errcode.MessageOf(err))
	case cause != nil:
		s.d.Log.Warn("security: scan failed", "app_id", appID, "reason", reason(cause))
	default:
		s.d.Log.Info("security: scanned", "app_id", appID, "score", res.Score)
	}
}

// reason is a failed scan's reason: the error's message, which names the
// app, a path or what could not be reached, never a secret (internal/scan
// and internal/source say no value).
func reason(err error) string {
	if err == nil {
		return ""
	}
	return errcode.MessageOf(err)
}

func ref(a apps.App) *events.AppRef { return &events.AppRef{ID: a.ID, Name: a.Name, Slug: a.Slug} }

// UseScheduler hands the service the scheduler, which is built after the
// plan service that reads scores from this one: what apps run, and the
// stop of an app that stays below the minimum.
func (s *Service) UseScheduler(r Releases, st Stopper) { s.d.Releases, s.d.Stopper = r, st }
