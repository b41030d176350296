package process

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
)

// job is a running job: its workloads by name.
type job struct {
	id        string
	workloads map[string]*workload
}

// workload is one supervised workload: a process under a supervisor, or,
// for a static artifact, a file server inside this process.
type workload struct {
	name   string
	task   scheduler.Task
	addr   string // "" for no port
	logs   *logRing
	sup    *supervisor
	static *http.Server
	grace  time.Duration

	mu      sync.Mutex
	health  string
	cancel  context.CancelFunc // ends the health loop
	stopped bool
}

// Run starts the job's workloads and waits for each to be ready.
func (r *Runtime) Run(ctx context.Context, jb scheduler.Job) (scheduler.JobStatus, error) {
	if jb.ID == "" || len(jb.Workloads) == 0 {
		return scheduler.JobStatus{}, errcode.Invalid("job", "a job needs an ID and at least one workload")
	}
	j := &job{id: jb.ID, workloads: map[string]*workload{}}
	r.mu.Lock()
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
	names := make([]string, 0, len(jb.Workloads))
	for name := range jb.Workloads {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		w, err := r.startWorkload(name, jb.Workloads[name])
		if err != nil {
			return fail(fmt.Errorf("run job %s: workload %s: %w", jb.ID, name, err))
		}
		j.workloads[name] = w
	}
	for _, name := range names {
		if err := r.awaitReady(ctx, j.workloads[name]); err != nil {
			return fail(err)
		}
	}
	return j.status(), nil
}

func (r *Runtime) startWorkload(name string, t scheduler.Task) (*workload, error) {
	w := &workload{name: name, task: t, grace: r.cfg.StopGrace, logs: newLogRing(r.cfg.LogCapBytes, nil), health: scheduler.HealthUnknown}
	if t.Artifact.Dir == "" {
		return nil, errors.New("the task has no artifact")
	}
	if len(t.Command) == 0 {
		if t.Artifact.Kind != spec.BuildStatic {
			return nil, errors.New("only a static artifact runs without a command")
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(t.Port)))
		if err != nil {
			return nil, errcode.Wrap(err, errcode.CapacityNoFreePort, "listen for the static workload: %v", err)
		}
		w.addr = ln.Addr().String()
		w.static = &http.Server{Handler: http.FileServer(http.Dir(t.Artifact.Dir)), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = w.static.Serve(ln) }()
		return w, nil
	}
	port := t.Port
	if !t.NoPort && port == 0 {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		port = p
	}
	env := map[string]string{}
	for k, v := range t.Env {
		env[k] = v
	}
	if _, ok := env["PATH"]; !ok {
		env["PATH"] = os.Getenv("PATH")
	}
	if !t.NoPort {
		env["PORT"] = strconv.Itoa(port)
		w.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	envv := envList(env)
	w.sup = newSupervisor(func() *exec.Cmd {
		cmd := exec.Command(t.Command[0], t.Command[1:]...)
		cmd.Dir = t.Artifact.Dir
		cmd.Env = envv
		out := &lineWriter{emit: w.logs.Add}
		errw := &lineWriter{emit: w.logs.Add}
		cmd.Stdout, cmd.Stderr = out, errw
		return cmd
	}, backoffPolicy(r.cfg.RestartBackoff, r.cfg.MaxRestartBackoff), 10*r.cfg.MaxRestartBackoff)
	w.sup.onExit = func(code int, err error) {
		w.logs.Add(fmt.Sprintf("[svc] workload %s exited with code %d", name, code))
	}
	w.sup.start()
	return w, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, errcode.Wrap(err, errcode.CapacityNoFreePort, "no free port on 127.0.0.1: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// awaitReady waits until the workload's check passes (or, without a port,
// it stayed up for the settle time), then arms its restarts and starts its
// health loop.
func (r *Runtime) awaitReady(ctx context.Context, w *workload) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StartTimeout)
	defer cancel()
	var early <-chan int
	if w.sup != nil {
		early = w.sup.earlyExit
	}
	exited := func(code int) error {
		lines := w.logs.Lines()
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		return errcode.New(errcode.StateAppExited, "workload %s exited with code %d before it was ready", w.name, code).
			WithDetail("workload", w.name).WithDetail("exit_code", code).WithDetail("log_tail", lines)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	settled := time.After(r.cfg.SettleTime)
	for ready := false; !ready; {
		select {
		case code := <-early:
			return exited(code)
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
			if w.addr != "" && w.check(ctx) {
				w.setHealth(scheduler.HealthPassing)
				ready = true
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
// answering below 400, or without one, a TCP connection accepted.
func (w *workload) check(ctx context.Context) bool {
	timeout := 2 * time.Second
	h := w.task.Health
	if h != nil && h.Timeout > 0 {
		timeout = time.Duration(h.Timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
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

func (j *job) status() scheduler.JobStatus {
	st := scheduler.JobStatus{ID: j.id, Workloads: map[string]scheduler.WorkloadStatus{}}
	for name, w := range j.workloads {
		w.mu.Lock()
		ws := scheduler.WorkloadStatus{Health: w.health, Address: w.addr}
		w.mu.Unlock()
		if w.sup != nil {
			ws.Running, ws.Restarts, ws.ExitCode = w.sup.state()
		} else {
			ws.Running = true
		}
		st.Workloads[name] = ws
	}
	return st
}

// stop stops every workload at once and waits for them.
func (j *job) stop(ctx context.Context) {
	var wg sync.WaitGroup
	for _, w := range j.workloads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.stop(ctx)
		}()
	}
	wg.Wait()
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
	}
	if w.sup != nil {
		w.sup.stop(grace)
	}
}
