package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/scheduler"
)

// Config configures a process runtime.
type Config struct {
	// WorkDir holds the build work areas (WorkDir/builds/<id>), the
	// volumes (WorkDir/volumes/<appID>/<volume>), the workloads' logs
	// (WorkDir/logs/<jobID>/<workload>.log) and the running jobs' records
	// (WorkDir/jobs/<jobID>.json). Required. One Runtime uses a WorkDir at
	// a time: New reaps the processes its records name.
	WorkDir string
	// CacheDir holds the toolchains' caches (GOCACHE, GOPATH, npm's cache),
	// one set per app (CacheDir/apps/<app ID>), and the Go build cache seed.
	// Empty means WorkDir/cache.
	CacheDir string
	// GoCacheSeed is the Go build cache that seeds each app's own at its
	// first Go build (gocache.go); empty means CacheDir/seed/go-build.
	// Only the server writes it.
	GoCacheSeed string
	// BuildEnv adds to (or overrides) the clean environment of builds.
	BuildEnv map[string]string
	// BuildTimeout is a build's default time limit; 0 means 15 minutes.
	BuildTimeout time.Duration
	// Isolation is the least isolation of every workload, build and exec
	// session: "sandbox" (the default when empty: namespaces, an
	// unprivileged user, a network of its own; see sandbox.go), or "none"
	// (processes of the server's user on the host's network), which an
	// operator must choose explicitly. A task or build asking for more
	// gets more. With "sandbox" on a host that cannot run one, nothing
	// runs (PLAN_CAPABILITY_UNSUPPORTED, saying why).
	Isolation string
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL; 0
	// means 10 seconds.
	StopGrace time.Duration
	// StartTimeout bounds how long Run (and Restart) waits for a workload
	// to be ready when the context carries no start timeout
	// (scheduler.WithStartTimeout); 0 means 60 seconds.
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
	// RestartAttempts and RestartInterval are the restart policy (Nomad's,
	// in mode "fail"): a workload that has been restarted RestartAttempts
	// times within RestartInterval and exits again is dead: not restarted,
	// reported with Dead. 0 means 3 attempts and 2 minutes; a negative
	// RestartAttempts means no limit.
	RestartAttempts int
	RestartInterval time.Duration
	// LogCapBytes caps each workload's kept log (the current file and the
	// rotated one together) when its task sets no cap; 0 means 1 MiB.
	LogCapBytes int64
	// AdvertiseHost is the IP address workloads are reached and
	// health-checked at (WorkloadStatus.Address); empty means 127.0.0.1.
	// When it is not a loopback address, a workload that listens only on
	// loopback fails its run with BUILD_LISTENS_ON_LOOPBACK.
	AdvertiseHost string
	// Bwrap and Pasta are the bubblewrap and pasta binaries of the
	// sandbox; empty means "bwrap" and "pasta" on PATH.
	Bwrap string
	Pasta string
	// HostPorts are TCP ports on the host's loopback that sandboxes reach
	// at the same port on their own loopback (a database on the host for
	// slots, say); no other port of the host's loopback is reachable.
	HostPorts []int
	// PortStart..PortEnd are the host ports given to workloads that do
	// not ask for one; zero is DefaultPortStart..DefaultPortEnd. Reserved
	// ports in it (the server's own, the edge's) and HostPorts are never
	// given out: a sandbox must not reach another app's workload.
	PortStart, PortEnd int
	Reserved           []int
	// UIDBase is the first host user given to apps when the server runs
	// as root (0 means DefaultUIDBase); each app has its own from there.
	UIDBase uint32
	// TraverseFrom, when set, is a directory above WorkDir (the server's
	// work directory) that the runtime makes passable (0711) down to
	// WorkDir for the apps' users when the server runs as root; it takes
	// every permission for other users off the rest of what it holds.
	TraverseFrom string
	// SandboxHide are host paths a sandbox must not see, beside WorkDir
	// and CacheDir (which it never sees): the server's data directory and
	// key files, say.
	SandboxHide []string
	// UsageWindow is how long Usage measures CPU use over; 0 means 200
	// milliseconds.
	UsageWindow time.Duration
}

// Runtime is the process runtime: it builds and runs on this machine.
type Runtime struct {
	cfg      Config
	bootID   string
	loopback bool // AdvertiseHost is a loopback address
	orphans  map[string][]int

	sandboxOnce sync.Once
	sandboxErr  error
	view        hostView // what the sandbox sees of the host, once probed

	uidMu sync.Mutex
	uids  map[string]uint32 // apps' users (owner.go), loaded on first use

	seedMu sync.Mutex // one warming of the Go build cache seed at a time

	usedMu sync.Mutex
	used   map[string]usedReading // volumes' measured use, by volume ID (UsedBytes)

	ports *portPool // workloads' host ports

	mu     sync.Mutex
	jobs   map[string]*job
	seq    int
	closed bool
}

var (
	_ scheduler.Runtime      = (*Runtime)(nil)
	_ scheduler.Builder      = (*Runtime)(nil)
	_ scheduler.Runner       = (*Runtime)(nil)
	_ scheduler.LogReader    = (*Runtime)(nil)
	_ scheduler.LogFollower  = (*Runtime)(nil)
	_ scheduler.UsageReader  = (*Runtime)(nil)
	_ scheduler.HostReader   = (*Runtime)(nil)
	_ scheduler.Execer       = (*Runtime)(nil)
	_ scheduler.Discarder    = (*Runtime)(nil)
	_ scheduler.Pruner       = (*Runtime)(nil)
	_ scheduler.DiskReader   = (*Runtime)(nil)
	_ scheduler.WriteDropper = (*Runtime)(nil)
)

// New returns a process runtime after checking its configuration. Before
// it returns, it kills the workloads a previous runtime on the same work
// directory left running when it died (see Orphans).
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
	for _, d := range []string{"builds", "logs", "jobs", "volumes", "work", "pods"} {
		if err := os.MkdirAll(filepath.Join(cfg.WorkDir, d), 0o700); err != nil {
			return nil, fmt.Errorf("process runtime: %w", err)
		}
	}
	if err := os.MkdirAll(cfg.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("process runtime: %w", err)
	}
	switch cfg.Isolation {
	case "":
		cfg.Isolation = policy.IsolationSandbox
	case policy.IsolationNone, policy.IsolationSandbox:
	default:
		return nil, fmt.Errorf("process runtime: isolation %q is sandbox or none", cfg.Isolation)
	}
	if cfg.UIDBase == 0 {
		cfg.UIDBase = DefaultUIDBase
	}
	for _, p := range cfg.HostPorts {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("process runtime: host port %d is not a TCP port", p)
		}
	}
	if cfg.TraverseFrom != "" {
		if cfg.TraverseFrom, err = filepath.Abs(cfg.TraverseFrom); err != nil {
			return nil, fmt.Errorf("process runtime: %w", err)
		}
		if !within(cfg.WorkDir, cfg.TraverseFrom) {
			return nil, fmt.Errorf("process runtime: the work directory %s is not under %s", cfg.WorkDir, cfg.TraverseFrom)
		}
	}
	if cfg.AdvertiseHost == "" {
		cfg.AdvertiseHost = "127.0.0.1"
	}
	if cfg.PortStart == 0 && cfg.PortEnd == 0 {
		cfg.PortStart, cfg.PortEnd = DefaultPortStart, DefaultPortEnd
	}
	if cfg.PortStart < 1 || cfg.PortEnd > 65535 || cfg.PortStart > cfg.PortEnd {
		return nil, fmt.Errorf("process runtime: the workload port range %d-%d is not a range of TCP ports", cfg.PortStart, cfg.PortEnd)
	}
	ip := net.ParseIP(cfg.AdvertiseHost)
	if ip == nil {
		return nil, fmt.Errorf("process runtime: the advertise host %q is not an IP address", cfg.AdvertiseHost)
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
	def(&cfg.RestartInterval, 2*time.Minute)
	def(&cfg.UsageWindow, 200*time.Millisecond)
	if cfg.RestartAttempts == 0 {
		cfg.RestartAttempts = 3
	}
	if cfg.LogCapBytes <= 0 {
		cfg.LogCapBytes = 1 << 20
	}
	r := &Runtime{cfg: cfg, bootID: bootID(), loopback: ip.IsLoopback(), jobs: map[string]*job{},
		ports: newPortPool(cfg.PortStart, cfg.PortEnd, append(slices.Clone(cfg.Reserved), cfg.HostPorts...), time.Now)}
	if r.orphans, err = r.reapOrphans(); err != nil {
		return nil, fmt.Errorf("process runtime: reap orphaned workloads: %w", err)
	}
	// What a dead server's pods left: their files (their processes were
	// in the records reaped above).
	if ents, err := os.ReadDir(filepath.Join(cfg.WorkDir, "pods")); err == nil {
		for _, e := range ents {
			_ = os.RemoveAll(filepath.Join(cfg.WorkDir, "pods", e.Name()))
		}
	}
	if cfg.Isolation == policy.IsolationSandbox {
		_ = r.sandboxUsable() // probed now, so that a server says so at start
	}
	return r, nil
}

// Orphans returns the process groups New killed, by job ID: workloads a
// previous runtime on the same work directory left running when it died.
// Their jobs are not running on this runtime.
func (r *Runtime) Orphans() map[string][]int {
	out := make(map[string][]int, len(r.orphans))
	for id, pids := range r.orphans {
		out[id] = append([]int(nil), pids...)
	}
	return out
}

// Close stops every running job (as Stop does, all at once) and refuses
// new runs: for a server shutting down. Logs and volumes stay.
func (r *Runtime) Close() error {
	r.mu.Lock()
	r.closed = true
	jobs := r.jobs
	r.jobs = map[string]*job{}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j.stop(context.Background())
		}()
	}
	wg.Wait()
	return nil
}

func notFound(jobID string) error {
	return errcode.New(errcode.NotFound, "no job %q on this runtime", jobID)
}

func workloadNotFound(jobID, workload string) error {
	return errcode.New(errcode.NotFound, "no workload %q in job %q", workload, jobID)
}

func (r *Runtime) job(jobID string) *job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobs[jobID]
}

// Status reports the job's state.
func (r *Runtime) Status(ctx context.Context, jobID string) (scheduler.JobStatus, error) {
	j := r.job(jobID)
	if j == nil {
		return scheduler.JobStatus{}, notFound(jobID)
	}
	return j.status(), nil
}

// Stop stops every workload of the job and forgets it. Its logs stay on
// disk (RemoveLogs removes them); its volumes stay.
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

// Restart restarts the job's workloads in place, in its start order, each
// once those before it are ready again (or the start timeout passed):
// same artifact, environment and address. A dead workload is started
// again with its restart policy's count cleared. Static workloads have
// nothing to restart. Restarts count in WorkloadStatus.Restarts.
// STATE_INVALID while the job's Run has not returned yet.
func (r *Runtime) Restart(ctx context.Context, jobID string) error {
	j := r.job(jobID)
	if j == nil {
		return notFound(jobID)
	}
	return j.restart(ctx)
}

func (r *Runtime) logPath(jobID, workload string) string {
	return filepath.Join(r.cfg.WorkDir, "logs", jobID, workload+".log")
}

// Logs returns a workload's kept output lines, oldest first: from the
// running job, or from the files a stopped job (or an earlier runtime on
// this work directory) left.
func (r *Runtime) Logs(ctx context.Context, jobID, workload string) ([]string, error) {
	if j := r.job(jobID); j != nil {
		w := j.get(workload)
		if w == nil {
			return nil, workloadNotFound(jobID, workload)
		}
		return w.log.Lines(), nil
	}
	if !scheduler.PlainName(jobID) || !scheduler.PlainName(workload) {
		return nil, notFound(jobID)
	}
	lines, err := readLogLines(r.logPath(jobID, workload))
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(filepath.Dir(r.logPath(jobID, workload))); err == nil {
			return nil, workloadNotFound(jobID, workload)
		}
		return nil, notFound(jobID)
	}
	if err != nil {
		return nil, fmt.Errorf("read logs of %s/%s: %w", jobID, workload, err)
	}
	return lines, nil
}

// FollowLogs calls emit with a workload's kept lines and then with the
// lines it writes, as they are written (scheduler.LogFollower): until its
// job stops (scheduler.LogsStopped), the reader falls followBuffer lines
// behind (scheduler.LogsLagged), ctx ends or emit fails. A stopped job
// gives its kept lines and LogsStopped.
func (r *Runtime) FollowLogs(ctx context.Context, jobID, workload string, emit func([]string) error) (string, error) {
	j := r.job(jobID)
	if j == nil {
		lines, err := r.Logs(ctx, jobID, workload)
		if err != nil && !errcode.Has(err, errcode.NotFound) {
			return "", err
		}
		return scheduler.LogsStopped, emit(lines)
	}
	w := j.get(workload)
	if w == nil {
		return "", workloadNotFound(jobID, workload)
	}
	lines, fl := w.log.Follow()
	defer w.log.Unfollow(fl)
	if err := emit(lines); err != nil {
		return "", err
	}
	for {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case line, ok := <-fl.lines:
			if !ok {
				if fl.lagged {
					return scheduler.LogsLagged, nil
				}
				return scheduler.LogsStopped, nil
			}
			if err := emit(drain(line, fl.lines)); err != nil {
				return "", err
			}
		}
	}
}

// drain is first and the lines waiting behind it (at most 256), a batch
// to send at once.
func drain(first string, lines <-chan string) []string {
	batch := []string{first}
	for len(batch) < 256 {
		select {
		case l, ok := <-lines:
			if !ok {
				return batch
			}
			batch = append(batch, l)
		default:
			return batch
		}
	}
	return batch
}

// workPath is where a job's workload works: WorkDir/work/<job>/<workload>.
func (r *Runtime) workPath(jobID, workload string) string {
	return filepath.Join(r.cfg.WorkDir, "work", jobID, workload)
}

// workingCopy returns the workload's working directory for the job,
// copying the artifact there the first time: the artifact itself is never
// written, so a later job may run it afresh (a redeploy, a rollback). The
// copy is the owner's (its sandbox's user).
func (r *Runtime) workingCopy(jobID, workload, artifact string, own owner) (string, error) {
	dir := r.workPath(jobID, workload)
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o711); err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+workload+".*")
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := copyTree(artifact, filepath.Join(tmp, "copy")); err != nil {
		return "", fmt.Errorf("working directory: copy the artifact: %w", err)
	}
	if err := own.give(filepath.Join(tmp, "copy")); err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	if err := os.Rename(filepath.Join(tmp, "copy"), dir); err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	return dir, nil
}

// Discard removes what a stopped job's workloads wrote in their working
// directories; its logs stay. STATE_INVALID while the job runs. It is
// DropWrites: a job of the process runtime keeps nothing else.
func (r *Runtime) Discard(ctx context.Context, jobID string) error {
	return r.DropWrites(ctx, jobID)
}

// DropWrites removes the stopped job's working directories (what its
// workloads wrote outside their volumes); a later run of the job copies
// its artifacts afresh. Its logs stay. STATE_INVALID while the job runs.
func (r *Runtime) DropWrites(ctx context.Context, jobID string) error {
	if !scheduler.PlainName(jobID) {
		return errcode.Invalid("job_id", "the job ID %q is not a plain name", jobID)
	}
	if r.job(jobID) != nil {
		return errcode.New(errcode.StateInvalid, "job %q is running: stop it before discarding it", jobID)
	}
	if err := os.RemoveAll(filepath.Join(r.cfg.WorkDir, "work", jobID)); err != nil {
		return fmt.Errorf("discard %s: %w", jobID, err)
	}
	return nil
}

// RemoveArtifact removes a build's work area (builds/<artifact ID>). The
// artifact must be one of this runtime's; removing one that is gone is no
// error. A job running it keeps its own working copy.
func (r *Runtime) RemoveArtifact(ctx context.Context, art scheduler.Artifact) error {
	if !scheduler.PlainName(art.ID) {
		return errcode.Invalid("artifact", "the artifact ID %q is not a plain name", art.ID)
	}
	area := filepath.Join(r.cfg.WorkDir, "builds", art.ID)
	if art.Dir != "" && !within(art.Dir, area) {
		return errcode.Invalid("artifact", "artifact %s is not in this runtime's build area", art.ID)
	}
	if err := os.RemoveAll(area); err != nil {
		return fmt.Errorf("remove artifact %s: %w", art.ID, err)
	}
	return nil
}

// RemoveJobLogs removes a stopped job's log files (RemoveLogs).
func (r *Runtime) RemoveJobLogs(ctx context.Context, jobID string) error { return r.RemoveLogs(jobID) }

// RemoveLogs removes a stopped job's log files. STATE_INVALID while the
// job runs; removing logs that are not there is no error.
func (r *Runtime) RemoveLogs(jobID string) error {
	if !scheduler.PlainName(jobID) {
		return errcode.Invalid("job_id", "the job ID %q is not a plain name", jobID)
	}
	if r.job(jobID) != nil {
		return errcode.New(errcode.StateInvalid, "job %q is running: stop it before removing its logs", jobID)
	}
	if err := os.RemoveAll(filepath.Dir(r.logPath(jobID, "x"))); err != nil {
		return fmt.Errorf("remove logs of %s: %w", jobID, err)
	}
	return nil
}
