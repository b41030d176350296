package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The deploy tests run the samples of samples/ on the real binary's
// embedded process runtime: detection's proposal accepted as it is, built
// with the host's toolchains, run as the server's children on the host's
// ports, and reached at the address the status names.

// sample is one app of samples/.
type sample struct {
	dir      string // under samples/
	detector string // the detector that must win
	lang     string // GET / says "hello from <lang>"
	dynamic  bool   // a program (not files served by the runtime)
}

var samples = []sample{
	{dir: "go-hello", detector: "go", lang: "go", dynamic: true},
	{dir: "node-hello", detector: "node", lang: "node", dynamic: true},
	{dir: "python-hello", detector: "python", lang: "python", dynamic: true},
	{dir: "static-hello", detector: "static", lang: "static"},
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// helloValues are the values accepted with a sample: GREETING as a plain
// value, TOKEN as a secret.
func helloValues(greeting, token string) []map[string]any {
	return []map[string]any{
		{"key": "GREETING", "value": greeting},
		{"key": "TOKEN", "value": token, "secret": true},
	}
}

// checkHello checks that the app at addr is the sample, with the greeting.
func checkHello(t *testing.T, sm sample, addr, greeting string) {
	t.Helper()
	body := waitAnswer(t, addr, "/", "hello from ")
	if !strings.Contains(body, "hello from "+sm.lang) {
		t.Fatalf("GET http://%s/ = %q: another app answers at the address of %s (two apps on one port?)", addr, body, sm.dir)
	}
	if sm.dynamic && !strings.Contains(body, greeting) {
		t.Fatalf("GET http://%s/ = %q; want the greeting %q", addr, body, greeting)
	}
}

// TestDeploySamples deploys every sample on one server, at the same time,
// as a newcomer would: upload, detection's proposal accepted as it is with
// a greeting and a secret, deploy, follow the deploy's log, and reach the
// app where the status says it listens.
func TestDeploySamples(t *testing.T) {
	srv := startAppServer(t, "samples")
	for _, sm := range samples {
		t.Run(sm.dir, func(t *testing.T) {
			t.Parallel()
			greeting, token := "greeting-"+sm.lang+"-"+randomHex(t), "token-"+randomHex(t)
			id, doc := srv.onboard(t, sm.dir, sm.dir, sm.detector, helloValues(greeting, token)...)
			if sm.dynamic {
				web, _ := doc["workloads"].(map[string]any)["web"].(map[string]any)
				run, _ := web["run"].(map[string]any)
				if port, _ := run["port"].(float64); port != 8080 {
					t.Errorf("the proposal's run = %v; want port 8080", run)
				}
			}
			d := srv.deploy(t, id, 0)
			lines, end := srv.follow(t, id, d.ID)
			if end.State != "succeeded" {
				t.Fatalf("deploy ended %s %s; its log:\n%s", end.State, end.code(), strings.Join(lines, "\n"))
			}
			t.Logf("deploy log:\n%s", strings.Join(lines, "\n"))
			addr := srv.waitDeployed(t, id)
			checkHello(t, sm, addr, greeting)
			if !sm.dynamic {
				return // the runtime serves the files: no env, no log of its own
			}
			if code, body, err := hit("GET", addr, "/env/TOKEN"); err != nil || code != http.StatusOK || body != token {
				t.Errorf("GET /env/TOKEN = %d %q (%v); want the secret accepted with the app", code, body, err)
			}
			srv.waitLogLine(t, id, "GET /env/TOKEN")
			srv.waitLogLine(t, id, "GET / ")
			srv.must(t, "GET", "/apps/"+id+"/usage", nil, http.StatusOK, nil)
		})
	}
}

// TestDeployLifecycle runs one app through what its owner does after the
// first deploy: restart, stop, start, a new revision and a rollback, a
// health check that starts failing, and a crash loop the reconciler gives
// up on, each ended by a deploy. The steps share the app, in order.
func TestDeployLifecycle(t *testing.T) {
	srv := startAppServer(t, "lifecycle")
	sm := samples[2] // python-hello: nothing to compile
	first, token := "first-"+randomHex(t), "token-"+randomHex(t)
	id, doc := srv.onboard(t, "lifecycle", sm.dir, sm.detector, helloValues(first, token)...)
	// Detection proposes no health path (the runtime checks that the port
	// accepts connections): add one, checked every second, so that a
	// broken /healthz shows.
	web := doc["workloads"].(map[string]any)["web"].(map[string]any)
	web["run"].(map[string]any)["health"] = map[string]any{"path": "/healthz", "interval": "1s", "timeout": "500ms"}
	withHealth := srv.newRevision(t, id, doc)
	srv.must(t, "POST", fmt.Sprintf("/apps/%s/specs/%d/pin", id, withHealth), nil, http.StatusOK, nil)

	var addr string
	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.Logf("after %s failed, the app's status: %s", name, srv.status(t, id))
		}
	}
	step("deploy", func(t *testing.T) {
		srv.deployed(t, id, 0)
		addr = srv.waitDeployed(t, id)
		checkHello(t, sm, addr, first)
	})
	step("restart", func(t *testing.T) {
		before := srv.status(t, id).primary().Restarts
		srv.must(t, "POST", "/apps/"+id+"/restart", nil, http.StatusAccepted, nil)
		st := srv.waitStatus(t, id, "restarted", 60*time.Second, func(st appStatus) bool {
			w := st.primary()
			return w.Restarts > before && st.State == "running" && w.Health == "passing"
		})
		addr = st.primary().Address
		checkHello(t, sm, addr, first)
	})
	step("stop", func(t *testing.T) {
		var out struct {
			App struct {
				DesiredState string `json:"desired_state"`
			} `json:"app"`
		}
		srv.must(t, "POST", "/apps/"+id+"/stop", nil, http.StatusOK, &out)
		if out.App.DesiredState != "stopped" {
			t.Errorf("POST stop answered desired_state %q", out.App.DesiredState)
		}
		srv.waitStatus(t, id, "stopped", 60*time.Second, func(st appStatus) bool { return st.State == "stopped" })
		waitRefused(t, addr)
	})
	step("start", func(t *testing.T) {
		srv.must(t, "POST", "/apps/"+id+"/start", nil, http.StatusOK, nil)
		addr = srv.waitRunning(t, id)
		checkHello(t, sm, addr, first)
	})
	step("new revision and rollback", func(t *testing.T) {
		second := "second-" + randomHex(t)
		doc["env"].(map[string]any)["GREETING"] = second
		rev := srv.newRevision(t, id, doc)
		srv.deployed(t, id, rev)
		addr = srv.waitDeployed(t, id)
		checkHello(t, sm, addr, second)

		var rb struct{ Deployment deployment }
		srv.must(t, "POST", "/apps/"+id+"/deployments/rollback", nil, http.StatusAccepted, &rb)
		if rb.Deployment.Revision != withHealth || rb.Deployment.Trigger != "rollback" {
			t.Errorf("rollback deploys %+v; want revision %d, trigger rollback", rb.Deployment, withHealth)
		}
		if lines, end := srv.follow(t, id, rb.Deployment.ID); end.State != "succeeded" {
			t.Fatalf("rollback ended %s %s; its log:\n%s", end.State, end.code(), strings.Join(lines, "\n"))
		}
		addr = srv.waitDeployed(t, id)
		checkHello(t, sm, addr, first)
	})
	step("failing health check, then a deploy", func(t *testing.T) {
		if code, _, err := hit("POST", addr, "/break"); err != nil || code != http.StatusOK {
			t.Fatalf("POST /break: %d (%v)", code, err)
		}
		srv.waitStatus(t, id, "degraded", 60*time.Second, func(st appStatus) bool {
			return st.State == "degraded" && st.primary().Health == "failing"
		})
		srv.deployed(t, id, 0)
		addr = srv.waitDeployed(t, id)
		waitAnswer(t, addr, "/healthz", "ok")
	})
	step("crash loop, given up, then a deploy", func(t *testing.T) {
		// The process runtime restarts the workload 3 times (1s, 2s, 4s
		// apart) before it reports it dead; then the reconciler tries twice
		// more (SVC_RECONCILER_BACKOFF) and gives up.
		if code, _, err := hit("POST", addr, "/crash"); err != nil || code != http.StatusOK {
			t.Fatalf("POST /crash: %d (%v)", code, err)
		}
		srv.waitStatus(t, id, "failed", 2*time.Minute, func(st appStatus) bool { return st.State == "failed" })
		// Failed stays failed: the reconciler does not start it again.
		// Ten times the whole retry schedule is long enough to see it.
		for end := time.Now().Add(scaled(4 * time.Second)); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if st := srv.status(t, id); st.State != "failed" || st.primary().Running {
				t.Fatalf("a failed app came back by itself: %s", st)
			}
		}
		d := srv.deploy(t, id, 0)
		lines, end := srv.follow(t, id, d.ID)
		if end.State != "succeeded" {
			t.Fatalf("the deploy after the crash loop ended %s %s (a deploy must start from a fresh copy of the build, without the files the app wrote); its log:\n%s",
				end.State, end.code(), strings.Join(lines, "\n"))
		}
		addr = srv.waitDeployed(t, id)
		checkHello(t, sm, addr, first)
	})
}

// TestDeployRecoversAfterServerKill kills the server with SIGKILL while an
// app runs: the app's workload lives on, orphaned, with its sandbox's
// network (the pod: a namespace holder and pasta); the next start on the
// same work directory kills all of them, and the reconciler runs the app
// again.
func TestDeployRecoversAfterServerKill(t *testing.T) {
	srv := startAppServer(t, "killed")
	sm := samples[2]
	greeting, token := "greeting-"+randomHex(t), "token-"+randomHex(t)
	id, _ := srv.onboard(t, "survivor", sm.dir, sm.detector, helloValues(greeting, token)...)
	srv.deployed(t, id, 0)
	addr := srv.waitDeployed(t, id)
	checkHello(t, sm, addr, greeting)
	recs := srv.records()
	var workloads []recordedProcess
	for _, r := range recs {
		if !r.alive() {
			t.Fatalf("the runtime's job records name %+v, which does not run", r)
		}
		if !strings.HasPrefix(r.Workload, "_pod-") {
			workloads = append(workloads, r)
		}
	}
	if len(workloads) != 1 || len(recs) != 3 {
		t.Fatalf("the runtime's job records: %+v; want the app's one running workload and its pod's two processes", recs)
	}
	old := workloads[0]

	srv.p.kill()
	if old.alive() {
		t.Logf("the workload (pid %d) outlived the server, orphaned", old.PID)
	} else {
		t.Logf("the workload (pid %d) died with the server", old.PID)
	}
	srv.p.restart()
	srv.p.waitReady(scaled(15 * time.Second))
	for _, r := range recs {
		for deadline := time.Now().Add(scaled(30 * time.Second)); r.alive(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the orphaned %s (pid %d) still runs %s after the server started again", r.Workload, r.PID, scaled(30*time.Second))
			}
		}
	}
	addr = srv.waitRunning(t, id)
	checkHello(t, sm, addr, greeting)
	if code, body, err := hit("GET", addr, "/env/TOKEN"); err != nil || code != http.StatusOK || body != token {
		t.Errorf("after the restart GET /env/TOKEN = %d %q (%v)", code, body, err)
	}
	for _, r := range srv.records() {
		if r.PID == old.PID {
			t.Errorf("the job record still names the killed pid %d", old.PID)
		}
	}
}

// TestDeployBadInput asks the real binary for deploys that cannot work.
func TestDeployBadInput(t *testing.T) {
	buildTimeout := scaled(5 * time.Second)
	srv := startAppServer(t, "bad-input",
		"SVC_RUNTIME_BUILD_TIMEOUT="+buildTimeout.String(),
		"SVC_RUNTIME_START_TIMEOUT="+scaled(5*time.Second).String())
	sm := samples[2]
	id, doc := srv.onboard(t, "bad-input", sm.dir, sm.detector, helloValues("hi", "token")...)
	web := doc["workloads"].(map[string]any)["web"].(map[string]any)

	t.Run("unknown revision", func(t *testing.T) {
		r := srv.call(t, "POST", "/apps/"+id+"/deployments", map[string]any{"revision": 99})
		if r.status != http.StatusNotFound || r.code() != "NOT_FOUND" {
			t.Errorf("deploy of revision 99: %d %s (%v); want 404 NOT_FOUND", r.status, r.body, r.err)
		}
	})
	t.Run("build that never ends", func(t *testing.T) {
		web["build"] = map[string]any{"kind": "python", "context": ".", "command": "sleep 3600"}
		rev := srv.newRevision(t, id, doc)
		d := srv.deploy(t, id, rev)
		deadline := time.Now().Add(scaled(30 * time.Second))
		for d.State != "building" {
			if time.Now().After(deadline) || d.State != "queued" {
				t.Fatalf("deployment %s is %s; want it building", d.ID, d.State)
			}
			time.Sleep(50 * time.Millisecond)
			var out struct{ Deployment deployment }
			srv.must(t, "GET", "/apps/"+id+"/deployments/"+d.ID, nil, http.StatusOK, &out)
			d = out.Deployment
		}
		r := srv.call(t, "POST", "/apps/"+id+"/deployments", map[string]any{})
		if r.status != http.StatusConflict || r.code() != "STATE_INVALID" {
			t.Errorf("a deploy while %s builds: %d %s (%v); want 409 STATE_INVALID", d.ID, r.status, r.body, r.err)
		}
		lines, end := srv.follow(t, id, d.ID)
		if end.State != "failed" || end.code() != "BUILD_TIMEOUT" {
			t.Errorf("the endless build ended %s %s; want failed BUILD_TIMEOUT after %s; its log:\n%s", end.State, end.code(), buildTimeout, strings.Join(lines, "\n"))
		}
		for _, pid := range srv.waitNoLeftovers(10 * time.Second) {
			t.Errorf("pid %d (%s) still runs after the build timed out", pid, cmdline(pid))
		}
	})
	t.Run("app that never listens", func(t *testing.T) {
		// A command build (no virtualenv to make) fits the short build
		// timeout of this server however loaded the machine is.
		web["build"] = map[string]any{"kind": "command", "context": ".", "command": "true"}
		// Port 0: the runtime picks a free port, which nothing will take.
		web["run"] = map[string]any{"command": []string{"python", "-c", "import time; print('not listening', flush=True); time.sleep(3600)"}}
		rev := srv.newRevision(t, id, doc)
		d := srv.deploy(t, id, rev)
		lines, end := srv.follow(t, id, d.ID)
		t.Logf("the deploy of an app that never listens ended %s %s; its log:\n%s", end.State, end.code(), strings.Join(lines, "\n"))
		if end.State != "failed" || end.code() != "STATE_APP_EXITED" {
			t.Errorf("it ended %s %s; want failed STATE_APP_EXITED", end.State, end.code())
		}
		var out struct{ Deployment deployment }
		srv.must(t, "GET", "/apps/"+id+"/deployments/"+d.ID, nil, http.StatusOK, &out)
		if out.Deployment.ErrorMessage == nil || *out.Deployment.ErrorMessage == "" {
			t.Errorf("the failed deployment has no error message: %+v", out.Deployment)
		}
		if st := srv.status(t, id); st.State != "draft" {
			t.Errorf("after a first deploy failed the app is %s; want draft", st.State)
		}
		for _, pid := range srv.waitNoLeftovers(10 * time.Second) {
			t.Errorf("pid %d (%s) still runs after its deploy failed", pid, cmdline(pid))
		}
	})
}
