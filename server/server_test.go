package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svchost/svc/internal/authz"
	"github.com/svchost/svc/internal/config"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/idempotency"
	"github.com/svchost/svc/internal/identity"
	"github.com/svchost/svc/internal/operator"
	"github.com/svchost/svc/internal/password"
	"github.com/svchost/svc/internal/plan"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/schema"
	"github.com/svchost/svc/internal/security"
	"github.com/svchost/svc/internal/telemetry"
	"github.com/svchost/svc/internal/throttle"
	"github.com/svchost/svc/internal/upgrade"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scanners/builtin"
	"github.com/svchost/svc/scheduler/process"
)

const canary = "canary-5e3f7a1c-secret"

// harness is a server over a real single-node store in a temporary
// directory, with the real services.
type harness struct {
	t       testing.TB
	dir     string
	store   *raftstore.Store
	srv     *Server
	ident   *identity.Service
	sharing *identity.Sharing
	pol     *policy.Service
	sec     *security.Service
	logs    *syncBuffer
	token   string // an administrator's token, sent unless a request says otherwise
	adminID string
	opts    harnessOptions
	// procs is the process runtime the scheduler deploys to; like cmd/svc's,
	// it outlives the harness's restarts.
	procs *process.Runtime
	// begun receives the upgrades the server accepted (Deps.Upgrades'
	// Begin): the binary's path and the marker.
	begun chan begunUpgrade
}

type begunUpgrade struct {
	m    upgrade.Marker
	path string
}

// adminPassword is the harness administrator's password.
const adminPassword = "correct-horse-battery-staple"

// testHasher keeps Argon2id cheap in tests; production uses DefaultParams.
var testHasher = password.NewHasher(password.Params{Memory: 1024, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}, 4)

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newHarness builds the default harness: info logs, cheap Argon2, and an
// administrator whose token requests carry.
func newHarness(t testing.TB) *harness {
	t.Helper()
	return newHarnessWith(t, harnessOptions{adminPassword: adminPassword})
}

// open builds the store, the services and the server as h.opts says, and
// (first time) the administrator and its token.
func (h *harness) open() {
	h.t.Helper()
	o := h.opts
	var logw io.Writer = h.logs
	if _, bench := h.t.(*testing.B); bench || o.discardLogs {
		logw = io.Discard // the log lines are still formatted, not kept
	}
	log := slog.New(slog.NewJSONHandler(logw, &slog.HandlerOptions{Level: o.level}))
	if h.procs == nil {
		// Before the store, so that it closes after the store (and the
		// scheduler's loops) stopped.
		h.procs = newTestRuntime(h.t, h.dir)
	}
	metrics := telemetry.New()
	store, err := raftstore.Open(raftstore.Config{NodeID: "n1", Dir: h.dir, Tables: schema.Tables(), Logger: log, Metrics: metrics})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = store.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := store.ConsistentRead(ctx); err != nil {
		h.t.Fatal("store not ready: ", err)
	}
	env := append([]string{"SVC_ADMIN_PASSWORD=" + canary, "SVC_POLICY_PUBLIC_SHARING=none", "SVC_LOG_LEVEL=debug"}, o.env...)
	cfg, err := config.Load(config.LoadArgs{Env: env})
	if err != nil {
		h.t.Fatal(err)
	}
	hasher := o.hasher
	if hasher == nil {
		hasher = testHasher
	}
	now := func() time.Time { return time.Now().UTC() }
	pol := policy.NewService(store, cfg.Policy, now)
	ident := identity.New(identity.Deps{
		Store: store, Hasher: hasher, Policy: pol,
		AccountLimit:    throttle.New(10, 15*time.Minute, now, 1000),
		ClientLimit:     throttle.New(50, 15*time.Minute, now, 1000),
		AccountAnyLimit: throttle.New(100, 15*time.Minute, now, 1000),
		KnownClients:    throttle.NewRecent(30*24*time.Hour, now, 1000),
		Now:             now, Logger: log,
	})
	w := wireStorage(h.t, store, h.dir, h.procs, now, log)
	sharing := wireSharing(store, hasher, pol, w.ring, now, log)
	det, sources := wireDetection(h.t, h.dir, w, store, pol, log)
	secDeps := security.Deps{Store: store, Checkouts: sources, Policy: pol, Screeners: security.AdapterScreeners{Adapters: w.adapters}, Context: h.t.Context(), Now: now, Log: log}
	if o.osvDB != "" {
		secDeps.Databases = builtin.New(o.osvDB)
	}
	sec := security.New(secDeps)
	plans := plan.NewService(plan.Deps{Store: store, Specs: w.specs, Slots: w.slots, Secrets: w.secrets, Adapters: w.adapters, Detections: det, Policy: pol, Security: sec})
	det.UseRuntimes(plans)
	sched := wireScheduler(store, cfg, w, plans, sources, pol, h.procs, now, log)
	sec.UseScheduler(sched, sched)
	h.t.Cleanup(sec.Wait)
	bk := wireBackups(h.t, store, h.dir, w, h.procs, sched, now, log)
	ops := operator.New(store, "n1", now)
	if h.begun == nil {
		h.begun = make(chan begunUpgrade, 16)
	}
	if err := os.MkdirAll(filepath.Join(h.dir, "bin"), 0o755); err != nil {
		h.t.Fatal(err)
	}
	upgrades := upgrade.New(upgrade.Deps{Store: store, Exe: filepath.Join(h.dir, "bin", "svc"), Dir: h.dir, Version: "test", Node: "n1",
		PublicKey: cfg.Upgrade.SigningPublicKey, Now: now,
		Begin: func(m upgrade.Marker, path string) { h.begun <- begunUpgrade{m: m, path: path} }})
	srv, err := New(Deps{
		Logger: log, Version: "test", Config: cfg,
		Identity: ident, Sharing: sharing, Policy: pol, Facts: store,
		Apps: w.apps, Launcher: w.launcher, Icons: w.icons, Secrets: w.secrets, Specs: w.specs, Slots: w.slots, Volumes: w.volumes, Security: sec, Deleter: bk, Backups: bk, Sources: sources, Detection: det,
		Subscriptions: wireSubscriptions(store, cfg, w.ring, pol, now, log),
		Plans:         plans, Adapters: w.adapters, Keyring: w.ring, EdgeKeys: wireEdgeKeys(h.t, store, w.ring),
		Deploys: sched, Approvals: sched, DeployLogs: sched, AppControl: sched, Workloads: sched, Capacity: sched,
		Operator: ops, History: ops, Idempotency: idempotency.New(store, now), Upgrades: upgrades,
		Ready: store, Metrics: metrics, MetricsHandler: metrics.Handler(),
		Commands: []CommandRef{{Command: "svc serve", Summary: "Run a server", Usage: "svc serve [flags]"}},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.store, h.srv, h.ident, h.sharing, h.pol, h.sec = store, srv, ident, sharing, pol, sec
	if o.adminPassword == "" {
		return
	}
	if _, err := ident.FirstRun(ctx, o.adminPassword); err != nil {
		h.t.Fatal(err)
	}
	admin, _, _ := identity.Users.First(store.Read(), "username", "admin")
	h.adminID = admin.ID
	if h.token == "" && !o.noToken {
		_, secret, err := ident.CreateToken(ctx, authz.Caller{Principal: authz.Principal{Kind: authz.KindUser, ID: admin.ID, UserID: admin.ID}}, identity.TokenDelegated, identity.NewToken{Name: "harness"})
		if err != nil {
			h.t.Fatal(err)
		}
		h.token = secret
	}
}

// restart closes the store and opens a new server over the same directory.
func (h *harness) restart() {
	h.t.Helper()
	if err := h.store.Close(); err != nil {
		h.t.Fatal(err)
	}
	h.open()
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) envelope(t *testing.T) envelope {
	t.Helper()
	var e envelope
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("body is not an error envelope: %v: %s", err, a.body)
	}
	return e
}

// do sends a request as the harness administrator (set an Authorization
// header, or "Authorization", "" for none, to send as someone else).
func (h *harness) do(method, path string, body io.Reader, header ...string) answer {
	h.t.Helper()
	req := httptest.NewRequest(method, path, body)
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
		if header[i+1] == "" {
			req.Header.Del(header[i])
		}
	}
	rec := httptest.NewRecorder()
	h.srv.Handler().ServeHTTP(rec, req)
	return answer{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

var requestIDRE = regexp.MustCompile(`^req_[0-9A-HJKMNP-TV-Z]{26}$`)

func TestEveryAnswerCarriesARequestID(t *testing.T) {
	h := newHarness(t)
	h.srv.register(route{method: http.MethodGet, path: "/api/v1/test/panic", op: "test_panic", handler: func(echo.Context) error { panic("boom") }})
	cases := []struct {
		method, path, body string
		status             int
		code               errcode.Code
	}{
		{"GET", "/api/v1/setup", "", 200, ""},
		{"GET", "/api/v1/no/such/route", "", 404, errcode.NotFound},
		{"GET", "/", "", 404, errcode.NotFound},
		{"DELETE", "/api/v1/setup", "", 405, errcode.ValidInvalid},
		{"POST", "/api/v1/operator/raft/probes", `{"payload_bytes":`, 400, errcode.ValidInvalid},
		{"GET", "/api/v1/test/panic", "", 500, errcode.Internal},
		{"GET", "/healthz", "", 200, ""},
		{"GET", "/metrics", "", 200, ""},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			a := h.do(c.method, c.path, strings.NewReader(c.body), "Content-Type", "application/json", "X-Request-Id", "req_forged")
			if a.status != c.status {
				t.Fatalf("status = %d, want %d: %s", a.status, c.status, a.body)
			}
			id := a.header.Get("X-Request-Id")
			if !requestIDRE.MatchString(id) || seen[id] {
				t.Fatalf("X-Request-Id = %q (seen before: %v)", id, seen[id])
			}
			seen[id] = true
			if c.code == "" {
				return
			}
			e := a.envelope(t)
			if e.Code != c.code || e.RequestID != id || e.Message == "" || e.Details == nil {
				t.Errorf("envelope = %+v, want code %s and request_id %s", e, c.code, id)
			}
		})
	}
	if !strings.Contains(h.logs.String(), "handler panicked") {
		t.Error("the panic was not logged")
	}
}

func TestMethodNotAllowedNamesTheAllowedMethods(t *testing.T) {
	h := newHarness(t)
	a := h.do("PUT", "/api/v1/setup", nil)
	if a.status != http.StatusMethodNotAllowed || !strings.Contains(a.header.Get("Allow"), "GET") {
		t.Fatalf("status %d, Allow %q", a.status, a.header.Get("Allow"))
	}
}

func TestInternalErrorsDoNotLeak(t *testing.T) {
	h := newHarness(t)
	h.srv.register(route{method: http.MethodGet, path: "/api/v1/test/fail", op: "test_fail", handler: func(echo.Context) error {
		return fmt.Errorf("dial db at postgres://admin:%s@db: refused", canary)
	}})
	a := h.do("GET", "/api/v1/test/fail", nil)
	if a.status != 500 || a.envelope(t).Code != errcode.Internal {
		t.Fatalf("status %d body %s", a.status, a.body)
	}
	if bytes.Contains(a.body, []byte(canary)) {
		t.Errorf("the answer leaks the internal error: %s", a.body)
	}
	if !strings.Contains(h.logs.String(), a.envelope(t).RequestID) {
		t.Errorf("the log line of the request id is missing")
	}
}

func TestMalformedBodies(t *testing.T) {
	h := newHarness(t)
	huge := `{"payload_bytes":1,"x":"` + strings.Repeat("a", defaultBodyLimit) + `"}`
	cases := []struct {
		name, body, ctype string
		status            int
		field             string
	}{
		{"syntax error", `{"payload_bytes":`, "application/json", 400, ""},
		{"not json", `payload_bytes=1`, "application/json", 400, ""},
		{"wrong type", `{"payload_bytes":"ten"}`, "application/json", 400, "payload_bytes"},
		{"float for int", `{"payload_bytes":1.5}`, "application/json", 400, "payload_bytes"},
		{"unknown field", `{"payload_bytes":1,"extra":true}`, "application/json", 400, "extra"},
		{"array body", `[1,2]`, "application/json", 400, ""},
		{"trailing data", `{"payload_bytes":1} {"again":1}`, "application/json", 400, ""},
		{"wrong content type", `{"payload_bytes":1}`, "text/plain", 415, ""},
		{"out of range", `{"payload_bytes":99999999}`, "application/json", 400, "payload_bytes"},
		{"negative", `{"payload_bytes":-1}`, "application/json", 400, "payload_bytes"},
		{"too large", huge, "application/json", 413, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := h.do("POST", "/api/v1/operator/raft/probes", strings.NewReader(c.body), "Content-Type", c.ctype)
			if a.status != c.status {
				t.Fatalf("status = %d, want %d: %s", a.status, c.status, a.body)
			}
			e := a.envelope(t)
			if e.Code != errcode.ValidInvalid {
				t.Errorf("code = %s, want VALID_INVALID", e.Code)
			}
			if c.field != "" && e.Details["field"] != c.field {
				t.Errorf("details.field = %v, want %s (%s)", e.Details["field"], c.field, e.Message)
			}
		})
	}
	t.Run("too large without a length", func(t *testing.T) {
		req := httptest.NewRequest("POST", "/api/v1/operator/raft/probes", io.MultiReader(strings.NewReader(huge)))
		req.ContentLength = -1
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+h.token)
		rec := httptest.NewRecorder()
		h.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("status = %d, want 413: %s", rec.Code, rec.Body)
		}
	})
	t.Run("an empty body is the default request", func(t *testing.T) {
		a := h.do("POST", "/api/v1/operator/raft/probes", nil)
		if a.status != http.StatusCreated {
			t.Errorf("status = %d: %s", a.status, a.body)
		}
	})
}

// counter is a test endpoint that creates something each time it runs.
type counter struct {
	runs    atomic.Int64
	release chan struct{} // when set, runs wait for it
	status  int
}

func (c *counter) handler(ctx echo.Context) error {
	n := c.runs.Add(1)
	if c.release != nil {
		<-c.release
	}
	var body map[string]any
	if err := bindOptional(ctx, &body); err != nil {
		return err
	}
	if c.status >= 500 {
		return errcode.New(errcode.AdapterUnavailable, "adapter down")
	}
	ctx.Response().Header().Set("Location", fmt.Sprintf("/api/v1/things/%d", n))
	return ctx.JSON(http.StatusAccepted, map[string]any{"run": n, "got": body})
}

func TestIdempotencyKeyReplaysTheFirstAnswer(t *testing.T) {
	h := newHarness(t)
	c := &counter{}
	r := route{method: http.MethodPost, path: "/api/v1/test/things", op: "test_things", handler: c.handler, idempotent: true}
	h.srv.register(r)
	post := func(key, body string) answer {
		return h.do("POST", "/api/v1/test/things", strings.NewReader(body), "Content-Type", "application/json", "Idempotency-Key", key)
	}

	first := post("key-1", `{"a":1}`)
	if first.status != http.StatusAccepted || first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first answer: %d %v", first.status, first.header)
	}
	again := post("key-1", `{"a":1}`)
	if again.status != first.status || !bytes.Equal(again.body, first.body) || again.header.Get("Idempotent-Replayed") != "true" ||
		again.header.Get("Location") != first.header.Get("Location") || again.header.Get("Content-Type") != first.header.Get("Content-Type") {
		t.Fatalf("replay = %d %s %v, want the first answer %d %s", again.status, again.body, again.header, first.status, first.body)
	}
	if c.runs.Load() != 1 {
		t.Fatalf("the action ran %d times", c.runs.Load())
	}
	if a := post("key-1", `{"a":2}`); a.status != http.StatusConflict || a.envelope(t).Code != errcode.StateInvalid {
		t.Errorf("same key, other body: %d %s", a.status, a.body)
	}
	if a := post("key-2", `{"a":1}`); a.status != http.StatusAccepted || c.runs.Load() != 2 {
		t.Errorf("a new key did not run the action: %d", a.status)
	}
	if a := h.do("POST", "/api/v1/test/things", strings.NewReader(`{}`), "Content-Type", "application/json"); a.status != http.StatusAccepted || c.runs.Load() != 3 {
		t.Errorf("no key: %d, runs %d", a.status, c.runs.Load())
	}
	for _, bad := range []string{strings.Repeat("k", 256), "has space", "tab\tkey"} {
		if a := post(bad, `{}`); a.status != http.StatusBadRequest {
			t.Errorf("key %q: status %d", bad, a.status)
		}
	}

	// The record is in the replicated store: a restarted server replays it.
	h.restart()
	h.srv.register(r)
	if a := post("key-1", `{"a":1}`); !bytes.Equal(a.body, first.body) || a.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("after a restart: %d %s", a.status, a.body)
	}
	if c.runs.Load() != 3 {
		t.Errorf("the action ran again after the restart")
	}
}

func TestIdempotencyKeyUnderConcurrentRetries(t *testing.T) {
	h := newHarness(t)
	c := &counter{release: make(chan struct{})}
	h.srv.register(route{method: http.MethodPost, path: "/api/v1/test/things", op: "test_things", handler: c.handler, idempotent: true})
	const n = 12
	var wg sync.WaitGroup
	answers := make([]answer, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = h.do("POST", "/api/v1/test/things", strings.NewReader(`{}`), "Content-Type", "application/json", "Idempotency-Key", "same")
		}()
	}
	// Let the refused ones answer, then release the one that runs.
	deadline := time.Now().Add(10 * time.Second)
	for c.runs.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(c.release)
	wg.Wait()
	if c.runs.Load() != 1 {
		t.Fatalf("the action ran %d times for one key", c.runs.Load())
	}
	var ran, busy, replayed int
	for _, a := range answers {
		switch {
		case a.status == http.StatusAccepted && a.header.Get("Idempotent-Replayed") == "":
			ran++
		case a.status == http.StatusAccepted:
			replayed++
		case a.status == http.StatusConflict && a.header.Get("Retry-After") != "":
			busy++
		default:
			t.Errorf("unexpected answer %d %s", a.status, a.body)
		}
	}
	if ran != 1 || ran+busy+replayed != n {
		t.Errorf("ran %d, busy %d, replayed %d", ran, busy, replayed)
	}
}

func TestIdempotencyKeyIsReleasedOnServerErrors(t *testing.T) {
	h := newHarness(t)
	c := &counter{status: 502}
	h.srv.register(route{method: http.MethodPost, path: "/api/v1/test/things", op: "test_things", handler: c.handler, idempotent: true})
	post := func() answer {
		return h.do("POST", "/api/v1/test/things", strings.NewReader(`{}`), "Content-Type", "application/json", "Idempotency-Key", "k")
	}
	if a := post(); a.status != http.StatusBadGateway {
		t.Fatalf("status %d", a.status)
	}
	c.status = 0
	if a := post(); a.status != http.StatusAccepted || a.header.Get("Idempotent-Replayed") != "" || c.runs.Load() != 2 {
		t.Errorf("the retry after a server error was replayed instead of run: %d", a.status)
	}
}

func TestIdempotencyKeyIsReleasedWhenTheHandlerPanics(t *testing.T) {
	h := newHarness(t)
	var runs atomic.Int64
	h.srv.register(route{method: http.MethodPost, path: "/api/v1/test/panics", op: "test_panics", idempotent: true, handler: func(c echo.Context) error {
		if runs.Add(1) == 1 {
			panic("first run fails")
		}
		return c.JSON(http.StatusCreated, map[string]int64{"run": runs.Load()})
	}})
	post := func() answer {
		return h.do("POST", "/api/v1/test/panics", strings.NewReader(`{}`), "Content-Type", "application/json", "Idempotency-Key", "k")
	}
	if a := post(); a.status != 500 || a.envelope(t).Code != errcode.Internal {
		t.Fatalf("panicking handler: %d %s", a.status, a.body)
	}
	if a := post(); a.status != http.StatusCreated || runs.Load() != 2 {
		t.Errorf("the retry after a panic: %d %s (runs %d); want it run again, not refused as in progress", a.status, a.body, runs.Load())
	}
}

func TestPaging(t *testing.T) {
	h := newHarness(t)
	var want []string
	for range 7 {
		a := h.do("POST", "/api/v1/operator/raft/probes", nil)
		var res probeResultDTO
		if err := json.Unmarshal(a.body, &res); err != nil || a.status != 201 {
			t.Fatalf("probe: %d %s", a.status, a.body)
		}
		want = append(want, res.Probe.ID)
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		path := "/api/v1/operator/raft/probes?limit=3"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		a := h.do("GET", path, nil)
		var l list[operator.Probe]
		if err := json.Unmarshal(a.body, &l); err != nil || a.status != 200 {
			t.Fatalf("list: %d %s", a.status, a.body)
		}
		for _, p := range l.Items {
			got = append(got, p.ID)
			if !strings.HasSuffix(p.WrittenAt.Format(time.RFC3339Nano), "Z") {
				t.Errorf("time not in UTC: %v", p.WrittenAt)
			}
		}
		if l.NextCursor == "" {
			break
		}
		cursor = l.NextCursor
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("pages gave %v, want %v", got, want)
	}
	if a := h.do("GET", "/api/v1/operator/raft/probes?limit=100000", nil); a.status != 200 {
		t.Errorf("a large limit is clamped, not refused: %d", a.status)
	}
	if a := h.do("GET", "/api/v1/operator/raft/probes", nil); !bytes.Contains(a.body, []byte(`"items":[`)) || bytes.Contains(a.body, []byte("next_cursor")) {
		t.Errorf("one page: %s", a.body)
	}
	for _, q := range []string{"limit=0", "limit=-1", "limit=abc", "cursor=%25%25", "cursor=" + encodeCursor("")[:2], "cursor=bm9wZQ"} {
		a := h.do("GET", "/api/v1/operator/raft/probes?"+q, nil)
		if a.status != 400 || a.envelope(t).Code != errcode.ValidInvalid {
			t.Errorf("%s: %d %s", q, a.status, a.body)
		}
	}
}

func TestProbeReadBack(t *testing.T) {
	h := newHarness(t)
	a := h.do("POST", "/api/v1/operator/raft/probes", strings.NewReader(`{"payload_bytes":100}`), "Content-Type", "application/json")
	var res probeResultDTO
	_ = json.Unmarshal(a.body, &res)
	if a.status != 201 || res.Probe.Index == 0 || res.Probe.Leader != "n1" {
		t.Fatalf("probe: %d %s", a.status, a.body)
	}
	if g := h.do("GET", "/api/v1/operator/raft/probes/"+res.Probe.ID, nil); g.status != 200 || !bytes.Contains(g.body, []byte(res.Probe.ID)) {
		t.Errorf("read back: %d %s", g.status, g.body)
	}
	for _, id := range []string{"prb_01M7ZVAA7HN5NZE25AZ701FBCF", "nope", "app_01M7ZVAA7HN5NZE25AZ701FBCF"} {
		if g := h.do("GET", "/api/v1/operator/raft/probes/"+id, nil); g.status != 404 || g.envelope(t).Code != errcode.NotFound {
			t.Errorf("%s: %d %s", id, g.status, g.body)
		}
	}
	st := h.do("GET", "/api/v1/operator/raft?digest=true", nil)
	var rs operator.RaftStatus
	if err := json.Unmarshal(st.body, &rs); err != nil || rs.State != "Leader" || len(rs.Digest) != 64 || rs.AppliedIndex < res.Probe.Index {
		t.Errorf("raft status: %s", st.body)
	}
	if st := h.do("GET", "/api/v1/operator/raft?digest=maybe", nil); st.status != 400 {
		t.Errorf("digest=maybe: %d", st.status)
	}
}

func TestConfigShowsSettingsWithoutSecrets(t *testing.T) {
	h := newHarness(t)
	a := h.do("GET", "/api/v1/config", nil)
	if a.status != 200 || bytes.Contains(a.body, []byte(canary)) {
		t.Fatalf("config: %d, leaks the admin password: %v", a.status, bytes.Contains(a.body, []byte(canary)))
	}
	var c configDTO
	if err := json.Unmarshal(a.body, &c); err != nil {
		t.Fatal(err)
	}
	byName := map[string]config.Setting{}
	for _, s := range c.Settings {
		byName[s.Name] = s
	}
	if s := byName["admin.password"]; !s.Secret || s.Value != "" || s.Origin != config.OriginEnvironment {
		t.Errorf("admin.password = %+v", s)
	}
	if s := byName["server.addr"]; s.Value != ":8080" || s.Origin != config.OriginDefault || s.Env != "SVC_SERVER_ADDR" {
		t.Errorf("server.addr = %+v", s)
	}
	if len(c.PolicyFixed) != 1 || c.PolicyFixed[0].Name != "public_sharing" || c.PolicyFixed[0].Value != "none" || c.PolicyFixed[0].Origin != "environment" {
		t.Errorf("policy_fixed = %+v", c.PolicyFixed)
	}
}

func TestReferenceListsEveryRouteAndCode(t *testing.T) {
	h := newHarness(t)
	a := h.do("GET", "/api/v1/reference", nil)
	var ref referenceDTO
	if err := json.Unmarshal(a.body, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Endpoints) != len(h.srv.routes) {
		t.Errorf("reference has %d endpoints, the router %d", len(ref.Endpoints), len(h.srv.routes))
	}
	// Every route echo knows is in the reference, with the verb of the table.
	inRef := map[string]endpointRef{}
	for _, e := range ref.Endpoints {
		inRef[e.Method+" "+echoPath(e.Path)] = e
	}
	for _, r := range h.srv.echo.Routes() {
		if _, ok := inRef[r.Method+" "+r.Path]; !ok {
			t.Errorf("route %s %s is served but not in the reference", r.Method, r.Path)
		}
	}
	if e := inRef["GET /api/v1/config"]; e.Verb != "install.view" || e.Access != "verb" {
		t.Errorf("config endpoint = %+v", e)
	}
	if e := inRef["GET /api/v1/setup"]; e.Access != "public" {
		t.Errorf("setup endpoint = %+v", e)
	}
	if len(ref.Errors) != len(errcode.Catalogue()) || len(ref.Events) != 43 || len(ref.CLI) != 1 || ref.Tools == nil {
		t.Errorf("reference sections: %d errors, %d events, %d cli, tools %v", len(ref.Errors), len(ref.Events), len(ref.CLI), ref.Tools)
	}
	for _, e := range ref.Errors {
		if e.Code == errcode.RateLimited && e.HTTPStatus != 500 {
			t.Errorf("RATE_LIMITED answers %d", e.HTTPStatus)
		}
	}
	// The reference says what a verb does not: deploying reads secrets.
	if !strings.Contains(strings.Join(ref.Security, "\n"), "can read every secret") ||
		!strings.Contains(inRef["GET /api/v1/apps/:appID/secrets/:key/value"].Summary, "app.spec.edit, app.deploy") {
		t.Errorf("the reference does not say that whoever may deploy can read the app's secrets: %q", ref.Security)
	}
}

func TestOpenAPIDocument(t *testing.T) {
	h := newHarness(t)
	a := h.do("GET", "/api/v1/openapi.json", nil)
	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(a.body, &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("document: %v %s", err, doc.OpenAPI)
	}
	ids := map[string]bool{}
	for _, r := range h.srv.routes {
		op, ok := doc.Paths[r.path][strings.ToLower(r.method)]
		if !ok {
			t.Errorf("%s %s missing", r.method, r.path)
			continue
		}
		id, _ := op["operationId"].(string)
		if id == "" || ids[id] {
			t.Errorf("%s %s: operationId %q empty or repeated", r.method, r.path, id)
		}
		ids[id] = true
		if strings.Contains(r.path, "{") && op["parameters"] == nil {
			t.Errorf("%s %s: no path parameters", r.method, r.path)
		}
	}
	if doc.Components.Schemas["Error"] == nil || !bytes.Contains(a.body, []byte(`"#/components/schemas/Error"`)) {
		t.Error("the Error schema is missing or unused")
	}
	if !bytes.Contains(a.body, []byte(`"x-svc-verb":"install.view"`)) {
		t.Error("verbs are not in the document")
	}
}

func TestHealthReadinessAndMetrics(t *testing.T) {
	h := newHarness(t)
	if a := h.do("GET", "/healthz", nil); a.status != 200 {
		t.Errorf("healthz %d", a.status)
	}
	if a := h.do("GET", "/readyz", nil); a.status != 200 || !bytes.Contains(a.body, []byte(`"leader":"n1"`)) {
		t.Errorf("readyz %d %s", a.status, a.body)
	}
	h.do("GET", "/api/v1/setup", nil)
	h.do("POST", "/api/v1/operator/raft/probes", nil)
	m := string(h.do("GET", "/metrics", nil).body)
	for _, want := range []string{
		`svc_http_requests_total{method="GET",route="/api/v1/setup",status="200"} 1`,
		`svc_http_request_duration_seconds_bucket{method="POST",route="/api/v1/operator/raft/probes"`,
		`svc_raft_apply_duration_seconds_count{outcome="ok",path="local"}`,
		"svc_raft_leader 1",
		"go_goroutines",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	h.store.Close()
	if a := h.do("GET", "/readyz", nil); a.status != 503 {
		t.Errorf("readyz with the store closed: %d %s", a.status, a.body)
	}
}

func TestGracefulShutdownFinishesRequestsInFlight(t *testing.T) {
	h := newHarness(t)
	started, release := make(chan struct{}), make(chan struct{})
	h.srv.register(route{method: http.MethodGet, path: "/api/v1/test/slow", op: "test_slow", handler: func(c echo.Context) error {
		close(started)
		<-release
		return c.JSON(http.StatusOK, map[string]string{"done": "yes"})
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- h.srv.Serve(ctx, ln, 10*time.Second) }()
	url := "http://" + ln.Addr().String()

	type result struct {
		status int
		body   string
		err    error
	}
	slow := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, url+"/api/v1/test/slow", nil)
		req.Header.Set("Authorization", "Bearer "+h.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			slow <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		slow <- result{status: resp.StatusCode, body: string(b)}
	}()
	<-started
	cancel()
	// New connections are refused once shutdown began.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 100*time.Millisecond)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the listener still accepts connections during shutdown")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned before the request in flight finished: %v", err)
	default:
	}
	close(release)
	r := <-slow
	if r.err != nil || r.status != 200 || !strings.Contains(r.body, "yes") {
		t.Fatalf("request in flight: %+v", r)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v", err)
	}
}

func TestRoutesDeclareConsistentAccess(t *testing.T) {
	h := newHarness(t)
	err := h.srv.register(route{method: "GET", path: "/api/v1/x", op: "x_get", access: accessVerb})
	if err == nil {
		t.Error("a verb route without a verb was registered")
	}
	err = h.srv.register(route{method: "GET", path: "/api/v1/y", op: "y_get", verb: "install.view"})
	if err == nil {
		t.Error("a signed-in route with a verb was registered")
	}
	err = h.srv.register(route{method: "GET", path: "/api/v1/z", op: "z_list", response: list[userDTO]{}})
	if err == nil {
		t.Error("a list route that does not page was registered")
	}
	for _, op := range []string{"", "apps", "Apps_list", "apps-list", "apps_list_"} {
		if err := h.srv.register(route{method: "GET", path: "/api/v1/w", op: op}); err == nil {
			t.Errorf("an API route with op %q (not <resource>_<verb>) was registered", op)
		}
	}
	if err := h.srv.register(route{method: "GET", path: "/healthz2", op: "health_get", operational: true}); err == nil {
		t.Error("an operational route with an op was registered")
	}
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor("prb_01M7ZVAA7HN5NZE25AZ701FBCF"))
	f.Add("")
	f.Add("%%%")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := decodeCursor(s)
		if err != nil {
			if errcode.CodeOf(err) != errcode.ValidInvalid {
				t.Fatalf("cursor error without VALID_INVALID: %v", err)
			}
			return
		}
		if back, err := decodeCursor(encodeCursor(id)); err != nil || back != id {
			t.Fatalf("round trip of %q gave %q, %v", id, back, err)
		}
	})
}

func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(`{"payload_bytes":1}`))
	f.Add([]byte(`{"payload_bytes":"x"}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"payload_bytes":1}{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var v probeRequestDTO
		err := decodeJSON(bytes.NewReader(b), &v)
		if err == nil {
			return
		}
		var e *errcode.Error
		if !errors.As(err, &e) || e.Code != errcode.ValidInvalid || e.Message == "" {
			t.Fatalf("decode error is not a VALID_INVALID: %v", err)
		}
	})
}

// pageAll follows a list's next_cursor from path (which carries its limit)
// for at most pages pages and returns every item's ID in order.
func pageAll[T any](t *testing.T, h *harness, path string, pages int, id func(T) string) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for range pages {
		p := path
		if cursor != "" {
			p += "&cursor=" + cursor
		}
		l := decodeAs[list[T]](t, h.send("GET", p, ""))
		for _, it := range l.Items {
			ids = append(ids, id(it))
		}
		if cursor = l.NextCursor; cursor == "" {
			break
		}
	}
	return ids
}
