package nomad_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/nomad/fakenomad"
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

// TestSlotCredentialsAreRefused: a variable made from a slot's credential
// could only travel in the job: the runtime refuses the task, and nothing
// reaches Nomad.
func TestSlotCredentialsAreRefused(t *testing.T) {
	e := newEnv(t, options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const canary = "slot-password-canary-5f2e"
	_, err := e.rt.Run(ctx, scheduler.Job{ID: "job-sealed", AppID: "app-s", Workloads: map[string]scheduler.Task{"web": {
		Artifact: buildTrue(ctx, t, e), Command: []string{"sh", "-c", "exec sleep 1000"}, NoPort: true,
		Env: map[string]string{"DB_PASSWORD": canary}, SealedEnv: map[string]bool{"DB_PASSWORD": true},
	}}})
	if errcode.CodeOf(err) != errcode.PlanCapabilityUnsupp {
		t.Fatalf("run with a slot credential = %v, want PLAN_CAPABILITY_UNSUPPORTED", err)
	}
	if body := getBody(t, e.fake.URL()+"/v1/jobs"); strings.Contains(body, canary) || strings.Contains(body, "job-sealed") {
		t.Fatalf("Nomad saw the job: %s", body)
	}
}
