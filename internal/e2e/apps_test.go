package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svchost/svc/internal/testserver"
)

// appServer is one `svc serve` with the embedded process runtime, driven
// through the API the way a person deploying apps drives it. Its apps'
// workloads are children of the server (process groups of their own, on
// the host's ports), so its cleanup stops the server with SIGTERM, which
// stops them, and then checks that nothing started under its work
// directory still runs (killing what does).
type appServer struct {
	p    *proc
	work string
	// as is the token the API calls carry; empty means the
	// administrator's (the process's).
	as string
}

// asToken is a view of the server whose API calls carry another token
// (another person's).
func (s *appServer) asToken(token string) *appServer {
	return &appServer{p: s.p, work: s.work, as: token}
}

// token is the token the view's calls carry.
func (s *appServer) token() string {
	if s.as != "" {
		return s.as
	}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	return s.p.token
}

// startAppServer starts a server on a fresh work directory with a short
// reconciler schedule, signed in as admin. env adds SVC_ variables.
func startAppServer(t testing.TB, name string, env ...string) *appServer {
	t.Helper()
	return startAppServerIn(t, name, filepath.Join(passableDir(t), "work"), env...)
}

// startAppServerIn is startAppServer on the work directory work (a
// benchmark's, on the disk it measures).
func startAppServerIn(t testing.TB, name, work string, env ...string) *appServer {
	t.Helper()
	s := &appServer{work: work}
	s.p = newProc(t, name, append([]string{
		"SVC_SERVER_ADDR=127.0.0.1:0",
		"SVC_SERVER_WORK_DIR=" + work,
		"SVC_RECONCILER_BACKOFF=200ms,200ms",
		"SVC_RUNTIME_GO_CACHE_SEED=" + goCacheSeed(),
	}, env...))
	// Registered after newProc's, so it runs first: the server is stopped
	// cleanly (stopping the apps' workloads) before newProc's cleanup would
	// SIGKILL it.
	t.Cleanup(func() { s.shutdown(t) })
	s.p.startServing()
	s.p.waitReady(scaled(15 * time.Second))
	signIn(t, scaled(30*time.Second), s.p)
	return s
}

// shutdown stops the server with SIGTERM (the runtime stops every
// workload on the way out) and fails the test if a process started under
// the work directory outlives it; those are killed.
func (s *appServer) shutdown(t testing.TB) {
	if s.p.running() {
		if code, _ := s.p.stop(scaled(60 * time.Second)); code != 0 {
			t.Errorf("%s: exited with %d after SIGTERM", s.p.name, code)
		}
	}
	// What a server killed with SIGKILL left is named in the job records;
	// the processes' working directories are under the work directory
	// (builds and artifacts) either way.
	for _, pid := range s.waitNoLeftovers(5 * time.Second) {
		t.Errorf("%s: pid %d (%s, in %s) outlived the server", s.p.name, pid, cmdline(pid), cwdOf(pid))
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// waitNoLeftovers waits up to timeout (scaled) for every process started
// under the work directory to be gone, and returns those that are not.
func (s *appServer) waitNoLeftovers(timeout time.Duration) []int {
	deadline := time.Now().Add(scaled(timeout))
	for {
		left := s.leftovers()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// leftovers lists live processes working under the work directory, and
// the live leaders of the process groups the runtime's job records name.
func (s *appServer) leftovers() []int {
	seen := map[int]bool{}
	var out []int
	for _, w := range s.records() {
		if w.alive() && !seen[w.PID] {
			seen[w.PID] = true
			out = append(out, w.PID)
		}
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || seen[pid] || pid == os.Getpid() {
			continue
		}
		if cwd := cwdOf(pid); cwd == s.work || strings.HasPrefix(cwd, s.work+"/") {
			seen[pid] = true
			out = append(out, pid)
		}
	}
	return out
}

func cwdOf(pid int) string {
	cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	return cwd
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// recordedProcess is a workload's process group as the process runtime
// records it in <work>/runtime/jobs/<jobID>.json: its leader's pid and
// start time (field 22 of /proc/<pid>/stat).
type recordedProcess struct {
	Job       string `json:"-"`
	Workload  string `json:"-"`
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
}

// records reads the runtime's job records.
func (s *appServer) records() []recordedProcess {
	files, _ := filepath.Glob(filepath.Join(s.work, "runtime", "jobs", "*.json"))
	var out []recordedProcess
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var rec struct {
			ID        string                     `json:"id"`
			Workloads map[string]recordedProcess `json:"workloads"`
		}
		if json.Unmarshal(b, &rec) != nil {
			continue
		}
		for name, w := range rec.Workloads {
			w.Job, w.Workload = rec.ID, name
			out = append(out, w)
		}
	}
	return out
}

// alive says whether the recorded leader still runs (the same process:
// same pid and start time).
func (w recordedProcess) alive() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", w.PID))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return false
	}
	start, err := strconv.ParseUint(f[19], 10, 64) // field 22
	return err == nil && start == w.StartTime
}

// passableDir is a fresh directory for a server's work directory that the
// sandboxes' users can pass through (the server, as root, gives each app a
// user of its own and makes its own directories passable, not those above
// them).
func passableDir(t testing.TB) string { return testserver.PassableDir(t) }

// goCacheSeed is the Go build cache seed the test servers of this machine
// share (runtime.go_cache_seed): the first Go build anywhere warms it, with
// the standard library packages web apps use, and every app's own cache
// starts from it, so that a Go sample does not compile the standard
// library in every test.
func goCacheSeed() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "svc-tests", "go-seed")
}

// call sends one API request (path under /api/v1) with the admin token
// and returns the answer: body is marshalled as JSON, or sent as it is
// when it is an archive. While the server's adapters load it answers "not
// loaded yet"; that is tried again.
func (s *appServer) call(t testing.TB, method, path string, body any) reply {
	t.Helper()
	deadline := time.Now().Add(scaled(30 * time.Second))
	for {
		var r reply
		switch b := body.(type) {
		case nil:
			r = sendToken(s.token(), method, s.p.Base()+"/api/v1"+path, nil)
		case archive:
			r = s.upload(path, b)
		default:
			raw, err := json.Marshal(b)
			if err != nil {
				t.Fatalf("%s %s: encode the body: %v", method, path, err)
			}
			r = sendToken(s.token(), method, s.p.Base()+"/api/v1"+path, bytes.NewReader(raw))
		}
		// Adapters still loading, or a node that has not caught up with
		// the store since it started (nothing was done): ask again.
		transient := strings.Contains(string(r.body), "not loaded yet") ||
			r.status == http.StatusServiceUnavailable && strings.Contains(string(r.body), "has not caught up")
		if r.err == nil && transient && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		return r
	}
}

// archive is a tar.gz body.
type archive []byte

// upload posts a tar.gz archive.
func (s *appServer) upload(path string, a archive) reply {
	req, err := http.NewRequest("POST", s.p.Base()+"/api/v1"+path, bytes.NewReader(a))
	if err != nil {
		return reply{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+s.token())
	req.Header.Set("Content-Type", "application/gzip")
	resp, err := (&http.Client{Timeout: scaled(60 * time.Second)}).Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, body: b, err: err}
}

// must sends a request, fails the test unless it answers want, and decodes
// the answer into out (if not nil).
func (s *appServer) must(t testing.TB, method, path string, body any, want int, out any) {
	t.Helper()
	r := s.call(t, method, path, body)
	if r.err != nil || r.status != want {
		t.Fatalf("%s %s: %d %s (%v); want %d", method, path, r.status, r.body, r.err, want)
	}
	if out != nil {
		mustJSON(t, r.body, out)
	}
}

// code is the error code of an error answer.
func (r reply) code() string {
	var e struct{ Code string }
	_ = json.Unmarshal(r.body, &e)
	return e.Code
}

// sampleArchive is the tar.gz of samples/<name> at the module root.
func sampleArchive(t testing.TB, name string) archive {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dirTarGz(t, filepath.Join(root, "samples", name))
}

// dirTarGz is the tar.gz of a directory's tree (without the crash marker a
// sample leaves when tried by hand).
func dirTarGz(t testing.TB, dir string) archive {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		if d.Name() == "crash-forever" {
			return nil // left by trying the sample by hand
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		t.Fatalf("archive %s: %v", dir, err)
	}
	return buf.Bytes()
}

// The API's answers, as far as these tests read them.
type (
	deployment struct {
		ID           string  `json:"id"`
		Revision     int     `json:"revision"`
		State        string  `json:"state"`
		Trigger      string  `json:"trigger"`
		ErrorCode    *string `json:"error_code"`
		ErrorMessage *string `json:"error_message"`
	}
	appStatus struct {
		State        string                    `json:"state"`
		DesiredState string                    `json:"desired_state"`
		DeploymentID *string                   `json:"deployment_id"`
		Revision     *int                      `json:"revision"`
		Workloads    map[string]workloadStatus `json:"workloads"`
	}
	workloadStatus struct {
		Primary  bool   `json:"primary"`
		Running  bool   `json:"running"`
		Restarts int    `json:"restarts"`
		Health   string `json:"health"`
		ExitCode *int   `json:"exit_code"`
		Address  string `json:"address"`
	}
	// deployEnd is the end event of a deploy's log stream.
	deployEnd struct {
		State     string  `json:"state"`
		ErrorCode *string `json:"error_code"`
	}
	// specDoc is a spec document, kept as decoded JSON so that a test can
	// change a field and write it back.
	specDoc = map[string]any
)

func (st appStatus) primary() workloadStatus {
	for _, w := range st.Workloads {
		if w.Primary {
			return w
		}
	}
	return workloadStatus{}
}

func (st appStatus) String() string {
	b, _ := json.Marshal(st)
	return string(b)
}

func (e deployEnd) code() string {
	if e.ErrorCode == nil {
		return ""
	}
	return *e.ErrorCode
}

// createApp creates an app without a source and returns its ID.
func (s *appServer) createApp(t testing.TB, name string) string {
	t.Helper()
	var created struct {
		App struct{ ID string } `json:"app"`
	}
	s.must(t, "POST", "/apps", map[string]string{"name": name}, http.StatusCreated, &created)
	return created.App.ID
}

// onboard creates an app from a sample, waits for detection, checks its
// winner, and accepts the proposal with values. It returns the app's ID
// and the accepted (pinned) document.
func (s *appServer) onboard(t testing.TB, name, sample, detector string, values ...map[string]any) (string, specDoc) {
	t.Helper()
	id := s.createApp(t, name)
	s.must(t, "POST", "/apps/"+id+"/source", sampleArchive(t, sample), http.StatusAccepted, nil)
	var det struct {
		Status string `json:"status"`
		Winner *struct {
			Detector string  `json:"detector"`
			Proposal specDoc `json:"proposal"`
		} `json:"winner"`
		Questions []struct{ Key string } `json:"questions"`
	}
	deadline := time.Now().Add(scaled(30 * time.Second))
	for det.Status != "done" && det.Status != "failed" {
		if time.Now().After(deadline) {
			t.Fatalf("detection of %s: still %q after %s", sample, det.Status, scaled(30*time.Second))
		}
		time.Sleep(100 * time.Millisecond)
		s.must(t, "GET", "/apps/"+id+"/detection", nil, http.StatusOK, &det)
	}
	if det.Winner == nil || det.Winner.Detector != detector {
		b, _ := json.Marshal(det)
		t.Fatalf("detection of %s: %s; want the %s detector to win", sample, b, detector)
	}
	if len(det.Questions) > 0 {
		t.Errorf("detection of %s asks %+v; a sample should need no answers", sample, det.Questions)
	}
	var acc struct {
		Spec struct {
			Revision int     `json:"revision"`
			Spec     specDoc `json:"spec"`
		} `json:"spec"`
	}
	s.must(t, "POST", "/apps/"+id+"/detection/accept", map[string]any{"values": values}, http.StatusCreated, &acc)
	return id, acc.Spec.Spec
}

// newRevision writes doc as the app's next revision (not pinned) and
// returns its number.
func (s *appServer) newRevision(t testing.TB, appID string, doc specDoc) int {
	t.Helper()
	var out struct {
		Spec struct {
			Revision int `json:"revision"`
		} `json:"spec"`
	}
	s.must(t, "POST", "/apps/"+appID+"/specs", map[string]any{"spec": doc}, http.StatusCreated, &out)
	return out.Spec.Revision
}

// deploy asks for a deploy of a revision (0: the pinned one).
func (s *appServer) deploy(t testing.TB, appID string, rev int) deployment {
	t.Helper()
	body := map[string]any{}
	if rev > 0 {
		body["revision"] = rev
	}
	var out struct{ Deployment deployment }
	s.must(t, "POST", "/apps/"+appID+"/deployments", body, http.StatusAccepted, &out)
	return out.Deployment
}

// follow reads a deployment's log stream to its end event and returns the
// log lines ("stream: line") and the end.
func (s *appServer) follow(t testing.TB, appID, depID string) ([]string, deployEnd) {
	t.Helper()
	timeout := scaled(4 * time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", s.p.Base()+"/api/v1/apps/"+appID+"/deployments/"+depID+"/logs", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.p.mu.Lock()
	req.Header.Set("Authorization", "Bearer "+s.p.token)
	s.p.mu.Unlock()
	req.Header.Set("Accept", "text/event-stream")
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatalf("follow deployment %s: %v", depID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("follow deployment %s: %d %s %s", depID, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var lines []string
	event := ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "event: "):
			event = strings.TrimPrefix(l, "event: ")
		case strings.HasPrefix(l, "data: ") && event == "log":
			var ev struct{ Stream, Line string }
			if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &ev); err != nil {
				t.Fatalf("deployment %s: log event %q: %v", depID, l, err)
			}
			lines = append(lines, ev.Stream+": "+ev.Line)
		case strings.HasPrefix(l, "data: ") && event == "end":
			var end deployEnd
			mustJSON(t, []byte(strings.TrimPrefix(l, "data: ")), &end)
			return lines, end
		}
	}
	t.Fatalf("deployment %s: the log stream ended without an end event (%v) after:\n%s", depID, sc.Err(), strings.Join(lines, "\n"))
	return nil, deployEnd{}
}

// deployed deploys a revision (0: the pinned one), follows its log and
// fails the test unless it succeeded.
func (s *appServer) deployed(t testing.TB, appID string, rev int) deployment {
	t.Helper()
	d := s.deploy(t, appID, rev)
	lines, end := s.follow(t, appID, d.ID)
	if end.State != "succeeded" {
		t.Fatalf("deployment %s of revision %d ended %s %s; its log:\n%s", d.ID, d.Revision, end.State, end.code(), strings.Join(lines, "\n"))
	}
	return d
}

func (s *appServer) status(t testing.TB, appID string) appStatus {
	t.Helper()
	var st appStatus
	s.must(t, "GET", "/apps/"+appID+"/status", nil, http.StatusOK, &st)
	return st
}

// waitStatus polls the app's status until cond holds, and returns it. It
// fails the test after timeout, naming the states it saw.
func (s *appServer) waitStatus(t testing.TB, appID, what string, timeout time.Duration, cond func(appStatus) bool) appStatus {
	t.Helper()
	timeout = scaled(timeout)
	deadline := time.Now().Add(timeout)
	var seen []string
	for {
		st := s.status(t, appID)
		if len(seen) == 0 || seen[len(seen)-1] != st.State {
			seen = append(seen, st.State)
		}
		if cond(st) {
			if len(seen) > 1 {
				t.Logf("app %s: %s after %s", appID, what, strings.Join(seen, " → "))
			}
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("app %s: not %s within %s; states seen: %s; last status: %s", appID, what, timeout, strings.Join(seen, " → "), st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitRunning waits until the app is running with its primary workload
// passing its check at an address, and returns that address.
func (s *appServer) waitRunning(t testing.TB, appID string) string {
	t.Helper()
	st := s.waitStatus(t, appID, "running", 60*time.Second, func(st appStatus) bool {
		w := st.primary()
		return st.State == "running" && w.Running && w.Health == "passing" && w.Address != ""
	})
	return st.primary().Address
}

// waitDeployed waits until a freshly deployed app runs, and checks that
// its workload did not have to be restarted to get there (a new job's
// process served from its first start). It returns the address.
func (s *appServer) waitDeployed(t testing.TB, appID string) string {
	t.Helper()
	addr := s.waitRunning(t, appID)
	if w := s.status(t, appID).primary(); w.Restarts > 0 {
		t.Fatalf("the freshly deployed workload at %s was restarted %d times before it served (last exit code %v); its log:\n%s",
			addr, w.Restarts, deref(w.ExitCode), strings.Join(s.appLogs(t, appID, 30), "\n"))
	}
	return addr
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// appLogs reads the last lines of the app's primary workload.
func (s *appServer) appLogs(t testing.TB, appID string, tail int) []string {
	t.Helper()
	var out struct {
		Workload string   `json:"workload"`
		Lines    []string `json:"lines"`
	}
	s.must(t, "GET", fmt.Sprintf("/apps/%s/logs?tail=%d", appID, tail), nil, http.StatusOK, &out)
	return out.Lines
}

// waitLogLine waits until the app's log has a line containing sub.
func (s *appServer) waitLogLine(t testing.TB, appID, sub string) {
	t.Helper()
	timeout := scaled(15 * time.Second)
	deadline := time.Now().Add(timeout)
	for {
		lines := s.appLogs(t, appID, 200)
		for _, l := range lines {
			if strings.Contains(l, sub) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("app %s: no log line with %q within %s; the log:\n%s", appID, sub, timeout, strings.Join(lines, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hit sends one request straight to an app's workload (not through the
// API): addr is the workload's host:port from the status.
func hit(method, addr, path string) (int, string, error) {
	req, err := http.NewRequest(method, "http://"+addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitAnswer waits until GET path at addr answers 200 with a body
// containing want, and returns the body.
func waitAnswer(t testing.TB, addr, path, want string) string {
	t.Helper()
	timeout := scaled(30 * time.Second)
	deadline := time.Now().Add(timeout)
	for {
		code, body, err := hit("GET", addr, path)
		if err == nil && code == http.StatusOK && strings.Contains(body, want) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET http://%s%s: %d %q (%v) within %s; want 200 with %q", addr, path, code, body, err, timeout, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitRefused waits until nothing answers at addr.
func waitRefused(t testing.TB, addr string) {
	t.Helper()
	timeout := scaled(30 * time.Second)
	deadline := time.Now().Add(timeout)
	for {
		code, body, err := hit("GET", addr, "/")
		if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("http://%s/ still answers %d %q (%v) after %s", addr, code, body, err, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
