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
	// checkouts gives the app's recorded checkout (Ensure), or the one a
	// deployment recorded (CheckoutOf: current, or kept for a release),
	// fetched from the other servers when this one lacks it (NOT_FOUND
	// when none has it, ADAPTER_UNAVAILABLE when they cannot be asked).
	checkouts interface {
		Ensure(ctx context.Context, appID string) (source.Checkout, error)
		CheckoutOf(ctx context.Context, appID string, src apps.Source) (source.Checkout, error)
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
	// DiskInterval is how often CheckDisk reads the disk of every running
	// app with a disk limit (disk.check_interval); 0 means a minute.
	DiskInterval time.Duration
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

	disk *diskState // disk limits' memory (disk.go)
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
	if cfg.DiskInterval <= 0 {
		cfg.DiskInterval = time.Minute
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
		inflight: map[string]bool{}, slots: make(chan struct{}, cfg.Workers), disk: newDiskState()}
}

func appRef(a apps.App) *events.AppRef { return &events.AppRef{ID: a.ID, Name: a.Name, Slug: a.Slug} }

func noApp(id string) error { return errcode.New(errcode.NotFound, "no app %s", id) }

// Create asks for a deploy of an app's revision n (0: the pinned one) with
// the app's source as recorded now (a secret rotation: the release's
// revision with the release's source and builds). It refuses what the
// plan refuses, a deploy while another runs (for a person's deploy; a
// deploy the service starts itself waits its turn), and what the host
// cannot fit. A deploy the spec holds for approval waits; any other is
// queued for the leader's deploy worker.
func (s *Service) Create(ctx context.Context, appID string, n uint64, trigger string) (Deployment, error) {
	return s.create(ctx, appID, n, trigger, "")
}

// create is Create; redeploys, when set, names the deployment whose
// release the new one ships again (a rollback's target): its revision n,
// its source and its builds.
func (s *Service) create(ctx context.Context, appID string, n uint64, trigger, redeploys string) (Deployment, error) {
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
			RequestID: actor.From(ctx).RequestID,
		}
		src, from, err := shippedSource(r, app, rev, trigger, redeploys)
		if err != nil {
			return nil, err
		}
		dep.Source, dep.Redeploys = src, from
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
	s.phase(ctx, dep, slog.LevelInfo, "deploy "+dep.State, "revision", dep.Revision, "trigger", trigger, "runtime", dep.Runtime,
		"source", sourceName(dep.Source), "redeploys", dep.Redeploys)
	return dep, nil
}

// shippedSource is the source a new deployment of revision rev ships, and
// the deployment whose release it ships again: a rollback's target's
// (redeploys); for a secret rotation of the release's revision, the
// release's; else the app's recorded source, and none.
func shippedSource(r *raftstore.Reader, app apps.App, rev uint64, trigger, redeploys string) (*apps.Source, string, error) {
	if trigger == TriggerSecretRotation && redeploys == "" {
		if rel, _, ok := Releases.Get(r, app.ID); ok && rel.Revision == rev {
			redeploys = rel.DeploymentID
		}
	}
	if redeploys != "" {
		d, _, ok := Deployments.Get(r, redeploys)
		if !ok || d.AppID != app.ID {
			return nil, "", errcode.New(errcode.StateInvalid, "deployment %s of app %s is gone", redeploys, app.ID).
				WithRemedy("deploy a revision by number: POST /api/v1/apps/%s/deployments {\"revision\": n}", app.ID)
		}
		return d.Source, d.ID, nil
	}
	if app.Source == nil {
		return nil, "", nil
	}
	src := *app.Source
	return &src, "", nil
}

// sourceName is how logs name a source: its commit (or archive digest)
// and checkout.
func sourceName(src *apps.Source) string {
	switch {
	case src == nil || src.Commit == "":
		return "none recorded"
	case src.CheckoutID == "":
		return src.Kind + " " + src.Commit
	}
	return src.Kind + " " + src.Commit + " (checkout " + src.CheckoutID + ")"
}

// phase writes an operator's log line about a deploy: its app, deployment
// and the request that asked for it, then attrs.
func (s *Service) phase(ctx context.Context, d Deployment, level slog.Level, msg string, attrs ...any) {
	s.d.Log.Log(ctx, level, msg, append([]any{"app_id", d.AppID, "deployment_id", d.ID, "request_id", d.RequestID}, attrs...)...)
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

// Rollback ships again the last release that ran successfully before the
// one the app runs now (rollbackTarget): its revision, its source and its
// builds, whose kept artifacts start without building. When they are no
// longer kept, the deploy builds from that release's own source; a
// release whose builds and source are both gone cannot be restored
// (STATE_INVALID, with what to do instead).
func (s *Service) Rollback(ctx context.Context, appID string) (Deployment, error) {
	r := s.d.Store.Read()
	if !apps.Exists(r, appID) {
		return Deployment{}, noApp(appID)
	}
	rel, _, hasRelease := Releases.Get(r, appID)
	target, ok := rollbackTarget(appDeployments(r, appID, 0), rel, hasRelease)
	if !ok {
		return Deployment{}, errcode.New(errcode.StateInvalid, "app %s has no earlier release that ran successfully", appID).
			WithRemedy("deploy a revision by number: POST /api/v1/apps/%s/deployments {\"revision\": n}", appID)
	}
	if err := s.restorable(ctx, target); err != nil {
		return Deployment{}, err
	}
	return s.create(ctx, appID, target.Revision, TriggerRollback, target.ID)
}

// restorable says whether a release can be shipped again: its artifacts
// are all kept on its runtime, or else its source can still be had (here,
// from another server, or cloned again at its commit) to build from.
func (s *Service) restorable(ctx context.Context, d Deployment) error {
	if rt, err := s.runtime(d.Runtime); err == nil && len(d.Artifacts) > 0 {
		kept := true
		for _, a := range d.Artifacts {
			kept = kept && artifactExists(ctx, rt, a)
		}
		if kept {
			return nil
		}
	}
	gone := func(why string) error {
		return errcode.New(errcode.StateInvalid, "the release of deployment %s (revision %d) cannot be shipped again: its builds are no longer kept and %s", d.ID, d.Revision, why).
			WithDetail("deployment_id", d.ID).
			WithRemedy("upload that source again (POST /api/v1/apps/%s/source) and deploy revision %d, or deploy another revision: POST /api/v1/apps/%s/deployments {\"revision\": n}", d.AppID, d.Revision, d.AppID)
	}
	if d.Source == nil || d.Source.CheckoutID == "" {
		return gone("it recorded no source to build them from")
	}
	if _, err := s.d.Sources.CheckoutOf(ctx, d.AppID, *d.Source); err != nil {
		if errcode.Has(err, errcode.NotFound) {
			return gone(fmt.Sprintf("its source (%s) is on no server: %s", sourceName(d.Source), errcode.MessageOf(err)))
		}
		return err
	}
	return nil
}

// Approve records the caller's approval of a held deploy; with enough of
// them it is queued. The person who asked for the deploy cannot approve it.
func (s *Service) Approve(ctx context.Context, appID, depID string) (Deployment, error) {
	who := actorID(ctx)
	d, err := s.decide(ctx, appID, depID, func(app apps.App, d *Deployment, now time.Time) ([]raftstore.Op, error) {
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
	if err == nil && d.State == DepQueued {
		s.phase(ctx, d, slog.LevelInfo, "deploy queued", "revision", d.Revision, "trigger", d.Trigger, "approved_by", who,
			"approve_request_id", actor.From(ctx).RequestID)
	}
	return d, err
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
