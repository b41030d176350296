// Package runtimetest owns the contract suite every runtime adapter must
// pass: building a static site, a Go program and a shell command, running
// them, reaching them over HTTP, health, restarts (automatic and asked
// for), the restart policy, start order, volumes, a fresh working copy per
// job, an artifact that outlives its jobs (what releases keep), capped
// logs, usage, exec, stopping, and the coded errors of failed builds and
// workloads that exit at once.
//
// What the suite expects of a runtime's Factory:
//
//   - a small restart budget and short backoffs: a workload that crashes
//     again at once after every restart must be dead within the suite's
//     deadline, and one that exits once must be restarted (the process
//     runtime's factory gives 2 attempts within a minute, backoffs from
//     50ms to 500ms);
//   - a fresh runtime per call, cleaned up by t (the cases run in
//     parallel).
//
// A runtime that cannot mount a volume at its path names the volume's
// directory in SVC_VOLUME_<NAME> (upper case, '-' as '_'); the suite's
// workloads look there first, then at the mount path. Cases of optional
// capabilities (LogReader, UsageReader, HostReader, Execer) skip when the
// runner does not implement them. Cases needing sh, python3 or go skip
// when they are missing. No case asserts on time: every wait polls up to
// the suite's deadline.
//
// It is imported by runtimes' tests only. It must not import any runtime,
// the HTTP server or the store.
package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
)

// Factory returns a fresh runtime for one case: its builder and its runner
// (usually the same value). It registers its own cleanup with t.
type Factory func(t *testing.T) (scheduler.Builder, scheduler.Runner)

// deadline bounds every wait of the suite.
const deadline = 45 * time.Second

// Run runs the contract suite against the runtime newRuntime returns.
func Run(t *testing.T, newRuntime Factory) {
	t.Run("StaticSite", func(t *testing.T) { t.Parallel(); staticSite(t, newRuntime) })
	t.Run("GoProgram", func(t *testing.T) { t.Parallel(); goProgram(t, newRuntime) })
	t.Run("ShellCommand", func(t *testing.T) { t.Parallel(); shellCommand(t, newRuntime) })
	t.Run("BuildFailed", func(t *testing.T) { t.Parallel(); buildFailed(t, newRuntime) })
	t.Run("BuildTimeout", func(t *testing.T) { t.Parallel(); buildTimeout(t, newRuntime) })
	t.Run("ExitsAtOnce", func(t *testing.T) { t.Parallel(); exitsAtOnce(t, newRuntime) })
	t.Run("UnknownJob", func(t *testing.T) { t.Parallel(); unknownJob(t, newRuntime) })
	t.Run("RestartInPlace", func(t *testing.T) { t.Parallel(); restartInPlace(t, newRuntime) })
	t.Run("StartOrder", func(t *testing.T) { t.Parallel(); startOrder(t, newRuntime) })
	t.Run("DeadAfterRepeatedCrashes", func(t *testing.T) { t.Parallel(); deadAfterRepeatedCrashes(t, newRuntime) })
	t.Run("VolumeSurvivesJobs", func(t *testing.T) { t.Parallel(); volumeSurvivesJobs(t, newRuntime) })
	t.Run("FreshWorkingCopy", func(t *testing.T) { t.Parallel(); freshWorkingCopy(t, newRuntime) })
	t.Run("KeptArtifact", func(t *testing.T) { t.Parallel(); keptArtifact(t, newRuntime) })
	t.Run("LogsCapped", func(t *testing.T) { t.Parallel(); logsCapped(t, newRuntime) })
	t.Run("Usage", func(t *testing.T) { t.Parallel(); usage(t, newRuntime) })
	t.Run("Exec", func(t *testing.T) { t.Parallel(); execCase(t, newRuntime) })
}

func staticSite(t *testing.T, newRuntime Factory) {
	b, r := newRuntime(t)
	ctx := testContext(t)
	src := writeTree(t, map[string]string{
		"site/index.html": "<h1>static-marker</h1>\n",
		"README":          "not served\n",
	})
	art, err := b.Build(ctx, scheduler.BuildRequest{Source: src, Build: spec.Build{Kind: spec.BuildStatic, Context: "site"}})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	health := &spec.Health{Path: "/", Interval: spec.Duration(100 * time.Millisecond)}
	st := runJob(ctx, t, r, scheduler.Job{ID: "job-static", Workloads: map[string]scheduler.Task{
		"web": {Artifact: art, Health: health},
	}})
	ws := st.Workloads["web"]
	if !ws.Running || ws.Health != scheduler.HealthPassing || ws.Address == "" {
		t.Fatalf("status after run = %+v, want running, passing, an address", ws)
	}
	if body := get(t, ws.Address, "/"); !strings.Contains(body, "static-marker") {
		t.Fatalf("GET / = %q, want the site", body)
	}
	stopAndGone(ctx, t, r, "job-static", ws.Address)
}

const goSample = `package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
)

func main() {
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "go-marker %s\n", os.Getenv("GREETING"))
	})
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	http.HandleFunc("/exit", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		fmt.Fprintln(w, "bye")
		w.(http.Flusher).Flush()
		os.Exit(code)
	})
	fmt.Println("listening on", os.Getenv("PORT"))
	if err := http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
`

func goProgram(t *testing.T, newRuntime Factory) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain on PATH")
	}
	b, r := newRuntime(t)
	ctx := testContext(t)
	src := writeTree(t, map[string]string{
		"app/go.mod":  "module sample\n\ngo 1.21\n",
		"app/main.go": goSample,
	})
	var logs lineLog
	art, err := b.Build(ctx, scheduler.BuildRequest{
		Source: src,
		Build:  spec.Build{Kind: spec.BuildGo, Context: "app", Command: "echo building-marker && go build -o app ."},
		Log:    logs.add,
	})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	if !logs.has("building-marker") {
		t.Errorf("build log = %q, want the build's output line by line", logs.all())
	}
	health := &spec.Health{Path: "/healthz", Interval: spec.Duration(100 * time.Millisecond)}
	st := runJob(ctx, t, r, scheduler.Job{ID: "job-go", Workloads: map[string]scheduler.Task{
		"web": {Artifact: art, Command: []string{"./app"}, Env: map[string]string{"GREETING": "hello-env"}, Health: health},
	}})
	ws := st.Workloads["web"]
	if !ws.Running || ws.Health != scheduler.HealthPassing || ws.Restarts != 0 || ws.ExitCode != nil {
		t.Fatalf("status after run = %+v, want running, passing, no restarts, no exit", ws)
	}
	if !strings.HasPrefix(ws.Address, "127.0.0.1:") {
		t.Errorf("address = %q, want 127.0.0.1:port", ws.Address)
	}
	if body := get(t, ws.Address, "/"); !strings.Contains(body, "go-marker hello-env") {
		t.Fatalf("GET / = %q, want the program's answer with its environment", body)
	}
	if lr, ok := r.(scheduler.LogReader); ok {
		waitFor(t, "the workload's output in its logs", func() (bool, string) {
			lines, err := lr.Logs(ctx, "job-go", "web")
			return err == nil && strings.Contains(strings.Join(lines, "\n"), "listening on"), fmt.Sprint(lines, err)
		})
	}

	// The workload exits: the runtime records the code and restarts it.
	_, _ = tryGet(ws.Address, "/exit?code=3")
	waitFor(t, "a restart after exit code 3", func() (bool, string) {
		st, err := r.Status(ctx, "job-go")
		if err != nil {
			return false, err.Error()
		}
		w := st.Workloads["web"]
		ok := w.Restarts >= 1 && w.ExitCode != nil && *w.ExitCode == 3 && w.Running
		return ok, fmt.Sprintf("%+v", w)
	})
	waitFor(t, "the restarted workload answering", func() (bool, string) {
		body, err := tryGet(ws.Address, "/")
		return err == nil && strings.Contains(body, "go-marker"), fmt.Sprint(body, err)
	})
	waitFor(t, "health passing after the restart", func() (bool, string) {
		st, err := r.Status(ctx, "job-go")
		if err != nil {
			return false, err.Error()
		}
		return st.Workloads["web"].Health == scheduler.HealthPassing, st.Workloads["web"].Health
	})
	stopAndGone(ctx, t, r, "job-go", ws.Address)
}

func shellCommand(t *testing.T, newRuntime Factory) {
	for _, bin := range []string{"sh", "python3"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("no %s on PATH: the shell command case needs sh and python3", bin)
		}
	}
	b, r := newRuntime(t)
	ctx := testContext(t)
	src := writeTree(t, map[string]string{"gen.sh": "mkdir -p out && echo shell-marker > out/index.html\n"})
	art, err := b.Build(ctx, scheduler.BuildRequest{Source: src, Build: spec.Build{Kind: spec.BuildCommand, Command: "sh gen.sh"}})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	if _, err := os.Stat(filepath.Join(src, "out")); err == nil {
		t.Errorf("the build wrote into the source tree; it must work on a copy")
	}
	st := runJob(ctx, t, r, scheduler.Job{ID: "job-shell", Workloads: map[string]scheduler.Task{
		"web": {
			Artifact: art,
			Command:  []string{"sh", "-c", `exec python3 -m http.server --bind 127.0.0.1 --directory out "$PORT"`},
			Health:   &spec.Health{Path: "/", Interval: spec.Duration(100 * time.Millisecond)},
		},
	}})
	ws := st.Workloads["web"]
	if body := get(t, ws.Address, "/index.html"); !strings.Contains(body, "shell-marker") {
		t.Fatalf("GET /index.html = %q, want the generated page", body)
	}
	stopAndGone(ctx, t, r, "job-shell", ws.Address)
}

// freshWorkingCopy: what a job's workload writes in its directory is not
// seen by the next job of the same artifact (a redeploy, a rollback): the
// artifact itself is never written. A runtime that drops a stopped job's
// writes (WriteDropper) runs that job again from its built files, and
// refuses to drop them while it runs.
func freshWorkingCopy(t *testing.T, newRuntime Factory) {
	needTools(t, "sh", "python3")
	b, r := newRuntime(t)
	ctx := testContext(t)
	art, err := b.Build(ctx, scheduler.BuildRequest{Source: writeTree(t, map[string]string{"index.html": "fresh\n"}),
		Build: spec.Build{Kind: spec.BuildCommand, Command: "true"}})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	addr := serveFiles(ctx, t, r, art, "job-fresh-a", "echo leftover > leftover.txt; ")
	if got := get(t, addr, "/leftover.txt"); !strings.Contains(got, "leftover") {
		t.Fatalf("job A's own file = %q", got)
	}
	if wd, ok := r.(scheduler.WriteDropper); ok {
		if err := wd.DropWrites(ctx, "job-fresh-a"); !errcode.Has(err, errcode.StateInvalid) {
			t.Errorf("DropWrites of a running job = %v; want STATE_INVALID", err)
		}
	}
	stopAndGone(ctx, t, r, "job-fresh-a", addr)
	addr = serveFiles(ctx, t, r, art, "job-fresh-b", "")
	if body, err := tryGet(addr, "/leftover.txt"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("job B of the same artifact sees job A's file: %q, %v", body, err)
	}
	// The scheduler stops an app over its disk limit and drops what its
	// job wrote: the same job, run again, starts from its built files.
	if wd, ok := r.(scheduler.WriteDropper); ok {
		if err := wd.DropWrites(ctx, "job-fresh-a"); err != nil {
			t.Fatalf("DropWrites of a stopped job: %v", err)
		}
		addr = serveFiles(ctx, t, r, art, "job-fresh-a", "")
		if body, err := tryGet(addr, "/leftover.txt"); err == nil || !strings.Contains(err.Error(), "404") {
			t.Errorf("job A run again after DropWrites sees what it wrote before: %q, %v", body, err)
		}
		if body := get(t, addr, "/index.html"); !strings.Contains(body, "fresh") {
			t.Errorf("job A run again after DropWrites: GET /index.html = %q, want its built file", body)
		}
	}
}

// serveFiles runs job id: the artifact's files served over HTTP from its
// working directory, after the shell command before; it returns the
// address.
func serveFiles(ctx context.Context, t *testing.T, r scheduler.Runner, art scheduler.Artifact, id, before string) string {
	t.Helper()
	st := runJob(ctx, t, r, scheduler.Job{ID: id, Workloads: map[string]scheduler.Task{"web": {
		Artifact: art,
		Command:  []string{"sh", "-c", before + `exec python3 -m http.server --bind 127.0.0.1 "$PORT"`},
		Health:   &spec.Health{Path: "/", Interval: spec.Duration(100 * time.Millisecond)},
	}}})
	return st.Workloads["web"].Address
}

// keptArtifact: an artifact belongs to its release, not to a job. Two
// jobs run it at once (a new release's job starts while the previous one
// serves); stopping and discarding both (the scheduler retires a
// release's job so) leaves it whole, and a third job (a rollback, a
// redeploy) runs it again without a build.
func keptArtifact(t *testing.T, newRuntime Factory) {
	needTools(t, "sh", "python3")
	b, r := newRuntime(t)
	ctx := testContext(t)
	art, err := b.Build(ctx, scheduler.BuildRequest{Source: writeTree(t, map[string]string{"index.html": "kept-marker\n"}),
		Build: spec.Build{Kind: spec.BuildCommand, Command: "echo built > built.txt"}})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	retire := func(id, addr string) {
		t.Helper()
		stopAndGone(ctx, t, r, id, addr)
		if d, ok := r.(scheduler.Discarder); ok {
			if err := d.Discard(ctx, id); err != nil {
				t.Fatalf("discard %s: %v", id, err)
			}
		}
	}
	first := serveFiles(ctx, t, r, art, "job-kept-a", "")
	second := serveFiles(ctx, t, r, art, "job-kept-b", "")
	for _, addr := range []string{first, second} {
		if body := get(t, addr, "/index.html"); !strings.Contains(body, "kept-marker") {
			t.Fatalf("GET /index.html at %s = %q, want the artifact's file", addr, body)
		}
	}
	retire("job-kept-a", first)
	if body := get(t, second, "/built.txt"); !strings.Contains(body, "built") {
		t.Fatalf("job B after job A was discarded: GET /built.txt = %q", body)
	}
	retire("job-kept-b", second)
	if k, ok := b.(scheduler.ArtifactKeeper); ok && !k.HasArtifact(ctx, art) {
		t.Fatal("the runtime no longer has the artifact once its jobs were discarded")
	}
	third := serveFiles(ctx, t, r, art, "job-kept-c", "")
	if body := get(t, third, "/built.txt"); !strings.Contains(body, "built") {
		t.Fatalf("a third job of the artifact: GET /built.txt = %q, want the build's output", body)
	}
	stopAndGone(ctx, t, r, "job-kept-c", third)
}

func buildFailed(t *testing.T, newRuntime Factory) {
	b, _ := newRuntime(t)
	ctx := testContext(t)
	src := writeTree(t, map[string]string{"x.txt": "x\n"})
	_, err := b.Build(ctx, scheduler.BuildRequest{Source: src, Build: spec.Build{
		Kind: spec.BuildCommand, Command: "echo out-marker-41; echo err-marker-42 >&2; exit 3",
	}})
	e := wantCode(t, err, errcode.BuildFailed)
	tail := fmt.Sprint(e.Details["log_tail"])
	for _, want := range []string{"out-marker-41", "err-marker-42"} {
		if !strings.Contains(tail, want) {
			t.Errorf("log_tail = %q, want it to hold %q", tail, want)
		}
	}
}

func buildTimeout(t *testing.T, newRuntime Factory) {
	b, _ := newRuntime(t)
	ctx := testContext(t)
	src := writeTree(t, map[string]string{"x.txt": "x\n"})
	began := time.Now()
	_, err := b.Build(ctx, scheduler.BuildRequest{
		Source:  src,
		Build:   spec.Build{Kind: spec.BuildCommand, Command: "echo started; sleep 30 & sleep 30"},
		Timeout: 300 * time.Millisecond,
	})
	wantCode(t, err, errcode.BuildTimeout)
	// The build's children sleep 30 s: ending well before that shows they
	// were killed with it, however slow the machine.
	if took := time.Since(began); took > 25*time.Second {
		t.Errorf("a build limited to 300ms took %s to end: its children were left running", took)
	}
}

func exitsAtOnce(t *testing.T, newRuntime Factory) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on PATH")
	}
	b, r := newRuntime(t)
	ctx := testContext(t)
	src := writeTree(t, map[string]string{"x.txt": "x\n"})
	art, err := b.Build(ctx, scheduler.BuildRequest{Source: src, Build: spec.Build{Kind: spec.BuildCommand, Command: "true"}})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	_, err = r.Run(ctx, scheduler.Job{ID: "job-exit", Workloads: map[string]scheduler.Task{
		"web": {Artifact: art, Command: []string{"sh", "-c", "echo dying; exit 7"}},
	}})
	e := wantCode(t, err, errcode.StateAppExited)
	if got := fmt.Sprint(e.Details["exit_code"]); got != "7" {
		t.Errorf("exit_code = %s, want 7", got)
	}
	if _, err := r.Status(ctx, "job-exit"); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("status of a job that failed to run = %v, want NOT_FOUND", err)
	}
}

func unknownJob(t *testing.T, newRuntime Factory) {
	_, r := newRuntime(t)
	ctx := testContext(t)
	if _, err := r.Status(ctx, "no-such-job"); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("Status(unknown) = %v, want NOT_FOUND", err)
	}
	if err := r.Stop(ctx, "no-such-job"); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("Stop(unknown) = %v, want NOT_FOUND", err)
	}
	if err := r.Restart(ctx, "no-such-job"); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("Restart(unknown) = %v, want NOT_FOUND", err)
	}
	if lr, ok := r.(scheduler.LogReader); ok {
		if _, err := lr.Logs(ctx, "no-such-job", "web"); errcode.CodeOf(err) != errcode.NotFound {
			t.Errorf("Logs(unknown) = %v, want NOT_FOUND", err)
		}
	}
	if ur, ok := r.(scheduler.UsageReader); ok {
		if _, err := ur.Usage(ctx, "no-such-job"); errcode.CodeOf(err) != errcode.NotFound {
			t.Errorf("Usage(unknown) = %v, want NOT_FOUND", err)
		}
	}
	if ex, ok := r.(scheduler.Execer); ok {
		if _, err := ex.Exec(ctx, scheduler.ExecRequest{JobID: "no-such-job", Workload: "web"}); errcode.CodeOf(err) != errcode.NotFound {
			t.Errorf("Exec(unknown) = %v, want NOT_FOUND", err)
		}
	}
}

// runJob runs the job and stops it when the test ends (if still running).
func runJob(ctx context.Context, t *testing.T, r scheduler.Runner, job scheduler.Job) scheduler.JobStatus {
	t.Helper()
	st, err := r.Run(ctx, job)
	if err != nil {
		t.Fatalf("run %s: %v", job.ID, err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background(), job.ID) })
	return st
}

func stopAndGone(ctx context.Context, t *testing.T, r scheduler.Runner, jobID, addr string) {
	t.Helper()
	if err := r.Stop(ctx, jobID); err != nil {
		t.Fatalf("stop %s: %v", jobID, err)
	}
	if _, err := r.Status(ctx, jobID); errcode.CodeOf(err) != errcode.NotFound {
		t.Errorf("status after stop = %v, want NOT_FOUND", err)
	}
	waitFor(t, "the stopped workload to stop answering", func() (bool, string) {
		body, err := tryGet(addr, "/")
		return err != nil, body
	})
}

func wantCode(t *testing.T, err error, code errcode.Code) *errcode.Error {
	t.Helper()
	var e *errcode.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want a *errcode.Error with %s", err, code)
	}
	if e.Code != code {
		t.Fatalf("code = %s (%v), want %s", e.Code, err, code)
	}
	return e
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*deadline)
	t.Cleanup(cancel)
	return ctx
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func tryGet(addr, path string) (string, error) {
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(b), err
}

func get(t *testing.T, addr, path string) string {
	t.Helper()
	body, err := tryGet(addr, path)
	if err != nil {
		t.Fatalf("GET http://%s%s: %v", addr, path, err)
	}
	return body
}

// waitFor polls cond until it holds or the suite's deadline passes.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(deadline)
	last := ""
	for time.Now().Before(end) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last state: %s", what, last)
}

// lineLog collects a LogSink's lines.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) add(stream, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, stream+": "+line)
}

func (l *lineLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func (l *lineLog) has(s string) bool {
	for _, line := range l.all() {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}
