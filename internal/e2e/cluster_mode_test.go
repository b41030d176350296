package e2e

import (
	"bufio"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/svchost/svc/internal/testserver"
	"github.com/svchost/svc/internal/vaulttest"
)

// fakes is the process of internal/e2e/testdata/fakes: the fake Nomad
// (behind a proxy that records job registrations), the fake Consul its
// client registers the allocations' services with, and a debug listener.
type fakes struct {
	Nomad  string `json:"nomad"`
	Consul string `json:"consul"`
	Debug  string `json:"debug"`
	// Dir is the fake Nomad's data directory (its node's dynamic host
	// volumes are under volumes/).
	Dir string `json:"-"`
}

// startFakes builds and starts the fakes program with templates reading
// the Vault v, and returns its addresses. It is stopped when the test ends.
func startFakes(t *testing.T, v *vaulttest.Server) fakes {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "fakes")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "internal/e2e/testdata/fakes")).CombinedOutput(); err != nil {
		t.Fatalf("go build testdata/fakes: %v\n%s", err, out)
	}
	logFile, err := os.Create(filepath.Join(t.TempDir(), "fakes.log"))
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "nomad")
	cmd := exec.Command(bin, "-dir", dataDir, "-vault-addr", v.Addr, "-vault-token", v.RootToken)
	cmd.Stderr = logFile
	cmd.SysProcAttr = procAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = stdin.Close() // the fakes stop their allocations and exit
		select {
		case <-exited:
		case <-time.After(scaled(30 * time.Second)):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("the fakes did not exit within %s of their stdin closing", scaled(30*time.Second))
		}
		_ = logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("fakes: log tail:\n%s", lastLines(string(b), 40))
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var f fakes
	select {
	case l, ok := <-lines:
		if !ok || json.Unmarshal([]byte(l), &f) != nil || f.Nomad == "" || f.Consul == "" || f.Debug == "" {
			t.Fatalf("the fakes printed %q; want their addresses as JSON", l)
		}
	case <-time.After(scaled(30 * time.Second)):
		t.Fatal("the fakes printed no addresses within 30s")
	}
	f.Dir = dataDir
	return f
}

// get reads one of the fakes' debug endpoints.
func (f fakes) get(t *testing.T, path string) []byte {
	t.Helper()
	resp, err := http.Get(f.Debug + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", f.Debug, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s%s: %d %v", f.Debug, path, resp.StatusCode, err)
	}
	return b
}

// registration is one job registration the fake Nomad answered.
type registration struct {
	JobID             string `json:"job_id"`
	EnforceIndex      bool   `json:"enforce_index"`
	JobModifyIndex    uint64 `json:"job_modify_index"`
	Status            int    `json:"status"`
	AnswerModifyIndex uint64 `json:"answer_modify_index"`
}

func (f fakes) registrations(t *testing.T) []registration {
	t.Helper()
	var regs []registration
	mustJSON(t, f.get(t, "/registrations"), &regs)
	return regs
}

// checkRegistrations checks that every registration enforced the modify
// index it had seen, and that each job's accepted registrations form one
// chain: each expected the index the previous one produced (0 for the
// first), so no two controllers ever both wrote from the same version.
func checkRegistrations(t *testing.T, regs []registration) {
	t.Helper()
	last := map[string]uint64{}
	for i, r := range regs {
		if !r.EnforceIndex {
			t.Errorf("registration %d of %s did not enforce the modify index: %+v", i, r.JobID, r)
		}
		if r.Status != http.StatusOK {
			continue
		}
		if r.JobModifyIndex != last[r.JobID] {
			t.Errorf("registration %d of %s was accepted expecting index %d, but the job was at %d: %+v", i, r.JobID, r.JobModifyIndex, last[r.JobID], r)
		}
		if r.AnswerModifyIndex <= last[r.JobID] {
			t.Errorf("registration %d of %s: modify index went from %d to %d", i, r.JobID, last[r.JobID], r.AnswerModifyIndex)
		}
		last[r.JobID] = r.AnswerModifyIndex
	}
}

// dirArchive is the tar.gz of a directory under internal/e2e/testdata.
func dirArchive(t *testing.T, name string) archive {
	t.Helper()
	return dirTarGz(t, filepath.Join("testdata", name))
}

// configureClusterMode configures, through the API, the vault secrets
// adapter, the nomad runtime on the fake Nomad (raw_exec, services in
// Consul, secrets from the same Vault) and the consul routes adapter on
// the fake Consul, and restarts the server to load them.
func configureClusterMode(t *testing.T, s *appServer, v *vaulttest.Server, f fakes, artifactURL string, others ...*proc) {
	t.Helper()
	const prefix = "cm"
	add := func(body map[string]any) {
		t.Helper()
		s.must(t, "POST", "/adapters", body, http.StatusCreated, nil)
	}
	add(map[string]any{"category": "secrets", "kind": "vault",
		"config": map[string]string{"address": v.Addr, "prefix": prefix}, "credentials": map[string]string{"token": v.RootToken}})
	add(map[string]any{"category": "runtime", "kind": "nomad",
		"config": map[string]string{"address": f.Nomad, "driver": "raw_exec", "service_provider": "consul",
			"artifact_url": artifactURL, "vault_mount": "secret", "vault_prefix": prefix,
			// The fake node has a core's worth of MHz per core: a build
			// asks for less than the default, beside the running app.
			"build_cpu_millis": "250", "build_memory_mb": "512"}})
	add(map[string]any{"category": "routes", "kind": "consul", "config": map[string]string{"address": f.Consul}})

	var list struct {
		Items []struct {
			AdapterID string  `json:"adapter_id"`
			Category  string  `json:"category"`
			Kind      string  `json:"kind"`
			Primary   bool    `json:"primary"`
			Loaded    bool    `json:"loaded"`
			Error     *string `json:"error"`
		} `json:"items"`
		StartedAt time.Time `json:"started_at"`
	}
	s.must(t, "GET", "/adapters", nil, http.StatusOK, &list)
	for _, n := range others {
		before, err := healthStartedAt(n.Base())
		if err != nil {
			t.Fatalf("%s: %v", n.name, err)
		}
		if r := send(n, "POST", n.Base()+"/api/v1/restart", nil); r.err != nil || r.status != http.StatusAccepted {
			t.Fatalf("%s: POST /restart: %d %s (%v)", n.name, r.status, r.body, r.err)
		}
		waitRestarted(t, n, before)
	}
	s.must(t, "POST", "/restart", nil, http.StatusAccepted, nil)
	waitRestarted(t, s.p, list.StartedAt)
	waitClusterAdapters(t, s)
}

// waitClusterAdapters waits until the server has loaded the vault, nomad
// and consul adapters as its primaries.
func waitClusterAdapters(t *testing.T, s *appServer) {
	t.Helper()
	var list struct {
		Items []struct {
			Category string `json:"category"`
			Kind     string `json:"kind"`
			Primary  bool   `json:"primary"`
			Loaded   bool   `json:"loaded"`
		} `json:"items"`
	}
	want := map[string]string{"secrets": "vault", "runtime": "nomad", "routes": "consul"}
	deadline := time.Now().Add(scaled(30 * time.Second))
	for {
		s.must(t, "GET", "/adapters", nil, http.StatusOK, &list)
		ok := 0
		for _, it := range list.Items {
			if it.Primary && it.Loaded && want[it.Category] == it.Kind {
				ok++
			}
		}
		if ok == len(want) {
			return
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(list.Items)
			t.Fatalf("after the restart the adapters are %s; want vault, nomad and consul loaded and primary", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestClusterModeDeploysOnNomadWithConsulRoutesAndVaultSecrets runs the
// real binary against the fake Nomad and the fake Consul with a real
// Vault: configured through the API and restarted, svc deploys an app as
// a Nomad job, the app answers through the edge once its service passes
// in Consul, the X-Svc-Assertion it receives verifies against svc's JWKS
// for its own ID, and its secret reaches it through the job's Vault
// template while appearing neither in Nomad's stored state nor in svc's
// log.
func TestClusterModeDeploysOnNomadWithConsulRoutesAndVaultSecrets(t *testing.T) {
	v := vaulttest.Start(t)
	f := startFakes(t, v)
	first, err := testserver.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	s := startAppServer(t, "cluster-mode", "SVC_APP_PORT_START="+strconv.Itoa(first), "SVC_APP_PORT_END="+strconv.Itoa(first+2))
	// An app whose secret was set while the built-in secrets adapter was
	// the primary one: Nomad's workloads read theirs from Vault.
	early := s.onboardDir(t, "Early app", "clusterapp", "python", map[string]any{"key": "APP_SECRET", "value": "early-" + randomHex(t), "secret": true})
	configureClusterMode(t, s, v, f, s.p.Base())
	checkBuiltinSecretRefused(t, s, early)

	secret := "cm-secret-" + randomHex(t) + randomHex(t)
	id := s.onboardDir(t, "Cluster app", "clusterapp", "python", map[string]any{"key": "APP_SECRET", "value": secret, "secret": true})
	d := s.deploy(t, id, 0)
	lines, end := s.follow(t, id, d.ID)
	if end.State != "succeeded" {
		t.Fatalf("deployment %s on the nomad runtime ended %s %s; its log:\n%s", d.ID, end.State, end.code(), strings.Join(lines, "\n"))
	}

	// The job is in Nomad, svc's, for this app.
	var state struct {
		Jobs map[string]struct {
			ID   string
			Name string
			Meta map[string]string
		}
	}
	raw := f.get(t, "/state")
	mustJSON(t, raw, &state)
	found := false
	for _, j := range state.Jobs {
		if j.Meta["app_id"] == id && j.Meta["deployment_id"] == d.ID && j.Meta["managed_by"] == "svc" {
			found = true
			if j.Meta["spec_revision"] != strconv.Itoa(d.Revision) || j.Meta["spec_id"] == "" || j.ID != "svc-cluster-app" || j.Name != "Cluster app" {
				t.Errorf("job %s (name %q) meta %v: want the app's one job svc-<slug>, named after the app, with the spec revision %d and its ID", j.ID, j.Name, j.Meta, d.Revision)
			}
		}
		if strings.Contains(j.ID, "-build-") {
			t.Errorf("build job %s is still in Nomad after the deploy", j.ID)
		}
	}
	if !found {
		t.Fatalf("the fake Nomad holds no job of app %s, deployment %s: %s", id, d.ID, lastLines(string(raw), 5))
	}
	checkRegistrations(t, f.registrations(t))

	// The app answers through the edge at its url, once Consul passes it.
	var got struct {
		App struct {
			URL *string `json:"url"`
		} `json:"app"`
	}
	s.must(t, "GET", "/apps/"+id, nil, http.StatusOK, &got)
	if got.App.URL == nil {
		t.Fatalf("the app has no url")
	}
	appURL := *got.App.URL
	var echo struct {
		App     string             `json:"app"`
		Headers map[string]string  `json:"headers"`
		Env     map[string]*string `json:"env"`
	}
	deadline := time.Now().Add(scaled(30 * time.Second))
	for {
		r := send(s.p, "GET", appURL+"echo?env=APP_SECRET", nil)
		if r.err == nil && r.status == http.StatusOK && json.Unmarshal(r.body, &echo) == nil && echo.App == "clusterapp" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %secho through the edge: %d %q (%v) within %s; want the app's echo", appURL, r.status, r.body, r.err, scaled(30*time.Second))
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The route came from the fake Nomad's client: the app's service is in
	// Consul as Nomad registers it.
	checkNomadRegistered(t, f, id)

	// The assertion verifies against svc's JWKS, for this app.
	tok := echo.Headers["X-Svc-Assertion"]
	if tok == "" {
		t.Fatalf("the app received no X-Svc-Assertion; headers: %v", echo.Headers)
	}
	keys := jwks(t, s.p.Base()+"/.well-known/jwks.json")
	claims := jwt.MapClaims{}
	parsed, err := jwt.ParseWithClaims(tok, claims, func(tk *jwt.Token) (any, error) {
		kid, _ := tk.Header["kid"].(string)
		k, ok := keys[kid]
		if !ok {
			return nil, fmt.Errorf("kid %q is not in the JWKS", kid)
		}
		return k, nil
	}, jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithAudience(id), jwt.WithExpirationRequired())
	if err != nil || !parsed.Valid {
		t.Fatalf("the assertion the app received does not verify for aud %s: %v (claims %v)", id, err, claims)
	}
	if sub, _ := claims["sub"].(string); !strings.HasPrefix(sub, "usr_") {
		t.Errorf("the assertion's sub is %q; want the admin's usr_ ID", sub)
	}

	// The secret reached the app through the Vault template, and nowhere
	// else.
	if v := echo.Env["APP_SECRET"]; v == nil || *v != secret {
		t.Fatalf("the app's APP_SECRET is %v; want the accepted secret value", echo.Env["APP_SECRET"])
	}
	if strings.Contains(string(f.get(t, "/state")), secret) {
		t.Errorf("the secret value is in the fake Nomad's stored jobs or allocations")
	}
	if strings.Contains(s.p.logText(), secret) {
		t.Errorf("the secret value is in svc's log")
	}
	st := s.status(t, id)
	if st.State != "running" {
		t.Logf("note: the app's status after the deploy: %s", st)
	}
}

// checkNomadRegistered checks that Consul holds the app's primary service
// as Nomad's client registers an allocation's service: its ID
// _nomad-task-<alloc>-…, meta external-source=nomad with the app's ID, and
// a passing check whose ID is _nomad-check-<hash>.
func checkNomadRegistered(t *testing.T, f fakes, appID string) {
	t.Helper()
	getJSON := func(path string, out any) {
		t.Helper()
		resp, err := http.Get(f.Consul + path)
		if err != nil {
			t.Fatalf("GET %s%s: %v", f.Consul, path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s%s: %d %v", f.Consul, path, resp.StatusCode, err)
		}
		mustJSON(t, b, out)
	}
	var services map[string][]string
	getJSON("/v1/catalog/services", &services)
	for name, tags := range services {
		if !slices.Contains(tags, "svc-app="+appID) {
			continue
		}
		var entries []struct {
			Service struct {
				ID   string
				Meta map[string]string
			}
			Checks []struct{ CheckID, Status string }
		}
		getJSON("/v1/health/service/"+name+"?passing=1", &entries)
		for _, e := range entries {
			if !strings.HasPrefix(e.Service.ID, "_nomad-task-") || e.Service.Meta["external-source"] != "nomad" || e.Service.Meta["app_id"] != appID {
				continue
			}
			for _, c := range e.Checks {
				if strings.HasPrefix(c.CheckID, "_nomad-check-") && c.Status == "passing" {
					return
				}
			}
		}
		t.Fatalf("Consul's %s has no passing instance registered as Nomad registers one: %+v", name, entries)
	}
	t.Fatalf("Consul lists no service of app %s: %v", appID, services)
}

// onboardDir creates an app from a directory of testdata, waits for
// detection, checks its winner and accepts the proposal with values.
func (s *appServer) onboardDir(t *testing.T, name, dir, detector string, values ...map[string]any) string {
	t.Helper()
	id := s.createApp(t, name)
	s.must(t, "POST", "/apps/"+id+"/source", dirArchive(t, dir), http.StatusAccepted, nil)
	var det struct {
		Status string `json:"status"`
		Winner *struct {
			Detector string `json:"detector"`
		} `json:"winner"`
	}
	deadline := time.Now().Add(scaled(30 * time.Second))
	for det.Status != "done" && det.Status != "failed" {
		if time.Now().After(deadline) {
			t.Fatalf("detection of %s: still %q after %s", dir, det.Status, scaled(30*time.Second))
		}
		time.Sleep(100 * time.Millisecond)
		s.must(t, "GET", "/apps/"+id+"/detection", nil, http.StatusOK, &det)
	}
	if det.Winner == nil || det.Winner.Detector != detector {
		t.Fatalf("detection of %s: %+v; want the %s detector to win", dir, det, detector)
	}
	s.must(t, "POST", "/apps/"+id+"/detection/accept", map[string]any{"values": values}, http.StatusCreated, nil)
	return id
}

// jwks fetches a JSON Web Key Set of Ed25519 keys, by kid.
func jwks(t *testing.T, u string) map[string]ed25519.PublicKey {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	var set struct {
		Keys []struct {
			Kty, Crv, Kid, X, Alg string
		} `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", u, resp.StatusCode, err)
	}
	out := map[string]ed25519.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" {
			continue
		}
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			t.Fatalf("JWKS key %s: bad x", k.Kid)
		}
		out[k.Kid] = ed25519.PublicKey(x)
	}
	if len(out) == 0 {
		t.Fatalf("GET %s: no Ed25519 key", u)
	}
	return out
}

// TestClusterModeLeaderKillMidDeploy runs three svc nodes sharing one fake
// Nomad, kills the leader (SIGKILL) while a deploy is under way, and checks
// that the deploy ends (succeeded, or cleanly failed; never stuck) under
// the new leader, and that Nomad never accepted two registrations of one
// job version (every registration enforced the index it had seen, and the
// accepted ones form one chain per job).
func TestClusterModeLeaderKillMidDeploy(t *testing.T) {
	v := vaulttest.Start(t)
	f := startFakes(t, v)
	nodes := startCluster(t, "e2e-cm-secret-0123456789", "e2e-cm-secret-0123456789", "e2e-cm-secret-0123456789")
	leader := waitLeader(t, nodes, scaled(30*time.Second))
	var others []*proc
	for _, n := range nodes {
		if n != leader {
			others = append(others, n)
		}
	}
	s := &appServer{p: leader}
	// The artifact URL is one replicated setting: a load balancer over
	// the svc servers, as an operator would run, so that it stays up when
	// the leader is killed. Sources and builds then reach whichever server
	// it picks, and cross between the servers.
	configureClusterMode(t, s, v, f, balancer(t, nodes), others...)
	leader = waitLeader(t, nodes, scaled(30*time.Second))
	s = &appServer{p: leader}
	for _, n := range nodes {
		waitClusterAdapters(t, &appServer{p: n})
	}

	id := s.onboardDir(t, "Cluster app", "clusterapp", "python", map[string]any{"key": "APP_SECRET", "value": "x-" + randomHex(t), "secret": true})
	// A first deploy, through the follower's artifact URL: the source the
	// leader packed reaches the build job through the follower, and the
	// build the job uploads to the follower reaches the leader, both over
	// the cluster port.
	first := s.deployed(t, id, 0)
	// Every node pulls a copy of the app's source checkout and of the
	// release's build: whichever becomes leader can build and run without
	// the node that took the upload or built it.
	firstCheckout := map[string]string{}
	for _, n := range nodes {
		current := filepath.Join(envValue(n.env, "SVC_SERVER_WORK_DIR"), "apps", id, "source", "current")
		for deadline := time.Now().Add(scaled(90 * time.Second)); ; time.Sleep(200 * time.Millisecond) {
			if _, err := os.Stat(current); err == nil {
				firstCheckout[n.name], _ = os.Readlink(current)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s holds no copy of the app's source after %s", n.name, scaled(90*time.Second))
			}
		}
	}
	for _, n := range nodes {
		pattern := filepath.Join(envValue(n.env, "SVC_SERVER_WORK_DIR"), "runtime", "nomad-artifacts", first.ID+"-*.tar.gz")
		for deadline := time.Now().Add(scaled(90 * time.Second)); ; time.Sleep(200 * time.Millisecond) {
			if m, _ := filepath.Glob(pattern); len(m) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s holds no copy of deployment %s's build after %s", n.name, first.ID, scaled(90*time.Second))
			}
		}
	}
	var rev struct {
		Spec struct {
			Spec specDoc `json:"spec"`
		} `json:"spec"`
	}
	s.must(t, "GET", fmt.Sprintf("/apps/%s/specs/%d", id, first.Revision), nil, http.StatusOK, &rev)
	doc := rev.Spec.Spec
	env, _ := doc["env"].(map[string]any)
	if env == nil {
		env = map[string]any{}
		doc["env"] = env
	}
	env["SECOND"] = "yes"
	// The second deploy (a new revision of new source: a new build; an
	// env change alone would start the kept build) is interrupted by the
	// leader's death.
	v2 := filepath.Join(t.TempDir(), "clusterapp")
	if err := os.CopyFS(v2, os.DirFS(filepath.Join("testdata", "clusterapp"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v2, "VERSION"), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var up struct {
		CheckoutID string `json:"checkout_id"`
	}
	s.must(t, "POST", "/apps/"+id+"/source", dirTarGz(t, v2), http.StatusAccepted, &up)
	// Every node pulls the new source before the leader dies: the node
	// that took the upload is the one killed.
	for _, n := range nodes {
		current := filepath.Join(envValue(n.env, "SVC_SERVER_WORK_DIR"), "apps", id, "source", "current")
		for deadline := time.Now().Add(scaled(90 * time.Second)); ; time.Sleep(200 * time.Millisecond) {
			if target, err := os.Readlink(current); err == nil && (up.CheckoutID == "" || filepath.Base(target) == up.CheckoutID) && target != firstCheckout[n.name] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s holds no copy of the app's new source after %s", n.name, scaled(90*time.Second))
			}
		}
	}
	rev2 := s.newRevision(t, id, doc)
	d := s.deploy(t, id, rev2)
	var dep struct{ Deployment deployment }
	deadline := time.Now().Add(scaled(60 * time.Second))
	for {
		s.must(t, "GET", "/apps/"+id+"/deployments/"+d.ID, nil, http.StatusOK, &dep)
		if dep.Deployment.State != "queued" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deployment %s still queued after %s", d.ID, scaled(60*time.Second))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// buildGone says whether the fake Nomad has no build job of the
	// deployment.
	buildGone := func() bool {
		resp, err := http.Get(f.Nomad + "/v1/jobs?meta=true")
		if err != nil {
			t.Fatalf("list the fake nomad's jobs: %v", err)
		}
		defer resp.Body.Close()
		var jobs []struct{ Meta map[string]string }
		if err := json.NewDecoder(resp.Body).Decode(&jobs); err != nil {
			t.Fatalf("list the fake nomad's jobs: %v", err)
		}
		for _, j := range jobs {
			if strings.HasPrefix(j.Meta["build_id"], d.ID+"-") {
				return false
			}
		}
		return true
	}
	// Kill the leader once its build job runs in Nomad.
	for deadline := time.Now().Add(scaled(60 * time.Second)); buildGone(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("deployment %s registered no build job in %s", d.ID, scaled(60*time.Second))
		}
	}
	t.Logf("killing the leader %s with the deployment %s", leader.name, dep.Deployment.State)
	leader.kill()
	var rest []*proc
	for _, n := range nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	next := waitLeader(t, rest, scaled(30*time.Second))
	s = &appServer{p: next}
	deadline = time.Now().Add(scaled(4 * time.Minute))
	var seen []string
	for {
		r := s.call(t, "GET", "/apps/"+id+"/deployments/"+d.ID, nil)
		if r.err == nil && r.status == http.StatusOK {
			mustJSON(t, r.body, &dep)
			if len(seen) == 0 || seen[len(seen)-1] != dep.Deployment.State {
				seen = append(seen, dep.Deployment.State)
			}
			if dep.Deployment.State == "succeeded" || dep.Deployment.State == "failed" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("deployment %s not finished %s after the leader was killed; states seen under %s: %v", d.ID, scaled(4*time.Minute), next.name, seen)
		}
		time.Sleep(200 * time.Millisecond)
	}
	b, _ := json.Marshal(dep.Deployment)
	t.Logf("after the leader kill the deployment ended: %s (states seen %v)", b, seen)
	regs := f.registrations(t)
	if len(regs) == 0 && dep.Deployment.State == "succeeded" {
		t.Errorf("the deployment succeeded but the fake Nomad saw no registration")
	}
	checkRegistrations(t, regs)
	// The build the dead leader registered is purged by the new one.
	for deadline := time.Now().Add(scaled(time.Minute)); !buildGone(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the interrupted deployment's build job is still in nomad %s later", scaled(time.Minute))
		}
	}
	// The new leader deploys the first revision again, of the app's
	// source now (the new upload): a build from the copy of the source
	// every node pulled, since the node that took the upload is dead.
	again := s.deploy(t, id, first.Revision)
	lines, end := s.follow(t, id, again.ID)
	if end.State != "succeeded" {
		t.Errorf("redeploy of revision %d under %s ended %s %s, want succeeded; log:\n%s",
			first.Revision, next.name, end.State, end.code(), strings.Join(lines, "\n"))
	}
	// The new leader builds the interrupted revision from its own copy of
	// the source.
	s.deployed(t, id, rev2)
	// A rollback ships the release before, the redeploy's, starting its
	// kept build: nothing is built.
	var rb struct {
		Deployment deployment `json:"deployment"`
	}
	s.must(t, "POST", "/apps/"+id+"/deployments/rollback", map[string]any{}, http.StatusAccepted, &rb)
	lines, end = s.follow(t, id, rb.Deployment.ID)
	if end.State != "succeeded" || !strings.Contains(strings.Join(lines, "\n"), "nothing to build") || strings.Contains(strings.Join(lines, "\n"), "building workload") {
		t.Errorf("rollback under %s ended %s %s, want succeeded from the kept build; log:\n%s", next.name, end.State, end.code(), strings.Join(lines, "\n"))
	}
	// The killed node comes back: its runtime kills the build the dead
	// process left running (and the test's directories can go).
	leader.restart()
	leader.waitReady(scaled(60 * time.Second))
	for _, n := range nodes {
		w := &appServer{p: n, work: envValue(n.env, "SVC_SERVER_WORK_DIR")}
		for _, pid := range w.waitNoLeftovers(20 * time.Second) {
			t.Errorf("%s: pid %d (%s) still runs under its work dir after the node came back", n.name, pid, cmdline(pid))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// balancer is a load balancer in front of the svc servers: each request
// goes to the first of them, in a rotating order, that accepts a
// connection.
func balancer(t *testing.T, nodes []*proc) string {
	t.Helper()
	var next atomic.Uint64
	pick := func() *url.URL {
		start := int(next.Add(1))
		for i := range nodes {
			n := nodes[(start+i)%len(nodes)]
			u, err := url.Parse(n.Base())
			if err != nil {
				continue
			}
			if c, err := net.DialTimeout("tcp", u.Host, 200*time.Millisecond); err == nil {
				c.Close()
				return u
			}
		}
		return &url.URL{Scheme: "http", Host: "127.0.0.1:1"}
	}
	lb := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(pick()) }})
	t.Cleanup(lb.Close)
	return lb.URL
}

// checkBuiltinSecretRefused: on the nomad runtime, a plan of an app whose
// secret the built-in adapter holds is refused, naming the secret and the
// fix, and so is its deploy (nothing is created); set again while vault is
// the primary secrets adapter, the secret no longer stands in the way.
func checkBuiltinSecretRefused(t *testing.T, s *appServer, appID string) {
	t.Helper()
	var p struct {
		Deployable bool `json:"deployable"`
		Refusals   []struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Remedy  string         `json:"remedy"`
			Details map[string]any `json:"details"`
		} `json:"refusals"`
	}
	s.must(t, "POST", "/apps/"+appID+"/plan", map[string]any{}, http.StatusOK, &p)
	found := false
	for _, r := range p.Refusals {
		if r.Code == "PLAN_CAPABILITY_UNSUPPORTED" && strings.Contains(r.Message, "APP_SECRET") && strings.Contains(r.Remedy, "vault") {
			found = true
		}
	}
	if p.Deployable || !found {
		t.Fatalf("plan on nomad of a secret the built-in adapter holds = %+v; want refused naming APP_SECRET and vault", p)
	}
	if r := s.call(t, "POST", "/apps/"+appID+"/deployments", map[string]any{}); r.status/100 != 4 || !strings.Contains(string(r.body), "PLAN_CAPABILITY_UNSUPPORTED") {
		t.Fatalf("deploy of it: %d %s; want refused with PLAN_CAPABILITY_UNSUPPORTED", r.status, r.body)
	}
	s.must(t, "PUT", "/apps/"+appID+"/secrets/APP_SECRET", map[string]any{"value": "again-" + randomHex(t)}, http.StatusOK, nil)
	s.must(t, "POST", "/apps/"+appID+"/plan", map[string]any{}, http.StatusOK, &p)
	for _, r := range p.Refusals {
		if r.Code == "PLAN_CAPABILITY_UNSUPPORTED" {
			t.Fatalf("plan after the secret was set again in vault still refuses: %+v", r)
		}
	}
}
