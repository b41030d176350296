package nomad

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
)

// Where builds run.
const (
	// BuildsOnNomad runs each build as a Nomad batch job (the default).
	BuildsOnNomad = "nomad"
	// BuildsOnController runs builds on the svc server with the
	// configured Builder and packs the result.
	BuildsOnController = "controller"
)

// DefaultBuildTimeout bounds a build whose request sets no time limit.
const DefaultBuildTimeout = 15 * time.Minute

// buildLogTail is how many of a failed build's last lines its error
// carries.
const buildLogTail = 40

// buildGroup is the build job's one group and task.
const buildGroup = "build"

// sourceSuffix names the packed source of a build among the artifacts.
const sourceSuffix = ".src"

// Build runs the build: as a Nomad batch job (BuildsOnNomad), or on the
// controller (BuildsOnController).
func (r *Runtime) Build(ctx context.Context, req scheduler.BuildRequest) (scheduler.Artifact, error) {
	if len(req.Egress) > 0 && r.cfg.Builds != BuildsOnController {
		return scheduler.Artifact{}, egressUnsupported()
	}
	if r.cfg.Builds == BuildsOnController {
		art, err := r.cfg.Builder.Build(ctx, req)
		if err != nil {
			return scheduler.Artifact{}, err
		}
		if _, err := r.cfg.Artifacts.Publish(art); err != nil {
			return scheduler.Artifact{}, fmt.Errorf("build %s: %w", art.ID, err)
		}
		return art, nil
	}
	return r.buildOnNomad(ctx, req)
}

// buildOnNomad runs one build as a Nomad batch job rendered from the
// build template: the source is packed into the artifact store and the
// job's artifact block downloads it at a signed URL; the task builds in
// the build context and, once that succeeded, PUTs the built tree to a
// signed upload URL of the same store; the run job later downloads it
// like any artifact. Waits are blocking queries on the job's
// allocations. The build's output (stdout, then stderr) goes to the
// request's log as it runs (buildLog). A failed build is BUILD_FAILED with its
// exit code and log tail; one past its time limit BUILD_TIMEOUT (the job
// is stopped). The job is purged from Nomad and the packed source removed
// whatever the outcome.
func (r *Runtime) buildOnNomad(ctx context.Context, req scheduler.BuildRequest) (scheduler.Artifact, error) {
	id := req.ID
	if id == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		id = "build-" + hex.EncodeToString(b)
	}
	if !scheduler.PlainName(id) || !scheduler.PlainName(id+sourceSuffix) {
		return scheduler.Artifact{}, errcode.Invalid("id", "the build ID %q is not a plain name", id)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = r.cfg.BuildTimeout
	}
	appID, slug, err := r.buildApp(ctx, req)
	if err != nil {
		return scheduler.Artifact{}, err
	}
	src, err := r.cfg.Artifacts.PublishSource(id+sourceSuffix, req.Source)
	if err != nil {
		return scheduler.Artifact{}, fmt.Errorf("build %s: pack the source: %w", id, err)
	}
	defer func() { _ = r.cfg.Artifacts.Remove(src.ID) }()
	rendered, err := r.templates.RenderBuild(jobtemplates.BuildInput{
		AppID: appID, AppSlug: slug, BuildID: id, Workload: req.Workload, Build: req.Build,
		Source: jobtemplates.ArtifactSource{
			URL:     r.cfg.Artifacts.signedURL("GET", r.cfg.ArtifactBaseURL, src.ID, timeout+time.Hour),
			Archive: "tar.gz", Checksum: "sha256:" + src.SHA256,
		},
		UploadURL: r.cfg.Artifacts.SignedUploadURL(r.cfg.ArtifactBaseURL, id, timeout+time.Hour),
		Timeout:   timeout, Isolation: req.Isolation, Resources: r.cfg.BuildResources, Env: r.cfg.BuildEnv,
		Datacenters: r.cfg.Datacenters, Region: r.cfg.Region, Namespace: r.cfg.Namespace, NodePool: r.cfg.NodePool,
		Driver: r.cfg.Driver, CPUMHzPerCore: r.cfg.CPUMHzPerCore,
	})
	if err != nil {
		return scheduler.Artifact{}, fmt.Errorf("build %s: %w", id, err)
	}
	job, err := decodeJob(rendered)
	if err != nil {
		return scheduler.Artifact{}, fmt.Errorf("build %s: %w", id, err)
	}
	nid := *job.ID
	// The clock starts before the job is registered: Nomad may start the
	// task (and its max_run_duration) before register returns, and a
	// build it kills at its limit is a timeout, not a stopped build.
	began := time.Now()
	if _, err := r.register(ctx, job, true, 0, buildGroup); err != nil {
		if e, ok := errcode.As(err); ok && e.Code == errcode.CapacityOversubscribe {
			e.WithRemedy("free resources on the Nomad clients, add clients, or lower the nomad adapter's build_cpu_millis and build_memory_mb")
		}
		return scheduler.Artifact{}, err
	}
	defer r.purgeBuild(ctx, nid)

	var logs *buildLog
	alloc, err := r.awaitBuild(ctx, nid, timeout, func(allocID string) { logs = r.followBuild(ctx, allocID, req.Log) })
	if logs != nil {
		logs.finish(ctx)
	}
	switch {
	case errors.Is(err, errBuildTimeout) || (err != nil && ctx.Err() == nil && time.Since(began) >= timeout):
		return scheduler.Artifact{}, errcode.New(errcode.BuildTimeout, "the build ran past its time limit of %s", timeout).
			WithDetail("timeout", timeout.String()).WithDetail("log_tail", r.buildTail(ctx, alloc))
	case err != nil:
		var e *errcode.Error
		if errors.As(err, &e) && e.Code == errcode.BuildFailed {
			e.WithDetail("log_tail", r.buildTail(ctx, alloc))
		}
		return scheduler.Artifact{}, err
	}
	// The upload may have reached another svc server: Ensure fetches it.
	if _, err := r.cfg.Artifacts.Ensure(ctx, scheduler.Artifact{ID: id}); errcode.CodeOf(err) == errcode.AdapterUnavailable {
		return scheduler.Artifact{}, err
	} else if err != nil {
		return scheduler.Artifact{}, errcode.New(errcode.BuildFailed,
			"the build succeeded but its upload never reached svc at %s", r.cfg.ArtifactBaseURL).
			WithDetail("log_tail", r.buildTail(ctx, alloc)).
			WithRemedy("check that Nomad clients reach svc at the nomad adapter's artifact_url and have curl")
	}
	return scheduler.Artifact{ID: id, Kind: req.Build.Kind}, nil
}

// errBuildTimeout is awaitBuild's answer when the time limit passed.
var errBuildTimeout = errors.New("build timed out")

// buildApp is the app ID and slug a build job is named after: the
// request's app (its slug from Describe), or noApp for a build that names
// none (tests).
func (r *Runtime) buildApp(ctx context.Context, req scheduler.BuildRequest) (string, string, error) {
	appID := req.AppID
	if appID == "" {
		return noApp, noApp, nil
	}
	slug := appID
	if r.cfg.Describe != nil {
		info, err := r.cfg.Describe(ctx, scheduler.Job{ID: req.ID, AppID: appID})
		if err != nil {
			return "", "", fmt.Errorf("describe the app of build %s: %w", req.ID, err)
		}
		if info.Slug != "" {
			slug = info.Slug
		}
	}
	return appID, slug, nil
}

// awaitBuild waits with blocking queries until the build's allocation
// ends: nil when it completed, BUILD_FAILED (with the exit code) when its
// task failed, ADAPTER_FAILED when it never ran, errBuildTimeout when the
// time limit passed first. It returns the allocation's ID once there is
// one, and calls started once with it when its task has started.
func (r *Runtime) awaitBuild(ctx context.Context, jobID string, timeout time.Duration, started func(allocID string)) (string, error) {
	return r.awaitBatch(ctx, jobID, buildGroup, timeout, started, buildOutcome)
}

// awaitBatch waits with blocking queries until the allocation of a batch
// job's group ends, as outcome reads it (done, and the failure), or the
// time limit passes first (errBuildTimeout). It returns the allocation's
// ID once there is one, and calls started (if set) once with it when its
// task has started.
func (r *Runtime) awaitBatch(ctx context.Context, jobID, group string, timeout time.Duration, started func(allocID string),
	outcome func(*api.AllocationListStub) (bool, error)) (string, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var index uint64
	allocID := ""
	for {
		allocs, meta, err := r.client.Jobs().Allocations(jobID, false, (&api.QueryOptions{WaitIndex: index, WaitTime: blockWait}).WithContext(wctx))
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return allocID, fmt.Errorf("build job %s: %w", jobID, cerr)
			}
			if errors.Is(wctx.Err(), context.DeadlineExceeded) {
				return allocID, errBuildTimeout
			}
			return allocID, r.translate(err, "read the allocations of job "+jobID, "batch job "+jobID)
		}
		if a := newest(allocs, group); a != nil {
			if allocID == "" {
				if ts := taskOf(a.TaskStates, group); ts != nil && (ts.State == "running" || ts.State == "dead") {
					allocID = a.ID
					if started != nil {
						started(allocID)
					}
				}
			}
			if done, err := outcome(a); done {
				allocID = a.ID
				return allocID, err
			}
		}
		index = max(index, meta.LastIndex, 1)
	}
}

// buildOutcome reads a build allocation: done once it is terminal, with
// nil for a completed build, BUILD_FAILED for a task that exited non-zero
// and ADAPTER_FAILED for one that never ran (its artifact or driver
// failed).
func buildOutcome(a *api.AllocationListStub) (bool, error) {
	ts := taskOf(a.TaskStates, buildGroup)
	finished := terminal(a) || (ts != nil && ts.State == "dead")
	if !finished {
		return false, nil
	}
	if a.ClientStatus == api.AllocClientStatusComplete || (ts != nil && ts.State == "dead" && !ts.Failed) {
		return true, nil
	}
	if ts != nil {
		for i := len(ts.Events) - 1; i >= 0; i-- {
			if ev := ts.Events[i]; ev.Type == api.TaskTerminated {
				code := exitCodeOf(ev)
				return true, errcode.New(errcode.BuildFailed, "the build command failed with exit code %d", code).
					WithDetail("exit_code", code).WithDetail("allocation", a.ID)
			}
		}
		for _, ev := range ts.Events {
			if ev.Type == api.TaskKilled {
				return true, errcode.New(errcode.BuildFailed, "the build was stopped before it ended (its Nomad job was stopped)").
					WithDetail("allocation", a.ID)
			}
		}
		for _, ev := range ts.Events {
			if ev.FailsTask || ev.Type == api.TaskArtifactDownloadFailed || ev.Type == api.TaskDriverFailure || ev.Type == api.TaskSetupFailure {
				return true, errcode.New(errcode.AdapterFailed, "nomad could not run the build: %s: %s", ev.Type, redactQueries(ev.DisplayMessage)).
					WithDetail("allocation", a.ID)
			}
		}
	}
	return true, errcode.New(errcode.AdapterFailed, "nomad could not run the build: allocation %s: %s", a.ClientStatus, redactQueries(a.ClientDescription)).
		WithDetail("allocation", a.ID)
}

// buildTail is the end of a build's output for its error: the last lines
// of stdout and of stderr.
func (r *Runtime) buildTail(ctx context.Context, allocID string) []string {
	return r.batchTail(ctx, allocID, buildGroup)
}

// batchTail is the end of a batch task's output: the last lines of
// stdout and of stderr.
func (r *Runtime) batchTail(ctx context.Context, allocID, task string) []string {
	if allocID == "" {
		return []string{}
	}
	var tail []string
	for _, stream := range []string{scheduler.StreamStdout, scheduler.StreamStderr} {
		lines, err := r.logTail(ctx, allocID, task, stream, 16<<10)
		if err != nil {
			continue
		}
		if len(lines) > buildLogTail/2 {
			lines = lines[len(lines)-buildLogTail/2:]
		}
		tail = append(tail, lines...)
	}
	if tail == nil {
		tail = []string{}
	}
	return tail
}

// purgeBuild deregisters and purges a build job: a running build is
// stopped (its allocation killed) and Nomad forgets it.
func (r *Runtime) purgeBuild(ctx context.Context, jobID string) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	if _, _, err := r.client.Jobs().Deregister(jobID, true, r.write(pctx)); err != nil && statusOf(err) != 404 {
		r.log.Warn("nomad: purge a batch job", "nomad_job", jobID, "err", errcode.MessageOf(r.translate(err, "purge job "+jobID, "batch job "+jobID)))
	}
}

// HasArtifact says whether the artifact store holds the artifact, here
// or on another svc server (it is fetched then): a release's build can be
// run again without building it.
func (r *Runtime) HasArtifact(ctx context.Context, art scheduler.Artifact) bool {
	_, err := r.cfg.Artifacts.Ensure(ctx, scheduler.Artifact{ID: art.ID})
	return err == nil
}

// CancelBuilds stops and purges the build jobs of a deployment (a server
// that died mid-build leaves them running): svc's jobs whose meta names a
// build <deployment>-<workload>.
func (r *Runtime) CancelBuilds(ctx context.Context, deploymentID string) error {
	if deploymentID == "" {
		return errcode.Invalid("deployment_id", "a deployment ID is required")
	}
	stubs, _, err := r.client.Jobs().ListOptions(&api.JobListOptions{Fields: &api.JobListFields{Meta: true}}, r.query(ctx))
	if err != nil {
		return r.translate(err, "list jobs", "the jobs")
	}
	var errs []error
	for _, s := range stubs {
		if s.Meta[jobtemplates.MetaManagedBy] != jobtemplates.ManagedBy || !strings.HasPrefix(s.Meta[jobtemplates.MetaBuildID], deploymentID+"-") {
			continue
		}
		if _, _, err := r.client.Jobs().Deregister(s.ID, true, r.write(ctx)); err != nil && statusOf(err) != 404 {
			errs = append(errs, r.translate(err, "purge build job "+s.ID, "build job "+s.ID))
		}
	}
	return errors.Join(errs...)
}
