package scheduler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/apps"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
)

// hangingRuntime is a runtime that stops answering for some jobs: a call
// for a job in hang blocks until its context ends (as a runtime whose
// agent hangs would); every other call goes to the runtime it wraps.
type hangingRuntime struct {
	scheduler.Runtime

	mu    sync.Mutex
	hang  map[string]bool
	hung  int     // calls blocked now
	ended []error // why each blocked call ended (its context's error)
}

var _ scheduler.Runtime = (*hangingRuntime)(nil)

func (h *hangingRuntime) setHang(jobID string, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hang == nil {
		h.hang = map[string]bool{}
	}
	h.hang[jobID] = on
}

// block blocks a call for a hung job until ctx ends: whether it did, and
// the context's error.
func (h *hangingRuntime) block(ctx context.Context, jobID string) (bool, error) {
	h.mu.Lock()
	if !h.hang[jobID] {
		h.mu.Unlock()
		return false, nil
	}
	h.hung++
	h.mu.Unlock()
	<-ctx.Done()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hung--
	h.ended = append(h.ended, ctx.Err())
	return true, ctx.Err()
}

func (h *hangingRuntime) state() (hung int, ended []error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hung, append([]error(nil), h.ended...)
}

func (h *hangingRuntime) Status(ctx context.Context, jobID string) (scheduler.JobStatus, error) {
	if ok, err := h.block(ctx, jobID); ok {
		return scheduler.JobStatus{}, err
	}
	return h.Runtime.Status(ctx, jobID)
}

func (h *hangingRuntime) Run(ctx context.Context, job scheduler.Job) (scheduler.JobStatus, error) {
	if ok, err := h.block(ctx, job.ID); ok {
		return scheduler.JobStatus{}, err
	}
	return h.Runtime.Run(ctx, job)
}

func (h *hangingRuntime) Stop(ctx context.Context, jobID string) error {
	if ok, err := h.block(ctx, jobID); ok {
		return err
	}
	return h.Runtime.Stop(ctx, jobID)
}

func (h *hangingRuntime) Restart(ctx context.Context, jobID string) error {
	if ok, err := h.block(ctx, jobID); ok {
		return err
	}
	return h.Runtime.Restart(ctx, jobID)
}

// logLines collects JSON log lines.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) logger() *slog.Logger { return slog.New(slog.NewJSONHandler(l, nil)) }

// find returns the lines whose message starts with msg and whose
// attributes include every one of attrs.
func (l *logLines) find(msg string, attrs map[string]string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if s, _ := m["msg"].(string); !strings.HasPrefix(s, msg) {
			continue
		}
		ok := true
		for k, v := range attrs {
			if got, _ := m[k].(string); got != v {
				ok = false
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// observed counts what the reconciler reports.
type observed struct {
	mu      sync.Mutex
	passes  int
	busy    int
	actions map[string]int // action/outcome
}

var _ scheduler.Observer = (*observed)(nil)

func (o *observed) ObservePass(d time.Duration, apps, busy int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.passes++
	o.busy += busy
}

func (o *observed) ObserveApp(time.Duration) {}

func (o *observed) ObserveAction(action, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.actions == nil {
		o.actions = map[string]int{}
	}
	o.actions[action+"/"+outcome]++
}

func (o *observed) snapshot() (passes, busy int, actions map[string]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	actions = map[string]int{}
	for k, v := range o.actions {
		actions[k] = v
	}
	return o.passes, o.busy, actions
}

// serves says whether the workload at the address answers with the site.
func serves(addr string) bool {
	if addr == "" {
		return false
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(b), "hi")
}

// TestOneHungAppDoesNotHoldUpTheOthers is the stall: the runtime
// stops answering for one app's job (every call blocks until cancelled),
// while another app's job is lost behind svc's back and a third app is
// stopped. With two workers, the reconciler brings the lost app back
// (serving again, running) and stops the third while the hung app's call
// is still blocked: the others converge in their own time, not after the
// hung call's bound (a minute here). Every action is logged with the app,
// the deployment and why, and counted. Ending the reconciler cancels the
// hung call. Real store, real process runtime.
func TestOneHungAppDoesNotHoldUpTheOthers(t *testing.T) {
	rt, err := process.New(process.Config{WorkDir: t.TempDir(), StopGrace: time.Second, Isolation: "none"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	h := &hangingRuntime{Runtime: rt}
	logs, metrics := &logLines{}, &observed{}
	f := newFixture(t, options{runtime: h, startTimeout: time.Minute, workers: 2, log: logs.logger(), metrics: metrics})
	deployed := map[string]scheduler.Deployment{}
	var hungApp, lostApp, stoppedApp string
	for _, name := range []*string{&hungApp, &lostApp, &stoppedApp} {
		*name = f.app(t, siteSpec)
		d := f.deploy(t, *name)
		if d.State != scheduler.DepSucceeded {
			t.Fatalf("deploy: %+v", d)
		}
		deployed[*name] = d
	}
	ctx := context.Background()
	h.setHang(deployed[hungApp].ID, true)
	if err := rt.Stop(ctx, deployed[lostApp].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sch.Stop(alice, stoppedApp); err != nil {
		t.Fatal(err)
	}

	rctx, cancel := context.WithCancel(ctx)
	returned := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(returned)
		_ = f.sch.Reconcile(rctx)
	}()
	defer func() { cancel(); <-returned }()

	eventually(t, "the lost app serves again and is running, and the stopped app is stopped", func() bool {
		st, err := rt.Status(ctx, deployed[lostApp].ID)
		_, stopErr := rt.Status(ctx, deployed[stoppedApp].ID)
		return err == nil && serves(st.Workloads["web"].Address) && f.state(t, lostApp) == apps.StateRunning &&
			errcode.Has(stopErr, errcode.NotFound) && f.state(t, stoppedApp) == apps.StateStopped
	})
	converged := time.Since(start)
	if hung, ended := h.state(); hung != 1 || len(ended) != 0 {
		t.Fatalf("the hung app's call: %d blocked, %d ended; want it still blocked while the others converged", hung, len(ended))
	}
	t.Logf("the other apps converged in %s while the hung app's call stayed blocked", converged.Round(time.Millisecond))

	started := logs.find("reconciler: started the app's job", map[string]string{
		"app_id": lostApp, "deployment_id": deployed[lostApp].ID, "action": "start"})
	if len(started) != 1 || !strings.Contains(started[0]["reason"].(string), "does not have the app's job") {
		t.Errorf("log lines of the start = %v", started)
	}
	if stopped := logs.find("reconciler: stopped the app's job", map[string]string{
		"app_id": stoppedApp, "deployment_id": deployed[stoppedApp].ID, "action": "stop"}); len(stopped) != 1 {
		t.Errorf("log lines of the stop = %v", stopped)
	}
	if moved := logs.find("reconciler: app state changed", map[string]string{"app_id": stoppedApp, "to": apps.StateStopped}); len(moved) != 1 {
		t.Errorf("log lines of the state change = %v", moved)
	}
	eventually(t, "a pass leaves the hung app alone as busy", func() bool { _, busy, _ := metrics.snapshot(); return busy > 0 })
	_, _, actions := metrics.snapshot()
	if actions["start/ok"] != 1 || actions["stop/ok"] != 1 || actions["state/ok"] < 2 {
		t.Errorf("actions counted = %v", actions)
	}

	cancel()
	<-returned
	if hung, ended := h.state(); hung != 0 || len(ended) != 1 || ended[0] != context.Canceled {
		t.Errorf("after the reconciler ended: %d calls blocked, ended with %v; want the hung call cancelled", hung, ended)
	}
}

// TestHungRuntimeCallEndsAtTheStartTimeout: a runtime call that does not
// answer is given up at the start timeout (ADAPTER_UNAVAILABLE, its
// context cancelled), and the pass returns; the trouble is logged once,
// not at every pass, and its end is logged when the runtime answers again.
func TestHungRuntimeCallEndsAtTheStartTimeout(t *testing.T) {
	h := &hangingRuntime{Runtime: newFakeRuntime(t)}
	logs := &logLines{}
	f := newFixture(t, options{runtime: h, startTimeout: 200 * time.Millisecond, log: logs.logger()})
	appID := f.app(t, webSpec)
	d := f.deploy(t, appID)
	h.setHang(d.ID, true)
	ctx := context.Background()
	start := time.Now()
	f.sch.ReconcileOnce(ctx)
	t.Logf("the pass returned %s after it began (start timeout 200ms)", time.Since(start).Round(time.Millisecond))
	if _, ended := h.state(); len(ended) != 1 || ended[0] != context.DeadlineExceeded {
		t.Fatalf("the hung call ended with %v; want its deadline", ended)
	}
	f.sch.ReconcileOnce(ctx)
	trouble := logs.find("reconciler: cannot reconcile the app", map[string]string{"app_id": appID, "deployment_id": d.ID})
	if len(trouble) != 1 || !strings.Contains(trouble[0]["reason"].(string), "did not answer within 200ms") {
		t.Fatalf("trouble logged = %v; want one line saying the runtime did not answer", trouble)
	}
	h.setHang(d.ID, false)
	f.sch.ReconcileOnce(ctx)
	if again := logs.find("reconciler: the runtime answers again", map[string]string{"app_id": appID}); len(again) != 1 {
		t.Fatalf("recovery logged = %v", again)
	}
	if s := f.state(t, appID); s != apps.StateRunning {
		t.Fatalf("state = %s", s)
	}
}

// TestStatusIsNeverRunningWithNothingServing: between two of the
// reconciler's passes, GET …/status shows an app whose workload stopped
// running as degraded, and one whose job the runtime lost as restarting,
// though the store still says running.
func TestStatusIsNeverRunningWithNothingServing(t *testing.T) {
	f := newFixture(t, options{})
	appID := f.app(t, webSpec)
	d := f.deploy(t, appID)
	ctx := context.Background()
	f.rt.set(func(w *scheduler.WorkloadStatus) { w.Running = false })
	if st, err := f.sch.Status(ctx, appID); err != nil || st.State != apps.StateDegraded || f.state(t, appID) != apps.StateRunning {
		t.Fatalf("status = %+v, %v (stored: %s); want degraded", st, err, f.state(t, appID))
	}
	_ = f.rt.Stop(ctx, d.ID)
	if st, err := f.sch.Status(ctx, appID); err != nil || st.State != scheduler.StateRestarting {
		t.Fatalf("status = %+v, %v; want restarting", st, err)
	}
}
