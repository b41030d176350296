package scheduler

import (
	"context"
	"time"

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
//   - NOT_FOUND when a job is not known to the runtime.

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
	// Source is the directory holding the app's source tree. The runtime
	// copies it and never writes into it.
	Source string
	// Build is the workload's build section; Context is relative to Source.
	Build spec.Build
	// Timeout limits the build; 0 means the runtime's default.
	Timeout time.Duration
	// Log receives the build's output; nil discards it.
	Log LogSink
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
	ID        string
	Workloads map[string]Task
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
	// Port is where the workload listens on 127.0.0.1; 0 lets the runtime
	// pick a free one. A workload that serves no HTTP sets NoPort.
	Port   int
	NoPort bool
	// Health is the HTTP health check; nil checks that the port accepts
	// connections.
	Health    *spec.Health
	Resources *spec.Resources
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
}

// Runner runs jobs.
type Runner interface {
	// Run starts every workload of the job and returns once each is ready
	// (health passing) or the runtime's start timeout passes (the workload
	// keeps running and Status reports its health). A workload that exits
	// before it is ready fails the run with STATE_APP_EXITED, as does the
	// context ending; either way the job is stopped and forgotten.
	Run(ctx context.Context, job Job) (JobStatus, error)
	// Stop stops every workload of the job (SIGTERM, then SIGKILL after a
	// grace) and forgets it. NOT_FOUND if the job is unknown.
	Stop(ctx context.Context, jobID string) error
	// Status reports the job's state. NOT_FOUND if the job is unknown.
	Status(ctx context.Context, jobID string) (JobStatus, error)
}

// LogReader is the optional capability of reading a workload's kept logs.
type LogReader interface {
	// Logs returns the workload's most recent output lines, oldest first.
	Logs(ctx context.Context, jobID, workload string) ([]string, error)
}
