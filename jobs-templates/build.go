package jobtemplates

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
)

// BuildInput is what the Nomad runtime knows when it builds one workload:
// the build request, where the source comes from and where the built tree
// goes.
type BuildInput struct {
	AppID   string
	AppSlug string
	// BuildID names the build (scheduler.BuildRequest.ID, <deployment>-
	// <workload> on the deploy path) and the job.
	BuildID string
	// DeploymentID and Workload go into the job's meta; either may be
	// empty.
	DeploymentID string
	Workload     string
	// Build is the workload's build section. Kinds go, node, python and
	// command run their command (python in a virtualenv in the tree, as
	// the process runtime does, but with copies of the interpreter: the
	// run task's artifact download drops symlinks); static needs none;
	// dockerfile and image are refused.
	Build spec.Build
	// Source is the app's source tree (a short-lived signed URL to the svc
	// servers); Build.Context is relative to it.
	Source ArtifactSource
	// UploadURL is where the built tree goes (a short-lived signed URL);
	// the upload command finds it in SVC_UPLOAD_URL.
	UploadURL string
	// Upload is the command that uploads the built tree once the build
	// succeeded: it runs in the build context (the built tree) with
	// SVC_UPLOAD_URL set; Nomad's interpolation applies to it. Empty means
	// DefaultUpload.
	Upload []string
	// Timeout bounds the build (the group's max_run_duration); 0 for none.
	Timeout time.Duration
	// Isolation is the isolation level the build must run at.
	Isolation string
	// Resources are the build's; nil means DefaultBuildResources.
	Resources *spec.Resources
	// Env is added to the build's environment (the process runtime's
	// BuildEnv): toolchain caches, proxies.
	Env map[string]string
	// Cluster placement and driver, as in ServiceInput.
	Datacenters   []string
	Region        string
	Namespace     string
	NodePool      string
	Driver        string
	CPUMHzPerCore int
}

// BuildJob is the data of the build template: a batch job of one group and
// one task that downloads the source, builds and uploads the built tree.
type BuildJob struct {
	ID          string
	Name        string
	Region      string
	Namespace   string
	NodePool    string
	Datacenters []string
	Meta        map[string]string
	Group       Group
}

// DefaultUpload packs the build context (the working directory) into a
// gzipped tarball beside it and PUTs it to SVC_UPLOAD_URL with curl, which
// the build clients need.
var DefaultUpload = []string{"/bin/sh", "-c",
	`tar -czf "$NOMAD_TASK_DIR/built.tar.gz" . && curl -fsS --retry 3 -H 'Content-Type: application/gzip' -T "$NOMAD_TASK_DIR/built.tar.gz" "$SVC_UPLOAD_URL"`}

// DefaultBuildResources are a build's resources when its input sets none:
// compilers and package managers need more than Nomad's default 300 MB.
var DefaultBuildResources = spec.Resources{CPUMillis: 1000, MemoryBytes: 2 << 30}

// The build job's policies: a build runs once; a failure is the deploy's.
var (
	BuildRestart    = RestartPolicy{Attempts: 0, Interval: 24 * time.Hour, Delay: 15 * time.Second, Mode: "fail"}
	BuildReschedule = ReschedulePolicy{Attempts: 0, Unlimited: false}
)

// buildScript runs the build command ($1) with sh, as the process runtime
// does, and only once it succeeded, the upload command (the rest).
const buildScript = `/bin/sh -c "$1" || exit $?
shift
exec "$@"`

// buildKinds are the kinds a Nomad build runs.
var buildKinds = []string{spec.BuildGo, spec.BuildNode, spec.BuildPython, spec.BuildStatic, spec.BuildCommand}

// sourceDir is where the source lands, relative to the task directory.
const sourceDir = "local/src"

// BuildData builds the build template's data. It is pure. It fails with
// PLAN_CAPABILITY_UNSUPPORTED for a build kind or isolation level the
// driver cannot give, and with a plain error for incomplete input.
func BuildData(in BuildInput) (BuildJob, error) {
	fail := func(format string, args ...any) (BuildJob, error) {
		return BuildJob{}, fmt.Errorf("build job: "+format, args...)
	}
	if !appIDRE.MatchString(in.AppID) {
		return fail("%q is not an app ID", in.AppID)
	}
	slug := slugify(in.AppSlug)
	if slug == "" {
		return fail("the app slug %q has no letter or digit", in.AppSlug)
	}
	if idPart(in.BuildID, "dep_") == "" {
		return fail("no build ID")
	}
	if err := checkDriver(in.Driver); err != nil {
		return BuildJob{}, fmt.Errorf("build job: %w", err)
	}
	if err := checkIsolation(in.Driver, in.Isolation); err != nil {
		return BuildJob{}, err
	}
	if !slices.Contains(buildKinds, in.Build.Kind) {
		return BuildJob{}, errcode.New(errcode.PlanCapabilityUnsupp, "the Nomad runtime does not run %q builds", in.Build.Kind).
			WithDetail("kind", in.Build.Kind).WithDetail("supported", buildKinds)
	}
	command := in.Build.Command
	if strings.TrimSpace(command) == "" {
		command = ""
	}
	if command == "" && in.Build.Kind != spec.BuildStatic {
		return BuildJob{}, errcode.New(errcode.BuildFailed, "a %q build needs a command", in.Build.Kind)
	}
	if command != "" && in.Build.Kind == spec.BuildPython {
		// --copies: Nomad's artifact download drops symlinks, and a
		// virtualenv's interpreter is one by default.
		command = "python3 -m venv --copies " + venvDir + " && . " + venvDir + "/bin/activate && " + command
	}
	ctx := in.Build.Context
	if ctx == "" {
		ctx = "."
	}
	if ctx = path.Clean(ctx); !localPath(ctx) {
		return fail("the build context %q is outside the source", in.Build.Context)
	}
	if in.Source.URL == "" {
		return fail("no source URL")
	}
	if in.UploadURL == "" {
		return fail("no upload URL")
	}
	if in.Timeout < 0 || in.CPUMHzPerCore < 0 {
		return fail("a negative timeout or CPU MHz per core")
	}
	upload := in.Upload
	if len(upload) == 0 {
		upload = DefaultUpload
	}

	id := BuildJobID(slug, in.BuildID)
	job := BuildJob{
		ID: id, Name: id,
		Region: in.Region, Namespace: in.Namespace, NodePool: in.NodePool,
		Datacenters: datacenters(in.Datacenters),
		Meta: map[string]string{
			MetaManagedBy: ManagedBy,
			MetaAppID:     in.AppID,
			MetaAppSlug:   in.AppSlug,
			MetaBuildID:   in.BuildID,
		},
	}
	if in.DeploymentID != "" {
		job.Meta[MetaDeploymentID] = in.DeploymentID
	}
	if in.Workload != "" {
		job.Meta[MetaWorkload] = in.Workload
	}

	dir := "${NOMAD_TASK_DIR}/src"
	if ctx != "." {
		dir += "/" + hclLiteral(ctx)
	}
	env := map[string]string{
		"HOME":                          "${NOMAD_TASK_DIR}",
		"GOTOOLCHAIN":                   "local",
		"CGO_ENABLED":                   "0",
		"PIP_ROOT_USER_ACTION":          "ignore",
		"PIP_DISABLE_PIP_VERSION_CHECK": "1",
		"SVC_UPLOAD_URL":                in.UploadURL,
	}
	if in.Driver == DriverExec {
		env["PATH"] = defaultPath
	}
	maps.Copy(env, in.Env)
	res := in.Resources
	if res == nil {
		res = &DefaultBuildResources
	}
	r, disk, _ := resources(res, 0, in.CPUMHzPerCore)
	args := append([]string{"-c", buildScript, "svc-build", hclLiteral(command)}, upload...)
	job.Group = Group{
		Name:           "build",
		Meta:           map[string]string{MetaWorkload: in.Workload},
		Restart:        BuildRestart,
		Reschedule:     BuildReschedule,
		MaxRunDuration: in.Timeout,
		EphemeralDisk:  disk,
		Task: Task{
			Name:        "build",
			Driver:      in.Driver,
			Config:      TaskConfig{Command: "/bin/sh", Args: args, WorkDir: dir},
			Env:         env,
			Artifacts:   []Artifact{artifact(in.Source, sourceDir)},
			Resources:   r,
			KillTimeout: killTimeout,
		},
	}
	return job, nil
}

// localPath says whether a cleaned slash path stays inside its root.
func localPath(p string) bool {
	return p == "." || (!path.IsAbs(p) && p != ".." && !strings.HasPrefix(p, "../"))
}
