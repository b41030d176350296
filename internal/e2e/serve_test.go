package e2e

import (
	"context"
	"encoding/json"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/api"
)

// TestOnlyTheAPIClient keeps the package honest: it reaches svc through the
// api client and the process boundary, never through its internals. The
// exceptions are helpers that touch no svc code: the harness of a real
// Vault dev server and of a real Nomad agent (other processes), the test
// servers' free ports, and the real browser's harness.
func TestOnlyTheAPIClient(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("list the package's files: %v (%d files)", err, len(files))
	}
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, modulePath+"/") && path != modulePath+"/api" && path != modulePath+"/internal/vaulttest" && path != modulePath+"/internal/nomadtest" && path != modulePath+"/internal/testserver" &&
				path != modulePath+"/internal/browsertest" {
				t.Errorf("%s imports %s; the end-to-end tests may use only %s/api and the test servers' helpers", name, path, modulePath)
			}
		}
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scaled(d))
	t.Cleanup(cancel)
	return ctx
}

func TestServeAnswersOnEmbeddedDefaults(t *testing.T) {
	const shutdownTimeout = 10 * time.Second
	work := filepath.Join(t.TempDir(), "work") // svc creates it
	p := newProc(t, "single", []string{
		"SVC_SERVER_ADDR=127.0.0.1:0",
		"SVC_SERVER_WORK_DIR=" + work,
		"SVC_SERVER_SHUTDOWN_TIMEOUT=" + shutdownTimeout.String(),
		"SVC_ADMIN_PASSWORD=", // a fresh installation that waits for setup
	})
	base := p.startServing()
	c := p.Client()

	setup, err := c.Setup(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatalf("GET /api/v1/setup: %v", err)
	}
	if !setup.SetupRequired {
		t.Errorf("GET /api/v1/setup on a fresh work dir: setup_required = false, want true")
	}
	// The newcomer's path: create the first administrator, signed in.
	if u, err := c.CompleteSetup(ctxTimeout(t, 15*time.Second), "first", "First Admin", "first-admin-password-1"); err != nil || u.RoleID == nil || *u.RoleID != "role_admin" {
		t.Fatalf("POST /api/v1/setup: %+v, %v", u, err)
	}
	if again, err := c.Setup(ctxTimeout(t, 10*time.Second)); err != nil || again.SetupRequired {
		t.Errorf("GET /api/v1/setup after setup: %+v, %v", again, err)
	}
	if _, err := c.CompleteSetup(ctxTimeout(t, 10*time.Second), "second", "Second", "second-admin-password"); !api.IsCode(err, "STATE_INVALID") {
		t.Errorf("a second setup: %v, want STATE_INVALID", err)
	}

	// The start line names what is there (no console yet): the API and
	// its reference, which answers.
	line := servingLine.FindString(p.currentLog())
	if m := servingAPI.FindStringSubmatch(line); m == nil || strings.Contains(line, "console=") || !strings.Contains(line, " reference="+m[1]+"/reference ") {
		t.Errorf("the start line %q; want api=…/api/v1 and reference=…/api/v1/reference, and no console", line)
	}
	if ref, err := c.Reference(ctxTimeout(t, 10*time.Second)); err != nil || len(ref.Endpoints) == 0 {
		t.Errorf("GET /api/v1/reference, as the start line says: %d endpoints, %v", len(ref.Endpoints), err)
	}

	// An unknown route: the error envelope, by hand.
	resp, err := http.Get(base + "/api/v1/no-such-route")
	if err != nil {
		t.Fatalf("GET an unknown route: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var envelope struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
	}
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET an unknown route: status %d, want 404; body %s", resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &envelope); err != nil {
		t.Errorf("GET an unknown route: body %q is not the JSON error envelope: %v", body, err)
	}
	if envelope.Code != "NOT_FOUND" {
		t.Errorf("GET an unknown route: code %q, want NOT_FOUND; body %s", envelope.Code, body)
	}
	if hdr := resp.Header.Get("X-Request-Id"); hdr == "" || envelope.RequestID != hdr {
		t.Errorf("GET an unknown route: request_id %q, X-Request-Id header %q; want the same non-empty id", envelope.RequestID, hdr)
	}

	// The store lives in the work dir, and keeps the node's id.
	for _, f := range []string{"raft/raft.db", "raft/node-id"} {
		if _, err := os.Stat(filepath.Join(work, f)); err != nil {
			t.Errorf("work dir: %v", err)
		}
	}
	st, err := p.status(false)
	if err != nil {
		t.Fatalf("GET /api/v1/operator/raft: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(work, "raft/node-id")); err == nil && strings.TrimSpace(string(b)) != st.NodeID {
		t.Errorf("raft/node-id holds %q, but the node reports node_id %q", strings.TrimSpace(string(b)), st.NodeID)
	}

	cfg, err := c.Config(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatalf("GET /api/v1/config: %v", err)
	}
	i := slices.IndexFunc(cfg.Settings, func(s api.Setting) bool { return s.Env == "SVC_SERVER_WORK_DIR" })
	if i < 0 || cfg.Settings[i].Value != work || cfg.Settings[i].Origin != "environment" {
		t.Errorf("GET /api/v1/config: SVC_SERVER_WORK_DIR = %+v, want value %q from the environment", cfg.Settings, work)
	}

	p.waitReady(scaled(15 * time.Second))

	code, took := p.stop(shutdownTimeout + scaled(20*time.Second))
	t.Logf("SIGTERM: exit code %d after %s", code, took.Round(time.Millisecond))
	if code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
	if took > shutdownTimeout {
		t.Errorf("exit took %s after SIGTERM, more than SVC_SERVER_SHUTDOWN_TIMEOUT=%s", took, shutdownTimeout)
	}
	if !strings.Contains(p.currentLog(), "shutting down") {
		t.Errorf("the log does not say it is shutting down")
	}
}

func TestBadConfigurationStopsTheServer(t *testing.T) {
	dir := t.TempDir()
	unknownKey := filepath.Join(dir, "unknown-key.yaml")
	if err := os.WriteFile(unknownKey, []byte("server:\n  addr: \"127.0.0.1:0\"\n  colour: blue\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const shortSecret = "short-secret-x" // 14 characters
	raftAddr := freeRaftAddr(t)

	for _, tc := range []struct {
		name      string
		env       []string
		args      []string
		wantLines []string // each must be on its own line of stderr
		notWant   []string // must not appear in stderr or stdout
	}{
		{
			name:      "bad port",
			env:       []string{"SVC_APP_PORT_START=abc"},
			wantLines: []string{"SVC_APP_PORT_START"},
		},
		{
			name:      "unknown policy setting",
			env:       []string{"SVC_POLICY_NOPE=1"},
			wantLines: []string{"SVC_POLICY_NOPE"},
		},
		{
			name:      "unreadable policy value",
			env:       []string{"SVC_POLICY_MIN_SECURITY_SCORE=high"},
			wantLines: []string{"SVC_POLICY_MIN_SECURITY_SCORE"},
		},
		{
			name:      "bad routing mode",
			env:       []string{"SVC_SERVER_ROUTING_MODE=sideways"},
			wantLines: []string{"SVC_SERVER_ROUTING_MODE"},
		},
		{
			name:      "config file with an unknown key",
			args:      []string{"--config", unknownKey},
			wantLines: []string{"server.colour"},
		},
		{
			name:      "missing config file",
			args:      []string{"--config", filepath.Join(dir, "no-such.yaml")},
			wantLines: []string{filepath.Join(dir, "no-such.yaml")},
		},
		{
			name:      "cluster address without a secret",
			env:       []string{"SVC_CLUSTER_NODE_ID=n1", "SVC_CLUSTER_RAFT_ADDR=" + raftAddr},
			wantLines: []string{"SVC_CLUSTER_SECRET"},
		},
		{
			name:      "short secret is not repeated",
			env:       []string{"SVC_CLUSTER_NODE_ID=n1", "SVC_CLUSTER_RAFT_ADDR=" + raftAddr, "SVC_CLUSTER_SECRET=" + shortSecret},
			wantLines: []string{"SVC_CLUSTER_SECRET"},
			notWant:   []string{shortSecret},
		},
		{
			name:      "every problem on its own line",
			env:       []string{"SVC_APP_PORT_START=abc", "SVC_SERVER_ROUTING_MODE=sideways"},
			wantLines: []string{"SVC_APP_PORT_START", "SVC_SERVER_ROUTING_MODE"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := filepath.Join(t.TempDir(), "work") // must not be created
			env := append([]string{"SVC_SERVER_ADDR=127.0.0.1:0", "SVC_SERVER_WORK_DIR=" + work}, tc.env...)
			code, stdout, stderr := runOnce(t, env, scaled(30*time.Second), tc.args...)
			if code != 2 {
				t.Errorf("exit code %d, want 2\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			const header = "svc: configuration refused; nothing was started:"
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if len(lines) == 0 || lines[0] != header {
				t.Errorf("stderr does not start with %q:\n%s", header, stderr)
			}
			if got, want := len(lines)-1, len(tc.wantLines); got != want {
				t.Errorf("stderr has %d problem lines, want %d:\n%s", got, want, stderr)
			}
			for _, w := range tc.wantLines {
				n := 0
				for _, l := range lines[1:] {
					if strings.Contains(l, w) {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%d lines of stderr name %q, want 1:\n%s", n, w, stderr)
				}
			}
			for _, nw := range tc.notWant {
				if strings.Contains(stderr+stdout, nw) {
					t.Errorf("the output repeats %q:\nstdout:\n%s\nstderr:\n%s", nw, stdout, stderr)
				}
			}
			if _, err := os.Stat(work); !os.IsNotExist(err) {
				t.Errorf("the work dir %s exists after a refused start (stat: %v)", work, err)
			}
		})
	}

	t.Run("packaging port variable is not read", func(t *testing.T) {
		p := newProc(t, "svc-port", []string{
			"SVC_SERVER_ADDR=127.0.0.1:0",
			"SVC_SERVER_WORK_DIR=" + filepath.Join(t.TempDir(), "work"),
			"SVC_PORT=1234",
		})
		p.startServing()
		signIn(t, scaled(30*time.Second), p)
		cfg, err := p.Client().Config(ctxTimeout(t, 10*time.Second))
		if err != nil {
			t.Fatalf("GET /api/v1/config: %v", err)
		}
		for _, s := range cfg.Settings {
			if s.Env == "SVC_PORT" {
				t.Errorf("GET /api/v1/config lists SVC_PORT: %+v", s)
			}
		}
		if code, _ := p.stop(scaled(30 * time.Second)); code != 0 {
			t.Errorf("exit code after SIGTERM = %d, want 0", code)
		}
		// (The subtest's name keeps SVC_PORT out of the temp paths the
		// log names.)
		if log := p.logText(); strings.Contains(log, "SVC_PORT") {
			t.Errorf("the log mentions SVC_PORT:\n%s", grepLines(log, "SVC_PORT"))
		}
	})

	t.Run("unknown variable is a warning", func(t *testing.T) {
		p := newProc(t, "svc-foo", []string{
			"SVC_SERVER_ADDR=127.0.0.1:0",
			"SVC_SERVER_WORK_DIR=" + filepath.Join(t.TempDir(), "work"),
			"SVC_FOO=1",
		})
		p.startServing()
		p.waitReady(scaled(15 * time.Second))
		warned := false
		for _, l := range strings.Split(p.currentLog(), "\n") {
			if strings.Contains(l, "level=WARN") && strings.Contains(l, "SVC_FOO") {
				warned = true
			}
		}
		if !warned {
			t.Errorf("no warning naming SVC_FOO in the log:\n%s", lastLines(p.currentLog(), 20))
		}
	})
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestRestartKeepsStateAndIdentity(t *testing.T) {
	work := filepath.Join(t.TempDir(), "work")
	p := newProc(t, "single", []string{
		"SVC_SERVER_ADDR=127.0.0.1:0",
		"SVC_SERVER_WORK_DIR=" + work,
	})
	p.startServing()
	p.waitReady(scaled(15 * time.Second))
	signIn(t, scaled(30*time.Second), p)
	// Each adapter's first health check writes its health once: wait for
	// them all, or a check still under way at the kill writes after the
	// restart (a write the digest would count).
	deadline := time.Now().Add(scaled(60 * time.Second))
	for {
		_, raw, err := p.Client().Adapters(ctxTimeout(t, 10*time.Second), "", 100)
		var page struct {
			Items []struct {
				ID     string          `json:"id"`
				Health json.RawMessage `json:"health"`
			} `json:"items"`
		}
		checked := err == nil && json.Unmarshal(raw, &page) == nil && len(page.Items) > 0
		for _, a := range page.Items {
			checked = checked && len(a.Health) > 0 && string(a.Health) != "null"
		}
		if checked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the adapters' first health checks did not end within 60s: %s (%v)", raw, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	var written []api.ProbeResult
	for i := range 5 {
		res, err := p.Client().WriteProbe(ctxTimeout(t, 15*time.Second), 100*i)
		if err != nil {
			t.Fatalf("write probe %d: %v", i+1, err)
		}
		written = append(written, res)
	}
	before, err := p.status(true)
	if err != nil {
		t.Fatalf("status before the kill: %v", err)
	}
	if last := written[len(written)-1].Index; before.AppliedIndex < last {
		t.Fatalf("applied_index %d before the kill is below the last probe's index %d", before.AppliedIndex, last)
	}

	p.kill()
	p.restart()
	// The node serves before it has replayed its log; wait until it has
	// applied at least as far as before.
	deadline = time.Now().Add(scaled(30 * time.Second))
	var after api.RaftStatus
	for {
		after, err = p.status(true)
		if err == nil && after.LeaderID != "" && after.AppliedIndex >= before.AppliedIndex {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart: applied_index %d (leader %q, err %v) did not reach %d within 30s",
				after.AppliedIndex, after.LeaderID, err, before.AppliedIndex)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("before the kill: node %s applied %d; after the restart: node %s applied %d, term %d",
		before.NodeID, before.AppliedIndex, after.NodeID, after.AppliedIndex, after.Term)

	if after.NodeID != before.NodeID {
		t.Errorf("node id %q after the restart, was %q", after.NodeID, before.NodeID)
	}
	if after.Digest != before.Digest {
		t.Errorf("state digest changed across the restart: %s before, %s after (applied %d, %d)",
			before.Digest, after.Digest, before.AppliedIndex, after.AppliedIndex)
	}
	c := p.Client()
	for _, w := range written {
		got, err := c.Probe(ctxTimeout(t, 10*time.Second), w.ID)
		if err != nil {
			t.Errorf("probe %s (index %d) after the restart: %v", w.ID, w.Index, err)
			continue
		}
		if got.ID != w.ID || got.Node != before.NodeID {
			t.Errorf("probe %s after the restart: %+v", w.ID, got)
		}
	}
	all, err := c.AllProbes(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatalf("list probes after the restart: %v", err)
	}
	if len(all) != len(written) {
		t.Errorf("%d probes listed after the restart, want %d: %+v", len(all), len(written), all)
	}
}
