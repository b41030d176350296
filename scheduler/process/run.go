package process

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/svchost/svc/internal/egress"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
)

// job is a running job: its workloads by name, in start order.
type job struct {
	rt    *Runtime
	id    string
	appID string
	order []string
	// pod is the network the job's sandboxed workloads share (nil when
	// none is sandboxed).
	pod *pod

	mu        sync.Mutex
	workloads map[string]*workload
	started   bool // every workload was started and Run returned

	restartMu sync.Mutex // one Restart at a time

	recMu      sync.Mutex // the job's record file
	unrecorded bool

	stopOnce sync.Once
	stopped  chan struct{} // closed when the job is being stopped
}

// workload is one supervised workload: a process under a supervisor, or,
// for a static artifact, a file server inside this process.
type workload struct {
	name   string
	task   scheduler.Task
	addr   string // "" for no port
	port   int    // the host port (the edge's and health checks' way in)
	inPort int    // the port it listens on: its PORT (in a pod, inside it)
	log    *logFile
	sup    *supervisor
	static *http.Server
	ln     net.Listener // the static server's, until it serves
	grace  time.Duration
	// dir is the workload's working directory: a copy of its artifact
	// made for the job, kept across restarts and runs of the same job and
	// discarded with it (Discard), so that what a workload writes outside
	// its volumes does not reach the next deploy.
	dir string
	// env is the workload's environment; sandbox, if not nil, its
	// sandbox (exec uses both).
	env     []string
	sandbox *sandboxSpec

	mu      sync.Mutex
	health  string
	cancel  context.CancelFunc // ends the health loop
	stopped bool

	// The current run's output writers: the supervising goroutine's only.
	out, errw *lineWriter
}

// Run starts the job's workloads in its start order, each once those
// before it are ready, and returns when the last is ready. It checks the
// whole job first: names (plain names: they name files), the order,
// mounts, every task's isolation (static ones too) and egress list,
// failing with VALID_INVALID or PLAN_CAPABILITY_UNSUPPORTED before
// anything starts. Sandboxed workloads share one pod (pod.go), made first
// with every workload's port.
func (r *Runtime) Run(ctx context.Context, jb scheduler.Job) (scheduler.JobStatus, error) {
	jp, err := r.checkJob(jb)
	if err != nil {
		return scheduler.JobStatus{}, err
	}
	order := jp.order
	j := &job{rt: r, id: jb.ID, appID: jb.AppID, order: order, workloads: map[string]*workload{}, stopped: make(chan struct{})}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return scheduler.JobStatus{}, errcode.New(errcode.StateInvalid, "the process runtime is closed")
	}
	if r.jobs[jb.ID] != nil {
		r.mu.Unlock()
		return scheduler.JobStatus{}, errcode.New(errcode.StateInvalid, "job %q is already running", jb.ID)
	}
	r.jobs[jb.ID] = j
	r.mu.Unlock()
	fail := func(err error) (scheduler.JobStatus, error) {
		r.mu.Lock()
		delete(r.jobs, jb.ID)
		r.mu.Unlock()
		j.stop(context.WithoutCancel(ctx))
		return scheduler.JobStatus{}, err
	}
	ports, err := r.jobPorts(jb, jp)
	if err != nil {
		return fail(fmt.Errorf("run job %s: %w", jb.ID, err))
	}
	if err := r.startJobPod(ctx, j, jb, jp, ports); err != nil {
		return fail(fmt.Errorf("run job %s: %w", jb.ID, err))
	}
	for _, name := range order {
		w, err := r.newWorkload(j, name, jb.Workloads[name], ports[name], jp.sandboxed[name])
		if err != nil {
			return fail(fmt.Errorf("run job %s: workload %s: %w", jb.ID, name, err))
		}
		j.mu.Lock()
		j.workloads[name] = w
		j.mu.Unlock()
		w.begin()
		if err := r.awaitReady(ctx, j, w); err != nil {
			return fail(err)
		}
	}
	j.mu.Lock()
	j.started = true
	j.mu.Unlock()
	return j.status(), nil
}

// jobPlan is what checkJob decided of a job: its start order (Order, then
// the workloads it leaves out, by name), which workloads run in the
// sandbox (those with a command at a sandbox isolation level), and its
// egress list (nil: open).
type jobPlan struct {
	order     []string
	sandboxed map[string]bool
	allow     *egress.Allowlist
}

// checkJob validates a job before anything starts and decides how it runs.
func (r *Runtime) checkJob(jb scheduler.Job) (jobPlan, error) {
	jp := jobPlan{sandboxed: map[string]bool{}}
	if err := jb.Check(); err != nil {
		return jp, err
	}
	for name, t := range jb.Workloads {
		if err := checkMounts(jb.AppID, name, t.Mounts); err != nil {
			return jp, err
		}
		sandboxed, err := r.sandboxFor(t.Isolation)
		if err != nil {
			e, _ := errcode.As(err)
			return jp, e.WithDetail("workload", name)
		}
		jp.sandboxed[name] = sandboxed && len(t.Command) > 0
		if len(t.Egress) > 0 && !jp.sandboxed[name] && len(t.Command) > 0 {
			return jp, errcode.New(errcode.PlanCapabilityUnsupp, "host policy restricts egress (egress_allowlist), which the process runtime enforces only in a sandbox; workload %s runs without one", name).
				WithDetail("workload", name).WithDetail("capability", "egress_allowlist").
				WithRemedy("run workloads in the sandbox (runtime.isolation: sandbox, or policy min_runtime_isolation: sandbox), or empty egress_allowlist")
		}
		allow, err := egress.Parse(t.Egress)
		if err != nil {
			return jp, errcode.Wrap(err, errcode.ValidInvalid, "workload %s: %v", name, err).WithDetail("field", "egress")
		}
		if allow != nil {
			jp.allow = allow // every task of a job has the same list
		}
	}
	var err error
	jp.order, err = jb.StartOrder()
	return jp, err
}

// ports are a workload's ports: on the host, and the one it listens on.
type ports struct{ host, inside int }

// jobPorts gives each workload that serves its ports, before anything
// starts (a pod forwards them from its start). A sandboxed workload
// listens on its spec's port (AppPort) inside the pod, unless another
// workload of the job claims the same one, and on its host port's number
// otherwise; elsewhere it listens on the host port itself.
func (r *Runtime) jobPorts(jb scheduler.Job, jp jobPlan) (map[string]ports, error) {
	out := map[string]ports{}
	claims := map[int]int{}
	for _, t := range jb.Workloads {
		if t.AppPort > 0 {
			claims[t.AppPort]++
		}
	}
	for _, name := range jp.order {
		t := jb.Workloads[name]
		if t.NoPort || len(t.Command) == 0 {
			continue // static workloads are served by the runtime itself
		}
		p := ports{host: t.Port}
		if p.host == 0 {
			var err error
			if p.host, err = r.ports.take(r.cfg.AdvertiseHost); err != nil {
				return nil, err
			}
		}
		p.inside = p.host
		if jp.sandboxed[name] && t.AppPort > 0 && claims[t.AppPort] == 1 {
			p.inside = t.AppPort
		}
		out[name] = p
	}
	return out, nil
}

// startJobPod makes the job's pod when any of its workloads is sandboxed:
// their ports forwarded, the job's egress list, their names on 127.0.0.1.
func (r *Runtime) startJobPod(ctx context.Context, j *job, jb scheduler.Job, jp jobPlan, ps map[string]ports) error {
	spec := podSpec{names: jp.order, allow: jp.allow}
	need := false
	for _, name := range jp.order {
		if !jp.sandboxed[name] {
			continue
		}
		need = true
		if p, ok := ps[name]; ok {
			spec.forwards = append(spec.forwards, forward{host: p.host, inside: p.inside})
		}
	}
	if !need {
		return nil
	}
	var err error
	if spec.owner, err = r.ownerFor(jb.AppID); err != nil {
		return err
	}
	spec.refused = func(dest string, err error) {
		for _, w := range j.snapshot() {
			w.log.Add("[svc] " + err.Error())
		}
	}
	if j.pod, err = r.startPod(ctx, jb.ID, spec); err != nil {
		return err
	}
	j.record()
	return nil
}

// newWorkload prepares a workload (port, environment, volumes, log,
// sandbox) without starting it.
func (r *Runtime) newWorkload(j *job, name string, t scheduler.Task, p ports, sandboxed bool) (*workload, error) {
	w := &workload{name: name, task: t, grace: r.cfg.StopGrace, health: scheduler.HealthUnknown}
	if t.Artifact.Dir == "" {
		return nil, errors.New("the task has no artifact")
	}
	logCap := t.LogCapBytes
	if logCap <= 0 {
		logCap = r.cfg.LogCapBytes
	}
	var err error
	if w.log, err = openLogFile(r.logPath(j.id, name), logCap); err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			w.log.Close()
		}
	}()
	if len(t.Command) == 0 {
		if t.Artifact.Kind != spec.BuildStatic {
			return nil, errors.New("only a static artifact runs without a command")
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(r.cfg.AdvertiseHost, strconv.Itoa(t.Port)))
		if err != nil {
			return nil, errcode.Wrap(err, errcode.CapacityNoFreePort, "listen for the static workload: %v", err)
		}
		root, err := os.OpenRoot(t.Artifact.Dir)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("open the static site: %w", err)
		}
		w.ln = ln
		w.addr = ln.Addr().String()
		w.port = ln.Addr().(*net.TCPAddr).Port
		// Served through os.Root: a symbolic link in the site (a build
		// made it) never leads the server out of the artifact.
		w.static = &http.Server{Handler: http.FileServerFS(root.FS()), ReadHeaderTimeout: 10 * time.Second}
		ok = true
		return w, nil
	}
	own := owner{}
	if sandboxed {
		if own, err = r.ownerFor(j.appID); err != nil {
			return nil, err
		}
	}
	if w.dir, err = r.workingCopy(j.id, name, t.Artifact.Dir, own); err != nil {
		return nil, err
	}
	if !t.NoPort {
		w.port, w.inPort = p.host, p.inside
		w.addr = net.JoinHostPort(r.cfg.AdvertiseHost, strconv.Itoa(w.port))
	}
	env := map[string]string{}
	for k, v := range t.Env {
		env[k] = v
	}
	if sandboxed {
		r.sandboxEnv(env, j.pod)
	} else if _, ok := env["PATH"]; !ok {
		env["PATH"] = os.Getenv("PATH")
	}
	if venv := filepath.Join(w.dir, venvDir); t.Artifact.Kind == spec.BuildPython && isDir(venv) {
		env["VIRTUAL_ENV"] = venv
		env["PATH"] = filepath.Join(venv, "bin") + string(os.PathListSeparator) + env["PATH"]
	}
	volEnv, binds, err := r.prepareMounts(j.appID, w.dir, t, sandboxed, own)
	if err != nil {
		return nil, err
	}
	for k, v := range volEnv {
		env[k] = v
	}
	if !t.NoPort {
		env["PORT"] = strconv.Itoa(w.inPort)
	}
	w.env = envList(env)
	var line []string
	if sandboxed {
		w.sandbox = &sandboxSpec{owner: own, pod: j.pod, writable: []string{w.dir}, binds: binds, chdir: w.dir}
		cmd, err := r.sandboxCommand(context.Background(), *w.sandbox, t.Command)
		if err != nil {
			return nil, err
		}
		line = cmd.Args
	}
	w.sup = newSupervisor(func() *exec.Cmd {
		var cmd *exec.Cmd
		if sandboxed {
			cmd = exec.Command(line[0], line[1:]...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: own.credential()}
		} else {
			cmd = exec.Command(t.Command[0], t.Command[1:]...)
		}
		cmd.Dir = w.dir
		cmd.Env = w.env
		w.out, w.errw = &lineWriter{emit: w.log.Add}, &lineWriter{emit: w.log.Add}
		cmd.Stdout, cmd.Stderr = w.out, w.errw
		return cmd
	}, backoffPolicy(r.cfg.RestartBackoff, r.cfg.MaxRestartBackoff), 10*r.cfg.MaxRestartBackoff)
	w.sup.policy = restartPolicy{attempts: r.cfg.RestartAttempts, interval: r.cfg.RestartInterval}
	w.sup.onStart = func(int, uint64) { j.record() }
	w.sup.onExit = func(code int, err error, dead bool) {
		w.out.Flush()
		w.errw.Flush()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			w.log.Add(fmt.Sprintf("[svc] workload %s: %v", name, err))
		}
		w.log.Add(fmt.Sprintf("[svc] workload %s exited with code %d", name, code))
		if dead {
			w.log.Add(fmt.Sprintf("[svc] workload %s was restarted %d times within %s and exited again: not restarting it",
				name, r.cfg.RestartAttempts, r.cfg.RestartInterval))
		}
	}
	ok = true
	return w, nil
}

// begin starts the workload: its supervisor, or its file server.
func (w *workload) begin() {
	if w.static != nil {
		go func() { _ = w.static.Serve(w.ln) }()
		return
	}
	w.sup.start()
}

// loopbackCheckEvery spaces out the look at /proc for a workload that
// listens only on loopback.
const loopbackCheckEvery = 200 * time.Millisecond

// awaitReady waits until the workload's check passes (or, without a port,
// it stayed up for the settle time) or the start timeout (the context's,
// else the runtime's) passes, then arms its restarts and starts its
// health loop. A workload that listens only on loopback while the runtime
// reaches workloads elsewhere fails at once; so does the job being
// stopped meanwhile (NOT_FOUND: it is forgotten).
func (r *Runtime) awaitReady(ctx context.Context, j *job, w *workload) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, scheduler.StartTimeout(ctx, r.cfg.StartTimeout))
	defer cancel()
	var early <-chan int
	if w.sup != nil {
		early = w.sup.earlyExit
	}
	exited := func(code int) error {
		return errcode.New(errcode.StateAppExited, "workload %s exited with code %d before it was ready", w.name, code).
			WithDetail("workload", w.name).WithDetail("exit_code", code).WithDetail("log_tail", w.log.Tail(40))
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	settled := time.After(r.cfg.SettleTime)
	var lastLoopbackCheck time.Time
	ready := false
	if w.static != nil && w.check(ctx) { // the runtime's own server: ready at once
		w.setHealth(scheduler.HealthPassing)
		ready = true
	}
	for !ready {
		select {
		case code := <-early:
			return exited(code)
		case <-j.stopped:
			return errcode.New(errcode.NotFound, "job %q was stopped while workload %s was starting", j.id, w.name).WithDetail("workload", w.name)
		case <-ctx.Done():
			if err := parent.Err(); err != nil {
				return fmt.Errorf("run workload %s: %w", w.name, err)
			}
			// Not ready within the start timeout: it keeps running and
			// its health loop reports on it.
			ready = true
		case <-settled:
			if w.addr == "" {
				ready = true
			}
		case <-tick.C:
			if w.addr == "" {
				continue
			}
			if w.check(ctx) {
				w.setHealth(scheduler.HealthPassing)
				ready = true
				continue
			}
			if r.loopback || w.sup == nil || time.Since(lastLoopbackCheck) < loopbackCheckEvery {
				continue
			}
			lastLoopbackCheck = time.Now()
			if pid := w.sup.read().pid; pid > 0 {
				if at, only := loopbackOnly(pid, w.inPort); only {
					return errcode.New(errcode.BuildListensLoopback,
						"workload %s listens only on %s, while the runtime reaches workloads at %s", w.name, at, w.addr).
						WithDetail("workload", w.name).WithDetail("address", at).
						WithRemedy("listen on all addresses (0.0.0.0 or [::]) at the port in $PORT")
				}
			}
		}
	}
	if w.sup != nil && !w.sup.arm() {
		return exited(<-early)
	}
	if w.addr != "" {
		hctx, hcancel := context.WithCancel(context.Background())
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.stopped {
			hcancel()
			return nil
		}
		w.cancel = hcancel
		go w.healthLoop(hctx, r.cfg.HealthInterval)
	}
	return nil
}

// awaitRestarted waits until a restarted workload's check passes again,
// or the start timeout (the context's, else the runtime's) passes;
// without a port, until its process runs.
func (r *Runtime) awaitRestarted(ctx context.Context, w *workload) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, scheduler.StartTimeout(ctx, r.cfg.StartTimeout))
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if w.addr != "" && w.check(ctx) {
			w.setHealth(scheduler.HealthPassing)
			return nil
		}
		if st := w.sup.read(); w.addr == "" && (st.running || st.dead) {
			return nil
		}
		select {
		case <-ctx.Done():
			if err := parent.Err(); err != nil {
				return fmt.Errorf("restart workload %s: %w", w.name, err)
			}
			return nil
		case <-tick.C:
		}
	}
}

func (w *workload) setHealth(h string) {
	w.mu.Lock()
	w.health = h
	w.mu.Unlock()
}

func (w *workload) healthLoop(ctx context.Context, def time.Duration) {
	interval := def
	if h := w.task.Health; h != nil && h.Interval > 0 {
		interval = time.Duration(h.Interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.check(ctx) {
			w.setHealth(scheduler.HealthPassing)
		} else if ctx.Err() == nil {
			w.setHealth(scheduler.HealthFailing)
		}
	}
}

// check runs the workload's health check once: an HTTP GET of its path
// answering below 400, or without one, a TCP connection accepted; in a
// pod, where pasta accepts every connection to the host port whether or
// not the workload listens, a socket listening at its port inside.
func (w *workload) check(ctx context.Context) bool {
	timeout := 2 * time.Second
	h := w.task.Health
	if h != nil && h.Timeout > 0 {
		timeout = time.Duration(h.Timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if h == nil && w.sandbox != nil && w.sandbox.pod != nil {
		// Inside, and pasta's end of the forward outside (it may have
		// died: then the edge cannot reach the workload either).
		return listening(w.sandbox.pod.netDir(), "", w.inPort) && listening("/proc/net", w.host(), w.port)
	}
	if h == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", w.addr)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	return httpCheck(ctx, w.addr, h)
}

// host is the address part of the workload's address.
func (w *workload) host() string {
	h, _, _ := net.SplitHostPort(w.addr)
	return h
}

func httpCheck(ctx context.Context, addr string, h *spec.Health) bool {
	path := h.Path
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return false
	}
	resp, err := healthClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode < 400
}

var healthClient = &http.Client{
	Transport:     &http.Transport{DisableKeepAlives: true, Proxy: nil},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// get returns a workload by name, or nil.
func (j *job) get(name string) *workload {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.workloads[name]
}

// snapshot returns the workloads started so far.
func (j *job) snapshot() map[string]*workload {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make(map[string]*workload, len(j.workloads))
	for k, v := range j.workloads {
		out[k] = v
	}
	return out
}

func (j *job) status() scheduler.JobStatus {
	st := scheduler.JobStatus{ID: j.id, Workloads: map[string]scheduler.WorkloadStatus{}}
	for name, w := range j.snapshot() {
		w.mu.Lock()
		ws := scheduler.WorkloadStatus{Health: w.health, Address: w.addr}
		w.mu.Unlock()
		if w.sup != nil {
			s := w.sup.read()
			ws.Running, ws.Restarts, ws.ExitCode, ws.Dead = s.running, s.restarts, s.exitCode, s.dead
		} else {
			ws.Running = true
		}
		st.Workloads[name] = ws
	}
	return st
}

// restart restarts the job's supervised workloads in start order.
func (j *job) restart(ctx context.Context) error {
	j.mu.Lock()
	started := j.started
	j.mu.Unlock()
	if !started {
		return errcode.New(errcode.StateInvalid, "job %q is still starting", j.id)
	}
	j.restartMu.Lock()
	defer j.restartMu.Unlock()
	for _, name := range j.order {
		w := j.get(name)
		if w == nil || w.sup == nil {
			continue // static: the runtime's own file server
		}
		if !w.sup.restart(w.grace) {
			return notFound(j.id) // stopped meanwhile
		}
		if err := j.rt.awaitRestarted(ctx, w); err != nil {
			return err
		}
	}
	return nil
}

// stop stops every workload at once, waits for them, closes their logs
// and removes the job's record.
func (j *job) stop(ctx context.Context) {
	j.stopOnce.Do(func() { close(j.stopped) })
	var wg sync.WaitGroup
	for _, w := range j.snapshot() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.stop(ctx)
		}()
	}
	wg.Wait()
	if j.pod != nil {
		j.pod.stop()
	}
	j.unrecord()
}

func (w *workload) stop(ctx context.Context) {
	w.mu.Lock()
	w.stopped = true
	cancel := w.cancel
	w.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	grace := w.grace
	if d, ok := ctx.Deadline(); ok && time.Until(d) < grace {
		grace = max(time.Until(d), 0)
	}
	if w.static != nil {
		sctx, scancel := context.WithTimeout(ctx, grace)
		_ = w.static.Shutdown(sctx)
		scancel()
		_ = w.static.Close()
		_ = w.ln.Close()
	}
	if w.sup != nil {
		w.sup.stop(grace)
	}
	w.log.Close()
}

// workingDir is where the workload's files are: its working copy, or for
// a static site the artifact it serves.
func (w *workload) workingDir() string {
	if w.dir != "" {
		return w.dir
	}
	return w.task.Artifact.Dir
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
