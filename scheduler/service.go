package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/svchost/svc/internal/actor"
	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/audit"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/events"
	"github.com/svchost/svc/internal/ids"
	"github.com/svchost/svc/internal/plan"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/secrets"
	"github.com/svchost/svc/internal/slots"
	"github.com/svchost/svc/internal/source"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
)

// What the scheduler needs of the rest of the service, each through the
// small interface of the part that keeps it.
type (
	// Store is the replicated store.
	Store interface {
		Update(ctx context.Context, build raftstore.Build) (uint64, error)
		Read() *raftstore.Reader
	}
	revisions interface {
		Get(appID string, n uint64) (spec.View, error)
	}
	planner interface {
		Plan(appID string, n uint64) (plan.Result, error)
	}
	// checkouts gives the app's recorded checkout, fetched from the
	// other servers when this one lacks it (NOT_FOUND when none has it,
	// ADAPTER_UNAVAILABLE when they cannot be asked).
	checkouts interface {
		Ensure(ctx context.Context, appID string) (source.Checkout, error)
	}
	slotValues interface {
		Resolve(appID, key, field string) (string, error)
		IsSealed(appID, key, field string) bool
	}
	secretValues interface {
		Resolve(ctx context.Context, appID, key string) (value string, version int64, err error)
		List(appID string) ([]secrets.View, error)
	}
	policies interface {
		Current() policy.Policy
	}
	// Runtimes finds a loaded runtime adapter by its adapter ID.
	Runtimes interface {
		Runtime(adapterID string) (Runtime, error)
	}
)

var (
	_ Store        = (*raftstore.Store)(nil)
	_ revisions    = (*spec.Service)(nil)
	_ planner      = (*plan.Service)(nil)
	_ checkouts    = (*source.Service)(nil)
	_ policies     = (*policy.Service)(nil)
	_ secretValues = (*secrets.Service)(nil)
	_ slotValues   = (*slots.Service)(nil)
)

// Config is the scheduler's configuration.
type Config struct {
	// Backoff is the reconciler's retry schedule: the waits before each
	// retry of an app that keeps failing; after the last, it gives up.
	Backoff []time.Duration
	// StableAfter is how long an app must run healthy for its failures to
	// be forgotten; 0 means the sum of Backoff, at least a minute.
	StableAfter time.Duration
	// Interval is how often the reconciler looks at every app besides when
	// the store changes; 0 means 2 seconds.
	Interval time.Duration
	// RoutingMode is the edge's routing mode; "port" allocates each
	// deployed app a host port from PortStart..PortEnd.
	RoutingMode        string
	PortStart, PortEnd int
	// BuildTimeout is each build's time limit; 0 is the runtime's default.
	BuildTimeout time.Duration
	// StartTimeout is runtime.start_timeout: how long a runtime waits for
	// a workload to be ready, given to every runtime with each run and
	// restart (WithStartTimeout). It also bounds each of the reconciler's
	// other calls to a runtime. 0 means a minute.
	StartTimeout time.Duration
	// Workers is how many apps the reconciler reconciles at once; 0
	// means 16.
	Workers int
}

// Deps are the scheduler's collaborators.
type Deps struct {
	Store    Store
	Specs    revisions
	Plans    planner
	Sources  checkouts
	Slots    slotValues
	Secrets  secretValues
	Policy   policies
	Runtimes Runtimes
	Now      func() time.Time
	Log      *slog.Logger
	// Metrics receives the reconciler's measurements; nil records none.
	Metrics Observer
}

// Service runs deploys and the reconciler and answers for apps' workloads.
type Service struct {
	cfg Config
	d   Deps

	logs *logHub

	mu        sync.Mutex
	executing map[string]bool // deployments this node is running
	tracks    map[string]*track
	inflight  map[string]bool // apps the reconciler is reconciling now
	slots     chan struct{}   // the reconciler's workers: one slot each
}

// NewService returns the scheduler service.
func NewService(cfg Config, d Deps) *Service {
	if len(cfg.Backoff) == 0 {
		cfg.Backoff = []time.Duration{5 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute}
	}
	if cfg.StableAfter <= 0 {
		var sum time.Duration
		for _, b := range cfg.Backoff {
			sum += b
		}
		cfg.StableAfter = max(sum, time.Minute)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = time.Minute
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 16
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Metrics == nil {
		d.Metrics = noMetrics{}
	}
	return &Service{cfg: cfg, d: d, logs: newLogHub(d.Now), executing: map[string]bool{}, tracks: map[string]*track{},
		inflight: map[string]bool{}, slots: make(chan struct{}, cfg.Workers)}
}

func appRef(a apps.App) *events.AppRef { return &events.AppRef{ID: a.ID, Name: a.Name, Slug: a.Slug} }

func noApp(id string) error { return errcode.New(errcode.NotFound, "no app %s", id) }

// Create asks for a deploy of an app's revision n (0: the pinned one). It
// refuses what the plan refuses, a deploy while another runs (for a
// person's deploy; a deploy the service starts itself waits its turn), and
// what the host cannot fit. A deploy the spec holds for approval waits;
// any other is queued for the leader's deploy worker.
func (s *Service) Create(ctx context.Context, appID string, n uint64, trigger string) (Deployment, error) {
	res, err := s.d.Plans.Plan(appID, n)
	if err != nil {
		return Deployment{}, err
	}
	if !res.Deployable {
		return Deployment{}, refusal(res)
	}
	// What the host has is asked of the runtime before the write, never
	// inside it.
	host := s.host(ctx, res.Runtime)
	now := s.d.Now()
	depID := ids.NewAt(ids.Deployment, now)
	var dep Deployment
	_, err = s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		app, appMeta, ok := apps.Apps.Get(r, appID)
		if !ok {
			return nil, noApp(appID)
		}
		rev := n
		if rev == 0 {
			if app.Pinned == nil {
				return nil, errcode.New(errcode.StateInvalid, "app %s has no pinned revision to deploy", appID).
					WithRemedy("accept detection's proposal, or write a revision and pin it")
			}
			rev = uint64(app.Pinned.Revision)
		}
		view, err := s.d.Specs.Get(appID, rev)
		if err != nil {
			return nil, err
		}
		// The decision rests on the app's deployments and the app as read:
		// a deployment written meanwhile (another request's) makes this
		// one read again, so that two at once cannot both see no deploy
		// running.
		ops := []raftstore.Op{Deployments.CheckTable(r.TableIndex(Deployments)), apps.Apps.Check(appID, appMeta.ModifyIndex)}
		for _, d := range s.activeOf(r, appID) {
			switch {
			case d.State == DepWaitingApproval:
				d.State = DepSuperseded
				d.FinishedAt = &now
				ops = append(ops, Deployments.Put(&d))
			case trigger == TriggerAPI || trigger == TriggerRollback:
				return nil, errcode.New(errcode.StateInvalid, "deployment %s of app %s is still %s", d.ID, appID, d.State).
					WithDetail("deployment_id", d.ID).
					WithRemedy("wait for it to finish (GET /api/v1/apps/%s/deployments/%s)", appID, d.ID)
			}
		}
		if err := s.checkCapacity(r, appID, view.Spec, host); err != nil {
			return nil, err
		}
		portOps, err := s.portOps(r, appID)
		if err != nil {
			return nil, err
		}
		ops = append(ops, portOps...)
		dep = Deployment{
			ID: depID, AppID: appID, SpecID: view.ID, Revision: rev,
			State: DepQueued, Trigger: trigger, Runtime: res.Runtime, CreatedAt: now,
			CreatedBy: actorID(ctx), Approvals: []Approval{}, ApprovalReasons: []string{},
		}
		if view.Spec.Deploy != nil && view.Spec.Deploy.Approvals > 0 && trigger != TriggerSecretRotation {
			dep.State = DepWaitingApproval
			dep.ApprovalsRequired = view.Spec.Deploy.Approvals
			dep.ApprovalReasons = []string{fmt.Sprintf("revision %d asks for %d approval(s) before it deploys", rev, view.Spec.Deploy.Approvals)}
		}
		target := audit.Target{Kind: "deployment", ID: dep.ID}
		ops = append(ops,
			Deployments.Insert(&dep),
			audit.Record(ctx, now, "deployment.create", appID, target,
				map[string]any{"revision": rev, "trigger": trigger, "runtime": res.Runtime}),
		)
		if dep.State == DepWaitingApproval {
			return append(ops, events.Emit(ctx, now, "deploy.waiting_approval", appRef(app), target.Kind, target.ID,
				map[string]any{"spec_revision": rev, "trigger": trigger, "reasons": dep.ApprovalReasons, "approvals_required": dep.ApprovalsRequired})), nil
		}
		return append(ops, events.Emit(ctx, now, "deploy.started", appRef(app), target.Kind, target.ID,
			map[string]any{"spec_revision": rev, "trigger": trigger})), nil
	})
	if err != nil {
		return Deployment{}, fmt.Errorf("create deployment: %w", err)
	}
	return dep, nil
}

// refusal is the error of a plan that refuses: its first refusal, with
// every refusal's code in details.
func refusal(res plan.Result) error {
	if len(res.Refusals) == 0 {
		return errcode.New(errcode.StateInvalid, "the plan refuses this deploy")
	}
	first := *res.Refusals[0]
	codes := make([]string, len(res.Refusals))
	for i, e := range res.Refusals {
		codes[i] = string(e.Code)
	}
	e := &first
	return e.WithDetail("refusals", codes)
}

// actorID names who acts on a deployment: the person behind the
// credential (so that a second token of the same person is the same
// person), else the credential (a service token), else the actor's kind.
func actorID(ctx context.Context) string {
	a := actor.From(ctx)
	switch {
	case a.UserID != "":
		return a.UserID
	case a.ID != "":
		return a.ID
	}
	return a.Kind
}

// activeOf returns an app's deployments that have not ended, oldest first.
func (s *Service) activeOf(r *raftstore.Reader, appID string) []Deployment {
	items, _ := Deployments.List(r, raftstore.Query{Index: "app", Key: raftstore.Key(appID, ""), Prefix: true,
		Filter: func(v any) bool { return v.(*Deployment).Active() }})
	out := make([]Deployment, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out
}

// List returns an app's deployments, newest first, after the cursor (a
// deployment ID) and whether more follow.
func (s *Service) List(appID, cursor string, limit int) ([]Deployment, bool, error) {
	r := s.d.Store.Read()
	if !apps.Exists(r, appID) {
		return nil, false, noApp(appID)
	}
	q := raftstore.Query{Index: "app", Key: raftstore.Key(appID, ""), Prefix: true, Reverse: true, Limit: limit}
	if cursor != "" {
		q.Filter = func(v any) bool { return v.(*Deployment).ID < cursor }
	}
	items, more := Deployments.List(r, q)
	out := make([]Deployment, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out, more, nil
}

// Get returns one of an app's deployments.
func (s *Service) Get(appID, depID string) (Deployment, error) {
	r := s.d.Store.Read()
	d, _, ok := Deployments.Get(r, depID)
	if !ok || d.AppID != appID {
		return Deployment{}, errcode.New(errcode.NotFound, "app %s has no deployment %s", appID, depID)
	}
	return d, nil
}

// Rollback deploys the last revision that ran successfully before the one
// the app runs now.
func (s *Service) Rollback(ctx context.Context, appID string) (Deployment, error) {
	r := s.d.Store.Read()
	if !apps.Exists(r, appID) {
		return Deployment{}, noApp(appID)
	}
	rel, _, hasRelease := Releases.Get(r, appID)
	items, _ := Deployments.List(r, raftstore.Query{Index: "app", Key: raftstore.Key(appID, ""), Prefix: true, Reverse: true,
		Filter: func(v any) bool { return v.(*Deployment).State == DepSucceeded }})
	for _, it := range items {
		d := it.Value
		if hasRelease && (d.ID == rel.DeploymentID || d.Revision == rel.Revision) {
			continue
		}
		return s.Create(ctx, appID, d.Revision, TriggerRollback)
	}
	return Deployment{}, errcode.New(errcode.StateInvalid, "app %s has no earlier revision that ran successfully", appID).
		WithRemedy("deploy a revision by number: POST /api/v1/apps/%s/deployments {\"revision\": n}", appID)
}

// Approve records the caller's approval of a held deploy; with enough of
// them it is queued. The person who asked for the deploy cannot approve it.
func (s *Service) Approve(ctx context.Context, appID, depID string) (Deployment, error) {
	who := actorID(ctx)
	return s.decide(ctx, appID, depID, func(app apps.App, d *Deployment, now time.Time) ([]raftstore.Op, error) {
		if who == d.CreatedBy {
			return nil, errcode.New(errcode.PermDenied, "a deploy cannot be approved by the person who asked for it").
				WithRemedy("ask another person with app.deploy on this app to approve it")
		}
		if slices.ContainsFunc(d.Approvals, func(a Approval) bool { return a.PrincipalID == who }) {
			return nil, errcode.New(errcode.StateInvalid, "you approved deployment %s already", d.ID)
		}
		d.Approvals = append(slices.Clone(d.Approvals), Approval{PrincipalID: who, At: now})
		target := audit.Target{Kind: "deployment", ID: d.ID}
		ops := []raftstore.Op{
			audit.Record(ctx, now, "deployment.approve", appID, target,
				map[string]any{"approvals": len(d.Approvals), "approvals_required": d.ApprovalsRequired}),
			events.Emit(ctx, now, "deploy.approved", appRef(app), target.Kind, target.ID,
				map[string]any{"approvals": len(d.Approvals), "approvals_required": d.ApprovalsRequired}),
		}
		if len(d.Approvals) >= d.ApprovalsRequired {
			d.State = DepQueued
			ops = append(ops, events.Emit(ctx, now, "deploy.started", appRef(app), target.Kind, target.ID,
				map[string]any{"spec_revision": d.Revision, "trigger": d.Trigger}))
		}
		return ops, nil
	})
}

// Reject ends a held deploy with a reason.
func (s *Service) Reject(ctx context.Context, appID, depID, reason string) (Deployment, error) {
	if len(reason) > 1000 {
		return Deployment{}, errcode.Invalid("reason", "a reason is at most 1000 bytes")
	}
	return s.decide(ctx, appID, depID, func(app apps.App, d *Deployment, now time.Time) ([]raftstore.Op, error) {
		d.State = DepRejected
		d.RejectedReason = &reason
		d.FinishedAt = &now
		target := audit.Target{Kind: "deployment", ID: d.ID}
		return []raftstore.Op{
			audit.Record(ctx, now, "deployment.reject", appID, target, map[string]any{"reason": reason}),
			events.Emit(ctx, now, "deploy.rejected", appRef(app), target.Kind, target.ID, map[string]any{"reason": reason}),
		}, nil
	})
}

func (s *Service) decide(ctx context.Context, appID, depID string, change func(apps.App, *Deployment, time.Time) ([]raftstore.Op, error)) (Deployment, error) {
	now := s.d.Now()
	var d Deployment
	_, err := s.d.Store.Update(ctx, func(r *raftstore.Reader) ([]raftstore.Op, error) {
		app, _, ok := apps.Apps.Get(r, appID)
		if !ok {
			return nil, noApp(appID)
		}
		var meta raftstore.Meta
		d, meta, ok = Deployments.Get(r, depID)
		if !ok || d.AppID != appID {
			return nil, errcode.New(errcode.NotFound, "app %s has no deployment %s", appID, depID)
		}
		if d.State != DepWaitingApproval {
			return nil, errcode.New(errcode.StateInvalid, "deployment %s is %s, not waiting for approval", depID, d.State)
		}
		ops, err := change(app, &d, now)
		if err != nil {
			return nil, err
		}
		return append([]raftstore.Op{Deployments.PutIf(&d, meta.ModifyIndex)}, ops...), nil
	})
	if err != nil {
		return Deployment{}, fmt.Errorf("decide deployment %s: %w", depID, err)
	}
	return d, nil
}

// runtime returns the loaded runtime adapter a deployment or release names.
func (s *Service) runtime(id string) (Runtime, error) {
	if s.d.Runtimes == nil {
		return nil, errcode.New(errcode.AdapterUnavailable, "no runtime adapter is loaded")
	}
	rt, err := s.d.Runtimes.Runtime(id)
	if err != nil {
		return nil, err
	}
	if rt == nil {
		return nil, errcode.New(errcode.AdapterUnavailable, "runtime adapter %s is not loaded", id)
	}
	return rt, nil
}

// errorOf is the code and message a failed deploy records: a coded
// error's (its message is written for people, as the API's envelope shows
// it), or INTERNAL without an uncoded error's text (that goes to the log).
func (s *Service) errorOf(err error) (errcode.Code, string) {
	var e *errcode.Error
	if errors.As(err, &e) {
		return e.Code, e.Message
	}
	if errors.Is(err, context.Canceled) {
		return errcode.Internal, "the deploy was interrupted (the server stopped or lost leadership)"
	}
	s.d.Log.Error("deploy failed", "err", err)
	return errcode.Internal, "the deploy failed unexpectedly; the server log has the details"
}
