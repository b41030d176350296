package scheduler

import (
	"context"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
)

// The runtime adapter interface, shaped after Nomad's model: a Job is one
// app revision, each of its workloads is a task the runtime supervises, and
// JobStatus reports every task's state (running, restarts, last exit code,
// health, address). Runtimes report failures as *errcode.Error values:
//
//   - BUILD_FAILED when a build command fails (details: "log_tail", the last
//     lines of its output; "exit_code" when it ran);
//   - BUILD_TIMEOUT when a build runs past its time limit;
//   - STATE_APP_EXITED when a workload exits before it is ready (details:
//     "workload" and "exit_code");
//   - BUILD_LISTENS_ON_LOOPBACK when a workload listens on its port only at
//     the loopback address while the runtime addresses workloads elsewhere
//     (details: "workload", "address");
//   - CAPACITY_NO_FREE_PORT when no port can be had for a workload;
//   - NOT_FOUND when a job (or a workload of it) is not known to the runtime.

// Streams a LogSink is given.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// Health states of a workload.
const (
	HealthPassing = "passing"
	HealthFailing = "failing"
	HealthUnknown = "unknown"
)

// LogSink receives output one line at a time (without its newline), with
// the stream it came from. It may be called from several goroutines at once.
type LogSink func(stream, line string)

// BuildRequest asks for one workload's build.
type BuildRequest struct {
	// ID names the build; runtimes use it for the build's work area. Empty
	// lets the runtime pick one.
	ID string
	// AppID and Workload say whose build it is (a runtime that runs
	// builds elsewhere names them after it); either may be empty.
	AppID    string
	Workload string
	// Source is the directory holding the app's source tree. The runtime
	// copies it and never writes into it.
	Source string
	// Build is the workload's build section; Context is relative to Source.
	Build spec.Build
	// Timeout limits the build; 0 means the runtime's default.
	Timeout time.Duration
	// Log receives the build's output; nil discards it.
	Log LogSink
	// Isolation is the isolation level the build must run at (a policy
	// isolation level; host policy's min_build_isolation); empty means the
	// runtime's own setting.
	Isolation string
	// Egress lists the only destinations the build may reach (host
	// policy's egress_allowlist); empty means any. A runtime that cannot
	// enforce a list refuses it (PLAN_CAPABILITY_UNSUPPORTED) rather than
	// ignore it.
	Egress []string
}

// Artifact is what a build produced, handed back to the runtime in a Job.
type Artifact struct {
	ID string `json:"id"`
	// Kind is the build kind the artifact came from.
	Kind string `json:"kind"`
	// Dir is the built tree (the build context in the work area): the
	// working directory of the workload, or the files a static workload
	// serves.
	Dir string `json:"dir"`
}

// Builder builds workloads.
type Builder interface {
	// Build runs the build and returns its artifact. It fails with
	// BUILD_FAILED or BUILD_TIMEOUT.
	Build(ctx context.Context, req BuildRequest) (Artifact, error)
}

// Job is one app revision for a runtime to run.
type Job struct {
	// ID names the job; one job per app revision.
	ID string
	// AppID is the app the job belongs to: volumes are the app's, and
	// outlive its jobs.
	AppID     string
	Workloads map[string]Task
	// Primary names the workload the edge routes to (the spec's primary);
	// empty when the job is not an app's (tests of a runtime).
	Primary string
	// Order is the start order: each workload is started once those before
	// it are ready (dependencies first). Workloads it leaves out start
	// after it, by name. Empty means by name.
	Order []string
}

// PlainName says whether s can name a directory and a URL path segment
// as it is: not empty, not . or .., no separator, no NUL, none of ? # %.
// Runtimes name jobs' work areas, artifacts and volumes with such names.
func PlainName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\?#%\x00") && filepath.IsLocal(s)
}

// Check says whether a runtime can take the job at all: an ID and at
// least one workload, the ID, the workloads' names and their volumes'
// names plain names (VALID_INVALID otherwise).
func (j Job) Check() error {
	if j.ID == "" || len(j.Workloads) == 0 {
		return errcode.Invalid("job", "a job needs an ID and at least one workload")
	}
	if !PlainName(j.ID) {
		return errcode.Invalid("id", "the job ID %q is not a plain name", j.ID)
	}
	for name, t := range j.Workloads {
		if !PlainName(name) {
			return errcode.Invalid("workloads", "the workload name %q is not a plain name", name)
		}
		for _, m := range t.Mounts {
			if !PlainName(m.Volume) {
				return errcode.Invalid("mounts", "the volume name %q is not a plain name", m.Volume)
			}
		}
	}
	return nil
}

// StartOrder is the order a runtime starts the job's workloads in: Order,
// then the workloads it leaves out, by name. VALID_INVALID when Order names
// a workload the job lacks, or one twice.
func (j Job) StartOrder() ([]string, error) {
	names := make([]string, 0, len(j.Workloads))
	for name := range j.Workloads {
		names = append(names, name)
	}
	sort.Strings(names)
	order := make([]string, 0, len(names))
	listed := map[string]bool{}
	for _, name := range j.Order {
		if _, ok := j.Workloads[name]; !ok {
			return nil, errcode.Invalid("order", "the start order names %q, which is not a workload of the job", name)
		}
		if listed[name] {
			return nil, errcode.Invalid("order", "the start order names %q twice", name)
		}
		listed[name] = true
		order = append(order, name)
	}
	for _, name := range names {
		if !listed[name] {
			order = append(order, name)
		}
	}
	return order, nil
}

// Task is one workload of a job, with everything resolved: the runtime
// does not read slots or secrets.
type Task struct {
	Artifact Artifact
	// Command is the program and its arguments (no shell), run in the
	// artifact's directory. Empty for a static artifact: the runtime serves
	// its files itself.
	Command []string
	// Env is the workload's environment, already resolved. The runtime adds
	// PORT.
	Env map[string]string
	// SecretEnv names the variables of Env whose values are the app's
	// secrets, with the secret's key. A runtime that must not carry secret
	// values in its job (Nomad) leaves these out of the job and has the
	// workload read them from the secrets store; the process runtime uses
	// Env as it is.
	SecretEnv map[string]string
	// SealedEnv names the variables of Env made from a filled slot's
	// credential (a password, a connection string holding one). A runtime
	// that must not carry secret values in its job and cannot deliver
	// these another way refuses the task (PLAN_CAPABILITY_UNSUPPORTED)
	// rather than put them in the job.
	SealedEnv map[string]bool
	// Port is the host port the workload must listen on, at the runtime's
	// address for workloads; 0 lets the runtime pick a free one (what the
	// deploy path asks for, so that two revisions and two apps never
	// collide). The runtime tells the workload its port in PORT.
	Port int
	// NoPort marks a workload that serves no HTTP: it gets no port.
	NoPort bool
	// AppPort is the port the spec says the app listens on (run.port), for
	// runtimes that give each workload its own network and map a host
	// port to it; runtimes that share the host's network ignore it.
	AppPort int
	// Health is the HTTP health check; nil checks that the port accepts
	// connections.
	Health    *spec.Health
	Resources *spec.Resources
	// Mounts are the app's volumes this workload mounts. The runtime keeps
	// a volume's data under the volume's ID, so it survives new jobs of
	// the app and the app itself.
	Mounts []Mount
	// LogCapBytes caps the workload's kept log; 0 means the runtime's
	// default.
	LogCapBytes int64
	// Isolation is the isolation level the workload must run at (a policy
	// isolation level); empty means the runtime's weakest.
	Isolation string
	// Egress lists the only destinations the workload may reach (host
	// policy's egress_allowlist: host names, *.domain, IP addresses, CIDR
	// prefixes); empty means any. Every task of a job has the same list. A
	// runtime that cannot enforce a list refuses the task
	// (PLAN_CAPABILITY_UNSUPPORTED) rather than ignore it.
	Egress []string
}

// Mount is a volume mounted into a workload. A runtime that cannot mount
// at Path (the process runtime without a sandbox) gives the workload the
// volume's directory in SVC_VOLUME_<NAME> instead, and a link at Path
// relative to the workload's directory.
type Mount struct {
	Volume string `json:"volume"`
	// ID is the volume's vol_ ID. Runtimes keep a volume's data by it,
	// so that it outlives the app and an app that takes a kept volume
	// over finds the data; empty only in jobs from before volumes had
	// IDs (their data is kept by the app's ID and the volume's name).
	ID string `json:"id,omitempty"`
	// Path is where the workload sees the volume.
	Path string `json:"path"`
	// SizeBytes is the volume's declared size (0: no limit).
	SizeBytes int64 `json:"size_bytes,omitempty"`
}

// JobStatus is the observed state of a job.
type JobStatus struct {
	ID        string                    `json:"id"`
	Workloads map[string]WorkloadStatus `json:"workloads"`
}

// WorkloadStatus is the observed state of one workload.
type WorkloadStatus struct {
	Running  bool `json:"running"`
	Restarts int  `json:"restarts"`
	// ExitCode is the code of the last exit; nil if it never exited.
	ExitCode *int `json:"exit_code,omitempty"`
	// Health is HealthPassing, HealthFailing or HealthUnknown.
	Health string `json:"health"`
	// Address is host:port where the workload listens ("" for none).
	Address string `json:"address,omitempty"`
	// Dead says the runtime stopped restarting the workload: it failed
	// more often than its restart policy allows. Only Stop (and a new Run)
	// follow.
	Dead bool `json:"dead,omitempty"`
	// Problem is why the workload does not run or serve, in svc's words,
	// when the runtime knows (a secrets template that cannot read its
	// Vault path, a driver that cannot start the command, no node with
	// room); nil otherwise.
	Problem *Problem `json:"problem,omitempty"`
}

// Problem is what keeps an app or a workload from serving, as GET
// …/status shows it: a code of the specification, a message naming the
// cause and, where one fits, a remedy.
type Problem struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Remedy  string `json:"remedy,omitempty"`
	// DeploymentID names the failed deployment the problem comes from;
	// Workload the workload it concerns ("" for the app as a whole).
	DeploymentID string `json:"deployment_id,omitempty"`
	Workload     string `json:"workload,omitempty"`
}

// ProblemOf is a coded error as a Problem (nil for nil); an error without
// a code is INTERNAL with a message that tells nothing of its insides.
func ProblemOf(err error) *Problem {
	if err == nil {
		return nil
	}
	e, ok := errcode.As(err)
	if ok && e == nil {
		return nil
	}
	if !ok {
		return &Problem{Code: string(errcode.Internal), Message: "the runtime failed unexpectedly; the server log has the details"}
	}
	return &Problem{Code: string(e.Code), Message: e.Message, Remedy: e.Remedy}
}

// Runner runs jobs.
//
// Every wait of a runner for a workload to be ready (Run, Restart) is
// bounded by the start timeout: the one the context carries
// (WithStartTimeout: the scheduler's runtime.start_timeout), else the
// runtime's own. A job that disappears while a runner waits for it
// (stopped, or removed behind svc's back) ends the wait at once with
// NOT_FOUND.
type Runner interface {
	// Run starts every workload of the job and returns once each is ready
	// (health passing) or the start timeout passes (the workload keeps
	// running and Status reports its health). A workload that exits
	// before it is ready fails the run with STATE_APP_EXITED, the job
	// disappearing meanwhile with NOT_FOUND, and so does the context
	// ending; either way the job is stopped and forgotten.
	Run(ctx context.Context, job Job) (JobStatus, error)
	// Stop stops every workload of the job (SIGTERM, then SIGKILL after a
	// grace) and forgets it. NOT_FOUND if the job is unknown.
	Stop(ctx context.Context, jobID string) error
	// Status reports the job's state. NOT_FOUND if the job is unknown.
	Status(ctx context.Context, jobID string) (JobStatus, error)
	// Restart restarts every workload of the job in place: same artifact,
	// same environment, same address, each waited for up to the start
	// timeout. NOT_FOUND if the job is unknown.
	Restart(ctx context.Context, jobID string) error
}

// startTimeoutKey carries the start timeout in a context.
type startTimeoutKey struct{}

// WithStartTimeout returns ctx carrying the start timeout runners bound
// their waits for readiness with (d <= 0 leaves ctx as it is).
func WithStartTimeout(ctx context.Context, d time.Duration) context.Context {
	if d <= 0 {
		return ctx
	}
	return context.WithValue(ctx, startTimeoutKey{}, d)
}

// StartTimeout is the start timeout ctx carries, else def (the runtime's
// own).
func StartTimeout(ctx context.Context, def time.Duration) time.Duration {
	if d, ok := ctx.Value(startTimeoutKey{}).(time.Duration); ok && d > 0 {
		return d
	}
	return def
}

// Runtime is a runtime adapter's whole interface: it builds and runs.
type Runtime interface {
	Builder
	Runner
}

// LogReader is the optional capability of reading a workload's kept logs.
type LogReader interface {
	// Logs returns the workload's most recent output lines, oldest first.
	Logs(ctx context.Context, jobID, workload string) ([]string, error)
}

// LogFollower is the optional capability of following a workload's output
// as it is written, without polling.
type LogFollower interface {
	// FollowLogs calls emit first with the workload's kept lines, oldest
	// first (perhaps none), then with each batch of lines written after
	// them, in order, none lost or repeated between the two. It returns
	// why the output ended (LogsStopped, LogsLagged), or ctx's error when
	// ctx ended first, or emit's. A job that is not running gives its kept
	// lines and LogsStopped.
	FollowLogs(ctx context.Context, jobID, workload string, emit func(lines []string) error) (string, error)
}

// Why a followed output ended.
const (
	// LogsStopped: the workload's job stopped (a redeploy replaced it, the
	// app was stopped); no more lines will come.
	LogsStopped = "stopped"
	// LogsLagged: the reader fell so far behind the output that lines
	// would have been lost; follow again to go on.
	LogsLagged = "lagged"
)

// Discarder is the optional capability of dropping what a stopped job's
// workloads wrote outside their volumes (their working directories), once
// no run of the job will follow: the deploy path discards a job that
// failed, and the previous job once a new one serves. Logs stay.
type Discarder interface {
	Discard(ctx context.Context, jobID string) error
}

// WriteDropper is the optional capability of dropping what a stopped
// job's workloads wrote outside their volumes (their working directories)
// while the job may still run again: its next run starts from its built
// files, as a Nomad allocation starts with a fresh ephemeral disk. Unlike
// Discard, nothing a run needs is dropped (credentials, artifacts), and
// logs stay. The scheduler drops a job's writes when it stops the app
// for going over its disk limit. STATE_INVALID while the job runs.
type WriteDropper interface {
	DropWrites(ctx context.Context, jobID string) error
}

// BuildCanceler is the optional capability of a runtime whose builds run
// outside the server that asked for them (a Nomad batch job) and so
// outlive it: it stops every build of a deployment (build IDs
// <deployment>-<workload>). The deploy path calls it for a deployment
// whose server died mid-build.
type BuildCanceler interface {
	CancelBuilds(ctx context.Context, deploymentID string) error
}

// Pruner is the optional capability of letting go of what old jobs and
// builds left on the runtime's disk: an artifact no deployment will run
// again, and a job's kept logs.
type Pruner interface {
	RemoveArtifact(ctx context.Context, art Artifact) error
	RemoveJobLogs(ctx context.Context, jobID string) error
}

// ArtifactKeeper is the optional capability of a runtime whose artifacts
// are not directories on this server (they live in a store of its own,
// Artifact.Dir empty): it says whether an artifact can still be run. A
// runtime without it keeps artifacts at Artifact.Dir.
type ArtifactKeeper interface {
	HasArtifact(ctx context.Context, art Artifact) bool
}

// Usage is a reading of a job's resource use beside its limits.
type Usage struct {
	// Supported is false when the runtime cannot read usage; the rest is
	// then zero.
	Supported bool `json:"supported"`
	// HostCPUMillis and HostMemoryBytes say what "no limit" means: what the
	// host has.
	HostCPUMillis   int64                    `json:"host_cpu_millis"`
	HostMemoryBytes int64                    `json:"host_memory_bytes"`
	Workloads       map[string]WorkloadUsage `json:"workloads"`
}

// WorkloadUsage is one workload's reading.
type WorkloadUsage struct {
	// CPUMillis is CPU use in thousandths of a core, averaged over the
	// runtime's last sampling interval.
	CPUMillis   int64 `json:"cpu_millis"`
	MemoryBytes int64 `json:"memory_bytes"`
	DiskBytes   int64 `json:"disk_bytes"`
	// Volumes is each mounted volume's size in bytes, by volume name.
	Volumes map[string]int64 `json:"volumes"`
	// Limits are the workload's limits; 0 means none.
	Limits Limits `json:"limits"`
}

// Limits are resource limits; 0 means none.
type Limits struct {
	CPUMillis   int64 `json:"cpu_millis"`
	MemoryBytes int64 `json:"memory_bytes"`
	DiskBytes   int64 `json:"disk_bytes"`
}

// UsageReader is the optional capability of reading a job's resource use.
type UsageReader interface {
	Usage(ctx context.Context, jobID string) (Usage, error)
}

// DiskReader is the optional capability of reading only the disk a job's
// workloads use, by workload: what a Usage reading reports as each
// workload's DiskBytes, without the rest of a reading (a CPU sample
// waits). The scheduler's disk limits read every running app's at every
// check; an app on a runtime without it is not checked (its GET …/usage
// readings still count).
type DiskReader interface {
	DiskUsage(ctx context.Context, jobID string) (map[string]int64, error)
}

// Host is what a runtime's machine has, for capacity decisions.
type Host struct {
	CPUMillis   int64 `json:"cpu_millis"`
	MemoryBytes int64 `json:"memory_bytes"`
}

// HostReader is the optional capability of saying what the host has.
type HostReader interface {
	Host(ctx context.Context) (Host, error)
}

// ExecRequest asks for a command in a running workload.
type ExecRequest struct {
	JobID    string
	Workload string
	// Command is the program and its arguments; empty means a shell.
	Command []string
	// TTY runs the command on a pseudo-terminal of Rows by Cols.
	TTY        bool
	Rows, Cols uint16
}

// ExecSession is a running command: writes go to its input, reads come
// from its output (stdout and stderr merged on a terminal).
type ExecSession interface {
	io.ReadWriteCloser
	// Resize changes the terminal's size; a no-op without a TTY.
	Resize(rows, cols uint16) error
	// Wait waits for the command to end and returns its exit code.
	Wait() (int, error)
}

// Execer is the optional capability of running a command in a workload:
// in its directory, with its environment, at its isolation. Close of the
// session kills the command.
type Execer interface {
	Exec(ctx context.Context, req ExecRequest) (ExecSession, error)
}
