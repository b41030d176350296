package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/api"
	"github.com/svchost/svc/internal/testserver"
)

// hostileReport is what samples/hostile found (its Report).
type hostileReport struct {
	UID       int               `json:"uid"`
	Read      map[string]string `json:"read"`
	Exists    map[string]bool   `json:"exists"`
	Dial      map[string]string `json:"dial"`
	Processes int               `json:"processes"`
	Canary    bool              `json:"canary_found"`
	Env       []string          `json:"env"`
}

// TestHostileAppIsSandboxed deploys samples/hostile as a member (who may
// create and deploy apps and nothing more) beside another person's app
// holding a secret, on the embedded defaults, and reads what it reached,
// running and in its build step: not svc's work directory (key file,
// store, the other app's source), not svc's process nor its environment
// (which holds the admin password), not the other app's secret, process
// or port, not svc's API port, not the host's secrets; its workload
// listens on no non-loopback address of the host; and it still serves
// through the edge.
func TestHostileAppIsSandboxed(t *testing.T) {
	first, err := testserver.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	srv := startAppServer(t, "sandbox", "SVC_APP_PORT_START="+strconv.Itoa(first), "SVC_APP_PORT_END="+strconv.Itoa(first+2))
	svcPID := srv.p.current().cmd.Process.Pid
	api0, _ := url.Parse(srv.p.Base())

	// Another person's app, with a secret.
	victimSecret := "victim-secret-" + randomHex(t)
	victim, _ := srv.onboard(t, "victim", "go-hello", "go", helloValues("hi", victimSecret)...)
	d := srv.deploy(t, victim, 0)
	if lines, end := srv.follow(t, victim, d.ID); end.State != "succeeded" {
		t.Fatalf("the victim's deploy ended %s %s:\n%s", end.State, end.code(), strings.Join(lines, "\n"))
	}
	victimAddr := srv.waitDeployed(t, victim)

	// A member: may create apps, nothing of the installation.
	const pw = "mallory-password-0c9e2b"
	var created struct{ User struct{ ID string } }
	srv.must(t, "POST", "/users", map[string]any{"username": "mallory", "display_name": "Mallory", "password": pw, "must_change_password": false}, http.StatusCreated, &created)
	srv.must(t, "PUT", "/users/"+created.User.ID+"/role", map[string]string{"role_id": "role_member"}, http.StatusOK, nil)
	c, err := api.New(srv.p.Base())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), scaled(30*time.Second))
	defer cancel()
	if _, err := c.SignIn(ctx, "mallory", pw); err != nil {
		t.Fatalf("mallory signs in: %v", err)
	}
	_, secret, err := c.CreateToken(ctx, api.NewToken{Name: "mallory"}, false)
	if err != nil {
		t.Fatal(err)
	}
	mallory := srv.asToken(secret)
	if r := mallory.call(t, "GET", "/users", nil); r.status != http.StatusForbidden {
		t.Fatalf("mallory lists accounts: %d %s; want 403 (a member)", r.status, r.body)
	}

	// What the hostile app tries: svc's files, svc's process, the other
	// app's port and svc's own, and both secrets.
	reads := []string{
		filepath.Join(srv.work, "keyring", "kek"),
		filepath.Join(srv.work, "raft", "raft.db"),
		filepath.Join(srv.work, "apps", victim, "source", "current", "main.go"),
		"/proc/" + strconv.Itoa(svcPID) + "/environ",
		"/etc/shadow",
	}
	dials := []string{victimAddr, "127.0.0.1:" + api0.Port(), "127.0.0.1:" + strconv.Itoa(first)}
	canaries := []string{adminPassword, victimSecret}
	var halvesA, halvesB []string
	for _, c := range canaries {
		halvesA, halvesB = append(halvesA, c[:len(c)/2]), append(halvesB, c[len(c)/2:])
	}
	probeEnv := map[string]string{
		"PROBE_READ": strings.Join(reads, ","),
		// The work directory's path is there (down to the app's own files),
		// empty of everything else.
		"PROBE_EXISTS": strings.Join([]string{filepath.Join(srv.work, "keyring"), filepath.Join(srv.work, "raft"),
			filepath.Join(srv.work, "apps"), filepath.Join(srv.work, "runtime", "volumes"), "/root", "/home"}, ","),
		"PROBE_DIAL":     strings.Join(dials, ","),
		"PROBE_CANARY_A": strings.Join(halvesA, ","),
		"PROBE_CANARY_B": strings.Join(halvesB, ","),
	}
	hostile, doc := mallory.onboard(t, "hostile", "hostile", "go")
	// The build step tries the same (a build gets no environment of the
	// spec's: it is given on the command line).
	var assign []string
	env := map[string]any{}
	for k, v := range probeEnv {
		assign = append(assign, k+"="+v)
		env[k] = v
	}
	web := doc["workloads"].(map[string]any)["web"].(map[string]any)
	web["build"].(map[string]any)["command"] = "go build -o app . && " + strings.Join(assign, " ") + " ./app -report > build-report.json"
	web["env"] = env
	rev := mallory.newRevision(t, hostile, doc)
	d = mallory.deploy(t, hostile, rev)
	if lines, end := mallory.follow(t, hostile, d.ID); end.State != "succeeded" {
		t.Fatalf("the hostile app's deploy ended %s %s:\n%s", end.State, end.code(), strings.Join(lines, "\n"))
	}
	hostileAddr := mallory.waitDeployed(t, hostile)

	// Through the edge, with mallory's token: it serves.
	var app struct {
		App struct {
			URL *string `json:"url"`
		} `json:"app"`
	}
	mallory.must(t, "GET", "/apps/"+hostile, nil, http.StatusOK, &app)
	if app.App.URL == nil {
		t.Fatal("the hostile app has no url")
	}
	base := strings.TrimSuffix(*app.App.URL, "/")
	var body []byte
	deadline := time.Now().Add(scaled(30 * time.Second))
	for {
		r := sendToken(secret, "GET", base+"/", nil)
		if r.err == nil && r.status == http.StatusOK && strings.Contains(string(r.body), "hello from hostile") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s/ through the edge: %d %q %v", base, r.status, r.body, r.err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, page := range []string{"/report", "/build-report"} {
		r := sendToken(secret, "GET", base+page, nil)
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("GET %s%s through the edge: %d %q %v", base, page, r.status, r.body, r.err)
		}
		body = r.body
		var rep hostileReport
		if err := json.Unmarshal(body, &rep); err != nil {
			t.Fatalf("%s: %v: %s", page, err, body)
		}
		t.Run(strings.TrimPrefix(page, "/"), func(t *testing.T) {
			if rep.UID == 0 {
				t.Errorf("the app runs as root in its namespace")
			}
			for _, p := range reads {
				if strings.HasPrefix(rep.Read[p], "ok") {
					t.Errorf("it read %s: %s", p, rep.Read[p])
				}
			}
			for p, there := range rep.Exists {
				if there {
					t.Errorf("it sees %s", p)
				}
			}
			if rep.Canary {
				t.Errorf("it found the admin password or the other app's secret in an environment it could read")
			}
			for a, res := range rep.Dial {
				if res == "ok" {
					t.Errorf("it connected to %s, around the edge", a)
				}
			}
			if len(rep.Dial) != len(dials) || len(rep.Read) != len(reads) {
				t.Errorf("the report covers %d reads and %d dials, want %d and %d: %s", len(rep.Read), len(rep.Dial), len(reads), len(dials), body)
			}
			if rep.Processes > 4 {
				t.Errorf("it sees %d processes: not only its own", rep.Processes)
			}
			for _, name := range rep.Env {
				if strings.HasPrefix(name, "SVC_") && !strings.HasPrefix(name, "SVC_VOLUME_") {
					t.Errorf("svc's setting %s reached the app's environment", name)
				}
			}
		})
	}

	// From the host: the workload listens on loopback only.
	host, port, _ := net.SplitHostPort(hostileAddr)
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		t.Errorf("the hostile workload's address is %s, not on loopback", hostileAddr)
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			if conn, err := net.DialTimeout("tcp", net.JoinHostPort(n.IP.String(), port), time.Second); err == nil {
				conn.Close()
				t.Errorf("the hostile workload answers at %s:%s, a non-loopback address of the host", n.IP, port)
			}
		}
	}
}

// TestServeSaysWhenItCannotSandbox: a server whose host cannot run the
// sandbox (here, as root, a work directory other users cannot pass
// through) says so at start and refuses every deploy with the reason; an
// operator's explicit runtime.isolation: none is shown in GET /config and
// warned about at every start.
func TestServeSaysWhenItCannotSandbox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a server running as root switches users, which a closed work directory stops (CI runs as root)")
	}
	for _, tc := range []struct {
		name, isolation, log string
	}{
		{"sandbox, cannot", "", "the process runtime cannot sandbox apps on this host"},
		{"none, chosen", "none", "runtime.isolation is none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{"SVC_SERVER_ADDR=127.0.0.1:0", "SVC_SERVER_WORK_DIR=" + filepath.Join(t.TempDir(), "work")} // 0700 above it
			if tc.isolation != "" {
				env = append(env, "SVC_RUNTIME_ISOLATION="+tc.isolation)
			}
			srv := &appServer{p: newProc(t, "nosandbox", env)}
			srv.p.startServing()
			srv.p.waitReady(scaled(15 * time.Second))
			signIn(t, scaled(30*time.Second), srv.p)
			if _, ok := srv.p.waitLog(regexp.MustCompile(regexp.QuoteMeta(tc.log)), scaled(10*time.Second)); !ok {
				t.Errorf("the log does not say %q:\n%s", tc.log, srv.p.tail(20))
			}
			var cfg struct {
				Settings []struct{ Name, Value, Origin string }
			}
			srv.must(t, "GET", "/config", nil, http.StatusOK, &cfg)
			want := map[string]string{"": "sandbox default", "none": "none environment"}[tc.isolation]
			for _, s := range cfg.Settings {
				if s.Name == "runtime.isolation" && s.Value+" "+s.Origin != want {
					t.Errorf("GET /config: runtime.isolation %s (%s), want %s", s.Value, s.Origin, want)
				}
			}
			if tc.isolation == "" {
				id, _ := srv.onboard(t, "nosandbox", "static-hello", "static")
				r := srv.call(t, "POST", "/apps/"+id+"/deployments", map[string]any{})
				if r.status != http.StatusConflict || !strings.Contains(string(r.body), "PLAN_CAPABILITY_UNSUPPORTED") || !strings.Contains(string(r.body), "runtime.isolation: none") {
					t.Errorf("a deploy without a sandbox: %d %s; want PLAN_CAPABILITY_UNSUPPORTED with the remedy", r.status, r.body)
				}
			}
		})
	}
}
