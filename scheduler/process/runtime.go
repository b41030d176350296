package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
)

// Config configures a process runtime.
type Config struct {
	// WorkDir holds the build work areas (WorkDir/builds/<id>). Required.
	WorkDir string
	// CacheDir holds the toolchains' caches (GOCACHE, GOPATH, npm's cache)
	// shared by builds. Empty means WorkDir/cache.
	CacheDir string
	// BuildEnv adds to (or overrides) the clean environment of builds.
	BuildEnv map[string]string
	// BuildTimeout is a build's default time limit; 0 means 15 minutes.
	BuildTimeout time.Duration
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL; 0
	// means 10 seconds.
	StopGrace time.Duration
	// StartTimeout bounds how long Run waits for a workload to be ready;
	// 0 means 60 seconds.
	StartTimeout time.Duration
	// SettleTime is how long a workload without a port must stay up to
	// count as ready; 0 means 1 second.
	SettleTime time.Duration
	// HealthInterval is the health check interval when the workload's
	// check names none; 0 means 10 seconds.
	HealthInterval time.Duration
	// RestartBackoff is the first restart's delay, doubled per restart in
	// a row up to MaxRestartBackoff; 0 means 1 second and 30 seconds.
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	// LogCapBytes caps each workload's kept log; 0 means 1 MiB.
	LogCapBytes int
}

// Runtime is the process runtime: a scheduler.Builder and scheduler.Runner
// on this machine.
type Runtime struct {
	cfg Config

	mu   sync.Mutex
	jobs map[string]*job
	seq  int
}

var (
	_ scheduler.Builder   = (*Runtime)(nil)
	_ scheduler.Runner    = (*Runtime)(nil)
	_ scheduler.LogReader = (*Runtime)(nil)
)

// New returns a process runtime after checking its configuration.
func New(cfg Config) (*Runtime, error) {
	if cfg.WorkDir == "" {
		return nil, errors.New("process runtime: a work directory is required")
	}
	abs, err := filepath.Abs(cfg.WorkDir)
	if err != nil {
		return nil, fmt.Errorf("process runtime: work directory: %w", err)
	}
	cfg.WorkDir = abs
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(cfg.WorkDir, "cache")
	}
	if cfg.CacheDir, err = filepath.Abs(cfg.CacheDir); err != nil {
		return nil, fmt.Errorf("process runtime: cache directory: %w", err)
	}
	for _, d := range []string{filepath.Join(cfg.WorkDir, "builds"), cfg.CacheDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("process runtime: %w", err)
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.BuildTimeout, 15*time.Minute)
	def(&cfg.StopGrace, 10*time.Second)
	def(&cfg.StartTimeout, 60*time.Second)
	def(&cfg.SettleTime, time.Second)
	def(&cfg.HealthInterval, 10*time.Second)
	def(&cfg.RestartBackoff, time.Second)
	def(&cfg.MaxRestartBackoff, 30*time.Second)
	if cfg.LogCapBytes <= 0 {
		cfg.LogCapBytes = 1 << 20
	}
	return &Runtime{cfg: cfg, jobs: map[string]*job{}}, nil
}

func notFound(jobID string) error {
	return errcode.New(errcode.NotFound, "no job %q on this runtime", jobID)
}

// Status reports the job's state.
func (r *Runtime) Status(ctx context.Context, jobID string) (scheduler.JobStatus, error) {
	r.mu.Lock()
	j := r.jobs[jobID]
	r.mu.Unlock()
	if j == nil {
		return scheduler.JobStatus{}, notFound(jobID)
	}
	return j.status(), nil
}

// Logs returns a workload's kept output lines, oldest first.
func (r *Runtime) Logs(ctx context.Context, jobID, workload string) ([]string, error) {
	r.mu.Lock()
	j := r.jobs[jobID]
	r.mu.Unlock()
	if j == nil {
		return nil, notFound(jobID)
	}
	w := j.workloads[workload]
	if w == nil {
		return nil, errcode.New(errcode.NotFound, "no workload %q in job %q", workload, jobID)
	}
	return w.logs.Lines(), nil
}

// Stop stops every workload of the job and forgets it.
func (r *Runtime) Stop(ctx context.Context, jobID string) error {
	r.mu.Lock()
	j := r.jobs[jobID]
	delete(r.jobs, jobID)
	r.mu.Unlock()
	if j == nil {
		return notFound(jobID)
	}
	j.stop(ctx)
	return nil
}
