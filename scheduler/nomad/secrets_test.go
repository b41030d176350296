package nomad_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/internal/vaulttest"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad"
	"github.com/svchost/svc/scheduler/nomad/fakenomad"
	"github.com/svchost/svc/vaultsecrets"
)

// secretValue is a secret with what breaks naive quoting: quotes, a
// newline, a dollar sign, a backslash and non-ASCII.
const secretValue = "s3cr3t-\"value\"\nline two $HOME \\ é"

// secretWorkload prints the SHA-256 of its DB_PASSWORD (never the value)
// and waits.
var secretWorkload = []string{"sh", "-c", `printf %s "$DB_PASSWORD" | sha256sum | sed 's/ .*//; s/^/secret-sha=/'; echo plain=$PLAIN; exec sleep 1000`}

// TestSecretsThroughVault: a workload's secret reaches it through the
// job's Vault template block, read from Vault by the (fake) Nomad client,
// and its value is nowhere else: not in the registered job, not in
// Nomad's state, not in the logs.
func TestSecretsThroughVault(t *testing.T) {
	for _, src := range []string{"vault", "map"} {
		t.Run(src, func(t *testing.T) {
			t.Parallel()
			path := "secret/data/svc/apps/app-s/db_password"
			var vaultReads atomic.Int32
			e := newEnv(t, options{fake: func(c *fakenomad.Config) {
				if src == "map" {
					c.Secrets = map[string]map[string]any{path: {"value": secretValue}}
					return
				}
				vault := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Header.Get("X-Vault-Token") != "workload-token" || r.URL.Path != "/v1/"+path {
						http.Error(w, `{"errors":[]}`, http.StatusNotFound)
						return
					}
					vaultReads.Add(1)
					_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{
						"data": map[string]any{"value": secretValue}, "metadata": map[string]any{"version": 3}}})
				}))
				t.Cleanup(vault.Close)
				c.Vault = &fakenomad.Vault{Address: vault.URL, Token: "workload-token"}
			}})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			art := buildTrue(ctx, t, e)
			job := scheduler.Job{ID: "job-secret", AppID: "app-s", Workloads: map[string]scheduler.Task{"web": {
				Artifact:  art,
				Command:   secretWorkload,
				Env:       map[string]string{"DB_PASSWORD": secretValue, "PLAIN": "visible"},
				SecretEnv: map[string]string{"DB_PASSWORD": "db_password"},
				NoPort:    true,
			}}}
			if _, err := e.rt.Run(ctx, job); err != nil {
				t.Fatalf("run: %v", err)
			}
			t.Cleanup(func() { _ = e.rt.Stop(context.Background(), job.ID) })

			sum := sha256.Sum256([]byte(secretValue))
			want := "secret-sha=" + hex.EncodeToString(sum[:])
			var lines []string
			waitUntil(t, "the workload's proof of its secret", func() bool {
				var err error
				lines, err = e.rt.Logs(ctx, job.ID, "web")
				return err == nil && strings.Contains(strings.Join(lines, "\n"), want)
			})
			if !strings.Contains(strings.Join(lines, "\n"), "plain=visible") {
				t.Errorf("logs = %q, want the plain variable too", lines)
			}
			if src == "vault" && vaultReads.Load() == 0 {
				t.Errorf("the secret did not come from Vault")
			}

			// The registered job: the template names the path, never the value.
			body := getBody(t, e.fake.URL()+"/v1/jobs?meta=true")
			var stubs []struct{ ID string }
			_ = json.Unmarshal([]byte(body), &stubs)
			if len(stubs) != 1 {
				t.Fatalf("jobs = %s, want one", body)
			}
			jobJSON := getBody(t, e.fake.URL()+"/v1/job/"+stubs[0].ID)
			if !strings.Contains(jobJSON, path) {
				t.Errorf("the registered job does not read %s from Vault: %s", path, jobJSON)
			}
			for what, text := range map[string]string{
				"the registered job": jobJSON,
				"nomad's state":      string(e.fake.State()),
				"the logs":           strings.Join(lines, "\n"),
			} {
				assertNoSecret(t, what, text)
			}
			// Nor in any log file the (fake) client keeps on disk.
			_ = filepath.WalkDir(e.fakeData, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() && strings.HasSuffix(p, ".log") {
					b, _ := os.ReadFile(p)
					assertNoSecret(t, p, string(b))
				}
				return nil
			})
		})
	}
}

// buildCommandTrue is a command build that builds nothing.
var buildCommandTrue = spec.Build{Kind: spec.BuildCommand, Command: "true"}

// assertNoSecret fails if text holds the secret or a part of it.
func assertNoSecret(t *testing.T, what, text string) {
	t.Helper()
	jsonQuoted, _ := json.Marshal(secretValue)
	for _, needle := range []string{secretValue, "s3cr3t", string(jsonQuoted[1 : len(jsonQuoted)-1])} {
		if strings.Contains(text, needle) {
			t.Errorf("%s holds the secret's value (%q)", what, needle)
		}
	}
}

func buildTrue(ctx context.Context, t *testing.T, e *env) scheduler.Artifact {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "x.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	art, err := e.rt.Build(ctx, scheduler.BuildRequest{Source: src, Build: buildCommandTrue})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return art
}

func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b)
}

// waitUntil polls cond up to a minute (no assertion on time).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(time.Minute)
	for time.Now().Before(end) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestSlotCredentialsAreRefusedWithoutVault: without a Vault to write a
// slot's credential to (no JobSecrets, or none loaded), the credential
// could only travel in the job: the runtime refuses the task, says to
// configure the vault secrets adapter, and nothing reaches Nomad.
func TestSlotCredentialsAreRefusedWithoutVault(t *testing.T) {
	for name, jobSecrets := range map[string]func() nomad.JobSecrets{
		"no writer":   nil,
		"none loaded": func() nomad.JobSecrets { return nil },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, options{runtime: func(c *nomad.Config) { c.JobSecrets = jobSecrets }})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := e.rt.Run(ctx, scheduler.Job{ID: "job-sealed", AppID: "app-s", Workloads: map[string]scheduler.Task{"web": {
				Artifact: buildTrue(ctx, t, e), Command: []string{"sh", "-c", "exec sleep 1000"}, NoPort: true,
				Env: map[string]string{"DB_PASSWORD": slotSecret}, SealedEnv: map[string]bool{"DB_PASSWORD": true},
			}}})
			if errcode.CodeOf(err) != errcode.PlanCapabilityUnsupp {
				t.Fatalf("run with a slot credential = %v, want PLAN_CAPABILITY_UNSUPPORTED", err)
			}
			e2, _ := errcode.As(err)
			if !strings.Contains(e2.Remedy, "vault secrets adapter") {
				t.Errorf("remedy %q does not say to configure the vault secrets adapter", e2.Remedy)
			}
			assertNoSlotSecret(t, "the error", err.Error()+" "+e2.Remedy)
			if body := getBody(t, e.fake.URL()+"/v1/jobs"); strings.Contains(body, "job-sealed") {
				t.Fatalf("Nomad saw the job: %s", body)
			}
			assertNoSlotSecret(t, "nomad's state", string(e.fake.State()))
		})
	}
}

// slotSecret is a slot's credential (a database URL with its password)
// with what breaks naive quoting.
const slotSecret = "postgres://app:slotpw-7c1e\"q\nl $HOME \\ é@db.internal:5432/app"

// slotWorkload prints the SHA-256 of its DATABASE_URL (never the value)
// and waits.
var slotWorkload = []string{"sh", "-c", `printf %s "$DATABASE_URL" | sha256sum | sed 's/ .*//; s/^/slot-sha=/'; echo plain=$PLAIN; exec sleep 1000`}

// assertNoSlotSecret fails if text holds a slot credential or a part of
// one.
func assertNoSlotSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, v := range []string{slotSecret, slotSecret + "-2", slotSecret + "-3"} {
		q, _ := json.Marshal(v)
		for _, needle := range []string{v, string(q[1 : len(q)-1]), "slotpw-7c1e"} {
			if strings.Contains(text, needle) {
				t.Errorf("%s holds a slot credential (%q)", what, needle)
			}
		}
	}
}

// slotVault is where a test's runtime writes slot credentials and its
// fake Nomad's templates read them: a real Vault dev server through the
// vault secrets adapter, or an in-memory KV served over HTTP.
type slotVault struct {
	writer nomad.JobSecrets
	fake   *fakenomad.Vault
	// read returns the data of the KV version 2 entry at a data path, and
	// whether Vault has one (metadata included: no version is left).
	read func(t *testing.T, path string) (map[string]any, bool)
}

func newSlotVault(t *testing.T, backend string) *slotVault {
	t.Helper()
	if backend == "memory" {
		return newMemSlotVault(t)
	}
	srv := vaulttest.Start(t)
	root := func(method, path string, body any) (int, map[string]any) {
		return vaultRequest(t, srv.Addr, srv.RootToken, method, path, body)
	}
	// The adapter holds the policy the documentation gives it; the
	// workloads only read the data paths under the prefix.
	token := func(name, policy string) string {
		if code, _ := root(http.MethodPut, "sys/policies/acl/"+name, map[string]any{"policy": policy}); code/100 != 2 {
			t.Fatalf("write policy %s: HTTP %d", name, code)
		}
		_, out := root(http.MethodPost, "auth/token/create", map[string]any{"policies": []string{name}})
		auth, _ := out["auth"].(map[string]any)
		tok, _ := auth["client_token"].(string)
		if tok == "" {
			t.Fatalf("create a token for %s: %v", name, out)
		}
		return tok
	}
	adapterToken := token("svc", vaultsecrets.VaultPolicy("", ""))
	workloadToken := token("svc-workloads", `path "secret/data/svc/apps/*" { capabilities = ["read"] }`)
	v, err := vaultsecrets.NewVault(context.Background(), vaultsecrets.VaultConfig{Address: srv.Addr, Token: adapterToken})
	if err != nil {
		t.Fatalf("vault adapter: %v", err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return &slotVault{
		writer: v,
		fake:   &fakenomad.Vault{Address: srv.Addr, Token: workloadToken},
		read: func(t *testing.T, path string) (map[string]any, bool) {
			t.Helper()
			meta := strings.Replace(path, "/data/", "/metadata/", 1)
			if code, _ := root(http.MethodGet, meta, nil); code == http.StatusNotFound {
				return nil, false
			}
			code, out := root(http.MethodGet, path, nil)
			if code != http.StatusOK {
				t.Fatalf("read %s: HTTP %d", path, code)
			}
			data, _ := out["data"].(map[string]any)
			fields, _ := data["data"].(map[string]any)
			return fields, true
		},
	}
}

// vaultRequest sends one request to Vault's HTTP API (Vault's client
// belongs to vaultsecrets) and decodes the answer.
func vaultRequest(t *testing.T, addr, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, addr+"/v1/"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Vault-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// memJobSecrets is an in-memory JobSecrets that lays its entries out as
// the vault secrets adapter does (default mount and prefix).
type memJobSecrets struct {
	mu      sync.Mutex
	entries map[string]map[string]any // data path -> fields
	puts    atomic.Int32
}

var _ nomad.JobSecrets = (*memJobSecrets)(nil)

func (m *memJobSecrets) PutJobSecrets(_ context.Context, appID, jobID string, values map[string]map[string]string) error {
	m.puts.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	for w, vars := range values {
		fields := map[string]any{}
		for k, v := range vars {
			fields[k] = v
		}
		m.entries[jobtemplates.VaultJobEnvPath("secret", "svc", appID, jobID, w)] = fields
	}
	return nil
}

func (m *memJobSecrets) DeleteJobSecrets(_ context.Context, appID, jobID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := jobtemplates.VaultJobEnvPath("secret", "svc", appID, jobID, "")
	for p := range m.entries {
		if strings.HasPrefix(p, prefix) {
			delete(m.entries, p)
		}
	}
	return nil
}

func (m *memJobSecrets) get(path string) (map[string]any, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.entries[path]
	return f, ok
}

func newMemSlotVault(t *testing.T) *slotVault {
	m := &memJobSecrets{entries: map[string]map[string]any{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fields, ok := m.get(strings.TrimPrefix(r.URL.Path, "/v1/"))
		if r.Header.Get("X-Vault-Token") != "workload-token" || !ok {
			http.Error(w, `{"errors":[]}`, http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"data": fields, "metadata": map[string]any{"version": 1}}})
	}))
	t.Cleanup(srv.Close)
	return &slotVault{
		writer: m,
		fake:   &fakenomad.Vault{Address: srv.URL, Token: "workload-token"},
		read:   func(_ *testing.T, path string) (map[string]any, bool) { return m.get(path) },
	}
}

// TestSlotCredentialsThroughVault: a slot's credential reaches the
// workload's environment through the job's Vault template block, from
// the entry the runtime wrote for the job before registering it, and is
// nowhere else: not in the registered job (read back from Nomad), not in
// Nomad's state, not in the logs. A new job of the app gets entries of
// its own while the old one keeps its; a run that fails takes its entries
// with it. Against a real Vault dev server (through the vault secrets
// adapter, with the policy it documents) and an in-memory one.
func TestSlotCredentialsThroughVault(t *testing.T) {
	for _, backend := range []string{"vault", "memory"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			kv := newSlotVault(t, backend)
			e := newEnv(t, options{
				fake:    func(c *fakenomad.Config) { c.Vault = kv.fake },
				runtime: func(c *nomad.Config) { c.JobSecrets = func() nomad.JobSecrets { return kv.writer } },
			})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			art := buildTrue(ctx, t, e)
			const appID = "app_slots"
			job := func(id, value string, command []string) scheduler.Job {
				return scheduler.Job{ID: id, AppID: appID, Workloads: map[string]scheduler.Task{"web": {
					Artifact: art, Command: command, NoPort: true,
					Env:       map[string]string{"DATABASE_URL": value, "PLAIN": "visible"},
					SealedEnv: map[string]bool{"DATABASE_URL": true},
				}}}
			}
			entry := func(jobID string) string { return jobtemplates.VaultJobEnvPath("secret", "svc", appID, jobID, "web") }
			sha := func(v string) string { s := sha256.Sum256([]byte(v)); return "slot-sha=" + hex.EncodeToString(s[:]) }
			run := func(j scheduler.Job) []string {
				t.Helper()
				if _, err := e.rt.Run(ctx, j); err != nil {
					t.Fatalf("run %s: %v", j.ID, err)
				}
				t.Cleanup(func() { _ = e.rt.Stop(context.Background(), j.ID) })
				var lines []string
				waitUntil(t, "the workload's proof of its slot credential", func() bool {
					var err error
					lines, err = e.rt.Logs(ctx, j.ID, "web")
					return err == nil && strings.Contains(strings.Join(lines, "\n"), sha(j.Workloads["web"].Env["DATABASE_URL"]))
				})
				if !strings.Contains(strings.Join(lines, "\n"), "plain=visible") {
					t.Errorf("logs = %q, want the plain variable too", lines)
				}
				return lines
			}

			old := job("dep_slot1", slotSecret, slotWorkload)
			lines := run(old)
			if got, ok := kv.read(t, entry(old.ID)); !ok || got["DATABASE_URL"] != slotSecret || len(got) != 1 {
				t.Errorf("vault's entry of the job holds %d fields (found %v); want DATABASE_URL with the credential", len(got), ok)
			}

			// The registered job reads the entry and holds no value.
			body := getBody(t, e.fake.URL()+"/v1/jobs?meta=true")
			var stubs []struct {
				ID   string
				Meta map[string]string
			}
			_ = json.Unmarshal([]byte(body), &stubs)
			var nomadID string
			for _, s := range stubs {
				if s.Meta[jobtemplates.MetaDeploymentID] == old.ID {
					nomadID = s.ID
				}
			}
			if nomadID == "" {
				t.Fatalf("jobs = %s, want the job of %s", body, old.ID)
			}
			jobJSON := getBody(t, e.fake.URL()+"/v1/job/"+nomadID)
			if !strings.Contains(jobJSON, entry(old.ID)) {
				t.Errorf("the registered job does not read %s from Vault", entry(old.ID))
			}
			if strings.Contains(jobJSON, `"DATABASE_URL":`) {
				t.Errorf("the registered job sets DATABASE_URL in its env")
			}

			// A new deployment: its own entry; the old job keeps its.
			next := job("dep_slot2", slotSecret+"-2", slotWorkload)
			lines = append(lines, run(next)...)
			if got, _ := kv.read(t, entry(next.ID)); got["DATABASE_URL"] != slotSecret+"-2" {
				t.Errorf("the new job's entry does not hold its credential")
			}
			if got, _ := kv.read(t, entry(old.ID)); got["DATABASE_URL"] != slotSecret {
				t.Errorf("the old job's entry lost its credential while the new one deployed")
			}
			if st, err := e.rt.Status(ctx, old.ID); err != nil || !st.Workloads["web"].Running {
				t.Errorf("the old job stopped running: %+v, %v", st, err)
			}

			// Discarding the old job takes its entry; the new one keeps its.
			if err := e.rt.Stop(ctx, old.ID); err != nil {
				t.Fatal(err)
			}
			if err := e.rt.Discard(ctx, old.ID); err != nil {
				t.Fatalf("discard: %v", err)
			}
			if _, ok := kv.read(t, entry(old.ID)); ok {
				t.Errorf("the discarded job's entry is still in vault")
			}
			if got, _ := kv.read(t, entry(next.ID)); got["DATABASE_URL"] != slotSecret+"-2" {
				t.Errorf("discarding the old job took the new one's entry")
			}
			if err := e.rt.Stop(ctx, next.ID); err != nil {
				t.Fatal(err)
			}
			if err := e.rt.RemoveJobLogs(ctx, next.ID); err != nil {
				t.Fatalf("remove job logs: %v", err)
			}
			if _, ok := kv.read(t, entry(next.ID)); ok {
				t.Errorf("the purged job's entry is still in vault")
			}

			// A run that fails takes what it wrote with it.
			failed := job("dep_slot3", slotSecret+"-3", []string{"sh", "-c", "exit 3"})
			_, err := e.rt.Run(ctx, failed)
			if errcode.CodeOf(err) != errcode.StateAppExited {
				t.Fatalf("run of a workload that exits = %v, want STATE_APP_EXITED", err)
			}
			assertNoSlotSecret(t, "the error", err.Error())
			if _, ok := kv.read(t, entry(failed.ID)); ok {
				t.Errorf("the entry of the run that failed is still in vault")
			}

			for what, text := range map[string]string{
				"the registered job": jobJSON,
				"nomad's state":      string(e.fake.State()),
				"the logs":           strings.Join(lines, "\n"),
			} {
				assertNoSlotSecret(t, what, text)
			}
			_ = filepath.WalkDir(e.fakeData, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() && strings.HasSuffix(p, ".log") {
					b, _ := os.ReadFile(p)
					assertNoSlotSecret(t, p, string(b))
				}
				return nil
			})
		})
	}
}

// partialJobSecrets writes the first workload's entry (by name) of a
// job, then fails, with an error that names no value.
type partialJobSecrets struct{ *memJobSecrets }

func (p partialJobSecrets) PutJobSecrets(ctx context.Context, appID, jobID string, values map[string]map[string]string) error {
	first := slices.Min(slices.Collect(maps.Keys(values)))
	_ = p.memJobSecrets.PutJobSecrets(ctx, appID, jobID, map[string]map[string]string{first: values[first]})
	return errcode.New(errcode.AdapterUnavailable, "vault became unreachable")
}

// TestSlotCredentialsWriteFailureRegistersNothing: when the credentials
// cannot all be written to Vault, the run fails with the writer's error,
// Nomad never sees the job, and what was written is deleted again.
func TestSlotCredentialsWriteFailureRegistersNothing(t *testing.T) {
	mem := &memJobSecrets{entries: map[string]map[string]any{}}
	w := partialJobSecrets{mem}
	e := newEnv(t, options{runtime: func(c *nomad.Config) { c.JobSecrets = func() nomad.JobSecrets { return w } }})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	art := buildTrue(ctx, t, e)
	task := scheduler.Task{Artifact: art, Command: []string{"sh", "-c", "exec sleep 1000"}, NoPort: true,
		Env: map[string]string{"DATABASE_URL": slotSecret}, SealedEnv: map[string]bool{"DATABASE_URL": true}}
	_, err := e.rt.Run(ctx, scheduler.Job{ID: "job-unwritten", AppID: "app-s", Workloads: map[string]scheduler.Task{"web": task, "worker": task}})
	if errcode.CodeOf(err) != errcode.AdapterUnavailable {
		t.Fatalf("run = %v, want the writer's ADAPTER_UNAVAILABLE", err)
	}
	assertNoSlotSecret(t, "the error", err.Error())
	if body := getBody(t, e.fake.URL()+"/v1/jobs"); strings.Contains(body, "unwritten") {
		t.Fatalf("Nomad saw the job: %s", body)
	}
	if mem.puts.Load() != 1 {
		t.Fatalf("%d writes reached the store, want the partial one", mem.puts.Load())
	}
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if len(mem.entries) != 0 {
		t.Errorf("entries %v are left after a write that failed", slices.Collect(maps.Keys(mem.entries)))
	}
}
