// Package detection owns each app's detection record: running detection
// (package detect) on the app's current checkout, weighed by what the
// runtime a new app would deploy on can build (the plan's own choice,
// plan.Service.DefaultRuntime), so that a proposal that runtime can run
// wins over one it cannot; keeping the winner,
// runners-up, questions and answers in the replicated store, showing what
// accepting the proposal would change, and accepting it: values set at
// accept go into the proposal (a secret value to the secrets adapter) and
// the result becomes a pinned spec revision.
//
// It must not touch HTTP, clone or extract sources (package source does),
// or build anything.
package detection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/detect"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/plan"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/internal/source"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// Statuses of a detection.
const (
	StatusPending = "pending"
	StatusRunning = "running"
	StatusDone    = "done"
	StatusFailed  = "failed"
)

// Record is an app's detection as the store keeps it and the API shows it.
type Record struct {
	AppID      string            `json:"app_id"`
	Status     string            `json:"status"`
	Commit     string            `json:"commit"`
	CheckoutID string            `json:"checkout_id,omitempty"`
	Winner     *detect.Bid       `json:"winner"`
	RunnersUp  []detect.Bid      `json:"runners_up"`
	Questions  []detect.Question `json:"questions"`
	Answers    map[string]string `json:"answers"`
	Error      string            `json:"error,omitempty"`
	DurationMS float64           `json:"duration_ms"`
	UpdatedAt  time.Time         `json:"updated_at"`
}

// Records is the table of detections, one per app.
var Records = &raftstore.Table[Record]{
	Name: "detections",
	ID:   func(r *Record) string { return r.AppID },
}

// Tables lists the tables this package declares.
func Tables() []raftstore.Def { return []raftstore.Def{Records} }

// Store is what the service needs of the replicated store.
type Store interface {
	Update(ctx context.Context, build raftstore.Build) (uint64, error)
	Read() *raftstore.Reader
}

type (
	// checkouts gives the app's recorded checkout, fetched from the
	// other servers when this one lacks it.
	checkouts interface {
		Ensure(ctx context.Context, appID string) (source.Checkout, error)
	}
	specWriter interface {
		CreateAndPin(ctx context.Context, appID string, d spec.Document, trigger string) (spec.View, error)
	}
	secretWriter interface {
		Put(ctx context.Context, ref secrets.Ref, value string) (secrets.View, error)
	}
)

var (
	_ Store        = (*raftstore.Store)(nil)
	_ checkouts    = (*source.Service)(nil)
	_ specWriter   = (*spec.Service)(nil)
	_ secretWriter = (*secrets.Service)(nil)
)

// Runtimes say which runtime a new app would deploy on, with its
// capabilities.
type Runtimes interface {
	DefaultRuntime() (plan.Runtime, error)
}

var _ Runtimes = (*plan.Service)(nil)

// Deps are the service's collaborators.
type Deps struct {
	Store     Store
	Checkouts checkouts
	Specs     specWriter
	Secrets   secretWriter
	Now       func() time.Time
	Logger    *slog.Logger
}

// Service runs and records detection.
type Service struct {
	d        Deps
	mu       sync.Mutex // one detection at a time on this server (each takes milliseconds)
	runtimes atomic.Pointer[Runtimes]
}

// New returns the detection service.
func New(d Deps) *Service {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{d: d}
}

// UseRuntimes has detection weigh the bids by what the runtime a new app
// would deploy on can build. What says so, the plan service, is built
// after detection (a plan asks detection for its compose rejection); until
// it is set, detection knows nothing of the runtime and the scores alone
// rank the bids.
func (s *Service) UseRuntimes(r Runtimes) { s.runtimes.Store(&r) }

// OnCheckout runs detection on a new checkout: the hook the source service
// calls.
func (s *Service) OnCheckout(ctx context.Context, appID string, c source.Checkout) {
	if _, err := s.run(ctx, appID, c, nil); err != nil {
		s.d.Logger.Warn("detection failed", "app_id", appID, "checkout_id", c.ID, "err", err)
	}
}

// Get returns an app's detection; pending when none has run.
func (s *Service) Get(appID string) (Record, error) {
	r := s.d.Store.Read()
	if !apps.Exists(r, appID) {
		return Record{}, errcode.New(errcode.NotFound, "no app %s", appID)
	}
	rec, _, ok := Records.Get(r, appID)
	if !ok {
		return normalized(Record{AppID: appID, Status: StatusPending}), nil
	}
	return normalized(rec), nil
}

func normalized(r Record) Record {
	if r.RunnersUp == nil {
		r.RunnersUp = []detect.Bid{}
	}
	if r.Questions == nil {
		r.Questions = []detect.Question{}
	}
	if r.Answers == nil {
		r.Answers = map[string]string{}
	}
	return r
}

// Rerun runs detection again on the app's current checkout, with the
// answers given so far, audited as detection.rerun.
func (s *Service) Rerun(ctx context.Context, appID string) (Record, error) {
	if _, err := s.Get(appID); err != nil {
		return Record{}, err
	}
	c, err := s.d.Checkouts.Ensure(ctx, appID)
	if errcode.Has(err, errcode.NotFound) {
		return Record{}, errcode.Wrap(err, errcode.StateInvalid, "app %s has no source to detect", appID).
			WithRemedy("upload an archive with POST /api/v1/apps/%s/source, or set a repository", appID)
	}
	if err != nil {
		return Record{}, err
	}
	return s.run(ctx, appID, c, audit.New(ctx, s.d.Now(), "detection.rerun", appID, audit.Target{Kind: "app", ID: appID}, map[string]any{"commit": c.Commit}))
}

// run detects on a checkout and records the result, with entry (when set)
// in the same write.
func (s *Service) run(ctx context.Context, appID string, c source.Checkout, entry *audit.Entry) (Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.d.Store.Read()
	old, _, _ := Records.Get(r, appID)
	if !apps.Exists(r, appID) {
		return Record{}, errcode.New(errcode.NotFound, "no app %s", appID)
	}
	rec := Record{AppID: appID, Commit: c.Commit, CheckoutID: c.ID}
	start := time.Now()
	res, err := detectDir(c.AppDir(), old.Answers, s.runtime())
	rec.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		rec.Status, rec.Error = StatusFailed, err.Error()
	} else {
		rec.Status, rec.Winner, rec.RunnersUp, rec.Questions = StatusDone, res.Winner, res.RunnersUp, res.Questions
	}
	rec.UpdatedAt = s.d.Now()
	_, err = s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		if !apps.Exists(r, appID) {
			return nil, errcode.New(errcode.NotFound, "no app %s", appID)
		}
		// The answers are the record's as it is now: answers given while
		// detection ran are kept (Answer runs detection again with them).
		cur, meta, _ := Records.Get(r, appID)
		rec.Answers = cur.Answers
		ops := []raftstore.Op{Records.PutIf(&rec, meta.ModifyIndex)}
		if entry != nil {
			ops = append(ops, audit.Insert(entry))
		}
		return ops, nil
	})
	if err != nil {
		return Record{}, fmt.Errorf("record detection: %w", err)
	}
	s.d.Logger.Info("detection finished", "app_id", appID, "commit", c.Commit, "status", rec.Status, "winner", winnerName(rec), "duration_ms", rec.DurationMS)
	return normalized(rec), nil
}

func detectDir(dir string, answers map[string]string, rt detect.Runtime) (detect.Result, error) {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return detect.Result{}, errors.New("the checkout has no directory to detect in (is the subdir right?)")
	}
	return detect.Detect(os.DirFS(dir), answers, rt), nil
}

// runtime is what detection knows of the runtime a new app would deploy
// on: nothing when no runtime would do (none loaded yet, or none meets
// host policy; the plan says so).
func (s *Service) runtime() detect.Runtime {
	r := s.runtimes.Load()
	if r == nil || *r == nil {
		return detect.Runtime{}
	}
	rt, err := (*r).DefaultRuntime()
	if err != nil {
		return detect.Runtime{}
	}
	return detect.Runtime{Kind: rt.Kind, Builds: rt.Builds}
}

func winnerName(r Record) string {
	if r.Winner == nil {
		return ""
	}
	return r.Winner.Detector
}

// MaxAnswers bounds the answers an app keeps; MaxAnswerBytes one answer.
const (
	MaxAnswers     = 64
	MaxAnswerBytes = 4096
)

// Answer records answers to detection's questions and runs detection again
// with them. A secret is never an answer: it is a value given at accept.
func (s *Service) Answer(ctx context.Context, appID string, answers map[string]string) (Record, error) {
	rec, err := s.Get(appID)
	if err != nil {
		return Record{}, err
	}
	kinds := map[string]string{}
	for _, q := range rec.Questions {
		kinds[q.Key] = q.Kind
	}
	for k, v := range answers {
		switch {
		case kinds[k] == "secret":
			return Record{}, errcode.Invalid("answers."+k, "%s is a secret: give it at accept, in values with secret: true, so that it goes to the secrets adapter", k)
		case len(k) == 0 || len(k) > 128 || len(v) > MaxAnswerBytes:
			return Record{}, errcode.Invalid("answers."+k, "an answer's key is 1 to 128 characters and its value at most %d bytes", MaxAnswerBytes)
		case kinds[k] == "int":
			if _, err := strconv.Atoi(v); err != nil {
				return Record{}, errcode.Invalid("answers."+k, "%s takes a whole number", k)
			}
		case kinds[k] == "bool":
			if _, err := strconv.ParseBool(v); err != nil {
				return Record{}, errcode.Invalid("answers."+k, "%s takes true or false", k)
			}
		}
	}
	now := s.d.Now()
	var cur Record
	_, err = s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		var meta raftstore.Meta
		var ok bool
		if cur, meta, ok = Records.Get(r, appID); !ok {
			cur = Record{AppID: appID, Status: StatusPending}
		}
		// Over the answers as they are now: concurrent answers add up.
		next := maps.Clone(cur.Answers)
		if next == nil {
			next = map[string]string{}
		}
		maps.Copy(next, answers)
		if len(next) > MaxAnswers {
			return nil, errcode.Invalid("answers", "at most %d answers", MaxAnswers)
		}
		cur.Answers, cur.UpdatedAt = next, now
		return []raftstore.Op{Records.PutIf(&cur, meta.ModifyIndex),
			audit.Record(ctx, now, "detection.answer", appID, audit.Target{Kind: "app", ID: appID},
				map[string]any{"keys": sortedKeys(answers)})}, nil
	})
	if err != nil {
		return Record{}, fmt.Errorf("record answers: %w", err)
	}
	c, err := s.d.Checkouts.Ensure(ctx, appID)
	if err == nil {
		return s.run(ctx, appID, c, nil)
	}
	if !errcode.Has(err, errcode.NotFound) {
		s.d.Logger.Warn("answers recorded; detection did not run again", "app_id", appID, "err", err)
	}
	return normalized(cur), nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// SweepDeletedApps removes the detection records of apps that no longer
// exist. It runs on the leader.
func (s *Service) SweepDeletedApps(ctx context.Context) error {
	_, err := Records.Sweep(ctx, s.d.Store, raftstore.Query{}, func(r *Record) bool { return !apps.Exists(s.d.Store.Read(), r.AppID) }, 500)
	return err
}

// OnFetchFailed records that fetching the app's source failed: the
// detection's status becomes failed with the reason, so that the console
// and the API say why nothing was detected.
func (s *Service) OnFetchFailed(ctx context.Context, appID, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.d.Now()
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		if !apps.Exists(r, appID) {
			return nil, nil
		}
		rec, meta, _ := Records.Get(r, appID)
		rec.AppID, rec.Status, rec.Error, rec.UpdatedAt = appID, StatusFailed, "fetching the source failed: "+message, now
		return []raftstore.Op{Records.PutIf(&rec, meta.ModifyIndex)}, nil
	})
	if err != nil {
		s.d.Logger.Warn("record a failed fetch", "app_id", appID, "err", err)
	}
}
