package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeNtfy answers ntfy's health check and records the bearer tokens it was
// sent.
type fakeNtfy struct {
	mu     sync.Mutex
	tokens []string
}

func (f *fakeNtfy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.tokens = append(f.tokens, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	f.mu.Unlock()
	if r.URL.Path == "/v1/health" {
		_, _ = w.Write([]byte(`{"healthy":true}`))
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (f *fakeNtfy) sawToken(token string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.tokens {
		if t == token {
			return true
		}
	}
	return false
}

// adapterItem is an adapter as GET /api/v1/adapters lists it.
type adapterItem struct {
	AdapterID         string            `json:"adapter_id"`
	Category          string            `json:"category"`
	Kind              string            `json:"kind"`
	Origin            string            `json:"origin"`
	Primary           bool              `json:"primary"`
	Loaded            bool              `json:"loaded"`
	PendingRestart    bool              `json:"pending_restart"`
	CredentialsSet    []string          `json:"credentials_set"`
	CredentialSources map[string]string `json:"credential_sources"`
}

// loadedAdapters waits until the server has loaded its adapters and
// returns them by ID, with the raw answer.
func loadedAdapters(t *testing.T, p *proc) (map[string]adapterItem, string) {
	t.Helper()
	deadline := time.Now().Add(scaled(30 * time.Second))
	for {
		r := send(p, http.MethodGet, p.Base()+"/api/v1/adapters?limit=200", nil)
		var l struct {
			Items   []adapterItem `json:"items"`
			Loading bool          `json:"loading"`
		}
		if r.err == nil && r.status == http.StatusOK && json.Unmarshal(r.body, &l) == nil && !l.Loading {
			out := map[string]adapterItem{}
			for _, it := range l.Items {
				out[it.AdapterID] = it
			}
			return out, string(r.body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /api/v1/adapters: %d %s (%v), still loading", r.status, r.body, r.err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// declaration is a config file declaring the ntfy adapter adp_alerts.
func declaration(server, tokenFile string) string {
	return `adapters:
  - id: adp_alerts
    category: notification
    kind: ntfy
    settings:
      server: ` + server + `
      topic: svc-declared
    credentials:
      token: {file: ` + tokenFile + `}
`
}

// TestDeclaredAdapterRefusedAtStartup: a declaration its kind refuses stops
// svc serve before it starts anything, with one line naming the adapter
// and the field.
func TestDeclaredAdapterRefusedAtStartup(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ name, yaml, want string }{
		{"unknown kind", "adapters:\n  - {id: adp_x, category: notification, kind: pager}\n", `adapter adp_x: kind: this build has no notification adapter of kind "pager"`},
		{"kind's validation", "adapters:\n  - {id: adp_x, category: notification, kind: ntfy, settings: {topic: 'not a topic'}}\n", "adapter adp_x: settings.topic: topic must be 1 to 64 letters"},
		{"missing required setting", "adapters:\n  - {id: adp_x, category: notification, kind: ntfy}\n", "adapter adp_x: settings.topic: notification/ntfy needs [topic]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfgFile := filepath.Join(t.TempDir(), "svc.yaml")
			writeConfig(t, cfgFile, tt.yaml)
			work := filepath.Join(dir, tt.name) // must not be created
			code, stdout, stderr := runOnce(t, []string{"SVC_SERVER_ADDR=127.0.0.1:0", "SVC_SERVER_WORK_DIR=" + work}, scaled(30*time.Second), "--config", cfgFile)
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if code != 2 || len(lines) != 2 || lines[0] != "svc: configuration refused; nothing was started:" ||
				!strings.Contains(lines[1], "config file "+cfgFile+": "+tt.want) {
				t.Errorf("exit code %d, want 2 with one line containing %q\nstdout:\n%s\nstderr:\n%s", code, tt.want, stdout, stderr)
			}
			if _, err := os.Stat(work); !os.IsNotExist(err) {
				t.Errorf("the work dir was created (%v)", err)
			}
		})
	}
}

// TestDeclaredAdapters declares an ntfy notification adapter in the config
// file, its token read from a file: the server lists it with its origin as
// its category's primary, uses it (a subscription sends an event through
// it to an ntfy server, with the token from the file), refuses to change or delete it through the
// API while an adapter configured through the API works beside it, shows it
// in GET /api/v1/config without the token, and drops it when the
// declaration is removed and the server restarts.
func TestDeclaredAdapters(t *testing.T) {
	const token = "tk_declared0secret0e2e"
	fake := &fakeNtfy{}
	ntfy := httptest.NewServer(fake)
	defer ntfy.Close()

	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "ntfy-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "svc.yaml")
	writeConfig(t, cfgFile, declaration(ntfy.URL, tokenFile))
	p := newProc(t, "declared", []string{
		"SVC_SERVER_ADDR=127.0.0.1:0",
		"SVC_SERVER_WORK_DIR=" + filepath.Join(dir, "work"),
	}, "--config", cfgFile)
	base := p.startServing()
	p.waitReady(scaled(15 * time.Second))
	signIn(t, scaled(30*time.Second), p)

	// Events go through the declared adapter: a subscription can name it.
	r := send(p, http.MethodPost, base+"/api/v1/subscriptions", strings.NewReader(`{"adapter_id":"adp_alerts","events":["adapter.configured"]}`))
	if r.err != nil || r.status != http.StatusCreated {
		t.Fatalf("POST /api/v1/subscriptions naming the declared adapter: %d %s (%v), want 201", r.status, r.body, r.err)
	}

	// An adapter configured through the API, beside the declared one (an
	// adapter.configured event).
	r = send(p, http.MethodPost, base+"/api/v1/adapters", strings.NewReader(
		`{"new":true,"category":"notification","kind":"ntfy","config":{"server":"`+ntfy.URL+`","topic":"svc-api"}}`))
	var made struct {
		Adapter adapterItem `json:"adapter"`
	}
	if r.err != nil || r.status != http.StatusCreated || json.Unmarshal(r.body, &made) != nil || made.Adapter.Origin != "api" {
		t.Fatalf("POST /api/v1/adapters: %d %s (%v), want 201 with origin api", r.status, r.body, r.err)
	}
	apiID := made.Adapter.AdapterID

	items, raw := loadedAdapters(t, p)
	d, ok := items["adp_alerts"]
	if !ok || d.Origin != "config_file" || d.Category != "notification" || d.Kind != "ntfy" || !d.Loaded || d.PendingRestart ||
		strings.Join(d.CredentialsSet, ",") != "token" || d.CredentialSources["token"] != "file "+tokenFile {
		t.Fatalf("the declared adapter is listed as %+v\n%s", d, raw)
	}
	// The first declared adapter of its category is its primary, over the
	// one configured through the API (which waits for a restart).
	if !d.Primary {
		t.Errorf("the declared adapter is not its category's primary:\n%s", raw)
	}
	if a := items[apiID]; a.Origin != "api" || !a.PendingRestart || a.Primary {
		t.Errorf("the adapter configured through the API is listed as %+v", a)
	}
	for _, id := range []string{"adp_builtin_secrets", "adp_builtin_runtime"} {
		if items[id].Origin != "default" {
			t.Errorf("%s is listed with origin %q, want default", id, items[id].Origin)
		}
	}
	if strings.Contains(raw, token) {
		t.Errorf("GET /api/v1/adapters shows the token:\n%s", raw)
	}

	// It is used: the adapter.configured event reaches the ntfy server
	// through it, with the token read from the file.
	deadline := time.Now().Add(scaled(60 * time.Second))
	for !fake.sawToken(token) {
		if time.Now().After(deadline) {
			r := send(p, http.MethodGet, base+"/api/v1/subscriptions", nil)
			t.Fatalf("the ntfy server was not sent the token of the declared adapter; subscriptions: %s", r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// It cannot be changed or deleted through the API.
	for _, req := range []struct{ method, path, body string }{
		{http.MethodPost, "/api/v1/adapters", `{"adapter_id":"adp_alerts","category":"notification","kind":"ntfy","config":{"topic":"changed"}}`},
		{http.MethodDelete, "/api/v1/adapters/adp_alerts", ""},
	} {
		var body io.Reader
		if req.body != "" {
			body = strings.NewReader(req.body)
		}
		r := send(p, req.method, base+req.path, body)
		var e struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Remedy  string         `json:"remedy"`
			Details map[string]any `json:"details"`
		}
		if r.err != nil || r.status != http.StatusConflict || json.Unmarshal(r.body, &e) != nil || e.Code != "STATE_INVALID" ||
			!strings.Contains(e.Message, "declared in config file "+cfgFile) || !strings.Contains(e.Remedy, "config file") ||
			e.Details["origin"] != "config_file" {
			t.Errorf("%s %s: %d %s (%v), want 409 STATE_INVALID naming the config file", req.method, req.path, r.status, r.body, r.err)
		}
	}

	// GET /api/v1/config lists the declaration, the token by its file.
	r = send(p, http.MethodGet, base+"/api/v1/config", nil)
	var cfg struct {
		Adapters []struct {
			ID          string            `json:"id"`
			Category    string            `json:"category"`
			Kind        string            `json:"kind"`
			Settings    map[string]string `json:"settings"`
			Origin      string            `json:"origin"`
			Credentials []struct {
				Name   string `json:"name"`
				From   string `json:"from"`
				Source string `json:"source"`
			} `json:"credentials"`
		} `json:"adapters"`
	}
	if r.err != nil || r.status != http.StatusOK || json.Unmarshal(r.body, &cfg) != nil || strings.Contains(string(r.body), token) {
		t.Fatalf("GET /api/v1/config: %d %s (%v)", r.status, r.body, r.err)
	}
	if len(cfg.Adapters) != 1 || cfg.Adapters[0].ID != "adp_alerts" || cfg.Adapters[0].Origin != "config_file" ||
		cfg.Adapters[0].Settings["topic"] != "svc-declared" || len(cfg.Adapters[0].Credentials) != 1 ||
		cfg.Adapters[0].Credentials[0].Name != "token" || cfg.Adapters[0].Credentials[0].From != "file" || cfg.Adapters[0].Credentials[0].Source != tokenFile {
		t.Errorf("GET /api/v1/config lists the declared adapters as %s", r.body)
	}

	// A declaration that has become invalid (its token file is gone) is
	// refused at the restart, which keeps the previous configuration.
	writeConfig(t, cfgFile, strings.Replace(declaration(ntfy.URL, tokenFile), tokenFile, tokenFile+".gone", 1))
	before := startedAt(t, base)
	if r := send(p, http.MethodPost, base+"/api/v1/restart", nil); r.err != nil || r.status != http.StatusAccepted {
		t.Fatalf("POST /api/v1/restart: %d %s (%v)", r.status, r.body, r.err)
	}
	waitRestarted(t, p, before)
	if _, ok := p.waitLog(regexp.MustCompile(`configuration refused.*adp_alerts.*credentials\.token.*gone`), scaled(10*time.Second)); !ok {
		t.Errorf("the log does not name the refused declaration:\n%s", lastLines(p.currentLog(), 20))
	}
	if items, raw := loadedAdapters(t, p); items["adp_alerts"].Origin != "config_file" {
		t.Errorf("after a refused configuration, the declared adapter is not loaded from the previous one:\n%s", raw)
	}

	// Without the declaration, a restart drops it; the adapter configured
	// through the API is loaded and becomes the primary.
	writeConfig(t, cfgFile, "log:\n  level: info\n")
	before = startedAt(t, base)
	if r := send(p, http.MethodPost, base+"/api/v1/restart", nil); r.err != nil || r.status != http.StatusAccepted {
		t.Fatalf("POST /api/v1/restart: %d %s (%v)", r.status, r.body, r.err)
	}
	waitRestarted(t, p, before)
	items, raw = loadedAdapters(t, p)
	if _, still := items["adp_alerts"]; still {
		t.Errorf("the declared adapter is still listed after its declaration was removed:\n%s", raw)
	}
	if a := items[apiID]; !a.Loaded || a.PendingRestart || !a.Primary || a.Origin != "api" {
		t.Errorf("after the restart, the adapter configured through the API is listed as %+v", a)
	}
	r = send(p, http.MethodGet, base+"/api/v1/config", nil)
	if r.err != nil || r.status != http.StatusOK || !strings.Contains(string(r.body), `"adapters":[]`) {
		t.Errorf("GET /api/v1/config after the restart: %d %s (%v)", r.status, r.body, r.err)
	}
	if strings.Contains(p.logText(), token) {
		t.Error("the server's log holds the token")
	}
	if code, _ := p.stop(scaled(30 * time.Second)); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
}
