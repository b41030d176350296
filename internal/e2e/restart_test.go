package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRestartInPlace restarts a server through POST /api/v1/restart: the
// request in flight finishes, the answer comes before the restart, the same
// process comes back with a later started_at, the same store and tokens, the
// config file read again over the environment it started with; a config
// file that has become invalid leaves it running on the previous one.
func TestRestartInPlace(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "svc.yaml")
	writeConfig(t, cfgFile, "log:\n  level: info\napp:\n  port_start: 20000\n  port_end: 20999\n")
	// childEnv sets SVC_LOG_LEVEL=info, which wins over the file.
	p := newProc(t, "restart", []string{
		"SVC_SERVER_ADDR=127.0.0.1:0",
		"SVC_SERVER_WORK_DIR=" + filepath.Join(dir, "work"),
	}, "--config", cfgFile)
	base := p.startServing()
	p.waitReady(scaled(15 * time.Second))
	signIn(t, scaled(30*time.Second), p)
	pid := p.current().cmd.Process.Pid
	probe, err := p.Client().WriteProbe(ctxTimeout(t, 15*time.Second), 64)
	if err != nil {
		t.Fatalf("write probe: %v", err)
	}
	wantSetting(t, p, "app.port_start", "20000", "config_file")
	wantSetting(t, p, "log.level", "info", "environment")
	before := startedAt(t, base)

	// The file changes; the environment, read once, still wins over it.
	writeConfig(t, cfgFile, "log:\n  level: debug\napp:\n  port_start: 21000\n  port_end: 21999\n")

	// A request in flight when the restart begins: its body is half sent.
	body := `{"policy":{"max_token_lifetime_days":45}}`
	pr, pw := io.Pipe()
	inflight := make(chan reply, 1)
	go func() { inflight <- send(p, http.MethodPut, base+"/api/v1/policy", pr) }()
	if _, err := io.WriteString(pw, body[:len(body)/2]); err != nil {
		t.Fatalf("first half of the body: %v", err)
	}
	time.Sleep(scaled(300 * time.Millisecond)) // the server reads the headers and starts the handler

	r := send(p, http.MethodPost, base+"/api/v1/restart", nil)
	var accepted struct {
		Restarting bool      `json:"restarting"`
		StartedAt  time.Time `json:"started_at"`
	}
	if r.err != nil || r.status != http.StatusAccepted || json.Unmarshal(r.body, &accepted) != nil || !accepted.Restarting {
		t.Fatalf("POST /api/v1/restart: %d %s (%v), want 202 restarting", r.status, r.body, r.err)
	}
	if !accepted.StartedAt.Equal(before) {
		t.Errorf("POST /api/v1/restart answered started_at %s, want the running server's %s", accepted.StartedAt, before)
	}
	if _, ok := p.waitLog(regexp.MustCompile(`restart requested`), scaled(10*time.Second)); !ok {
		t.Fatal("the log does not say the restart was requested")
	}
	// The server drains: the request in flight holds the restart back.
	time.Sleep(scaled(500 * time.Millisecond))
	select {
	case r := <-inflight:
		t.Fatalf("the request in flight ended before its body was sent: %d %s (%v)", r.status, r.body, r.err)
	default:
	}
	if n := generations(p); n != 1 {
		t.Errorf("%d generations served while a request was in flight, want 1", n)
	}
	if _, err := io.WriteString(pw, body[len(body)/2:]); err != nil {
		t.Fatalf("second half of the body: %v", err)
	}
	pw.Close()
	select {
	case r := <-inflight:
		if r.err != nil || r.status != http.StatusOK {
			t.Errorf("the request in flight during the restart: %d %s (%v), want 200", r.status, r.body, r.err)
		}
	case <-time.After(scaled(30 * time.Second)):
		t.Fatal("the request in flight did not finish")
	}

	after := waitRestarted(t, p, before)
	// The request in flight was answered by the server that was draining,
	// not held for the next one.
	log := p.currentLog()
	if put, next := strings.Index(log, "method=PUT path=/api/v1/policy"), nthIndex(log, `msg="svc is serving"`, 2); put < 0 || next < 0 || put > next {
		t.Errorf("the request in flight was not answered before the restarted server began serving (log offsets %d, %d)", put, next)
	}
	t.Logf("started_at %s, then %s", before.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano))
	if got := p.current().cmd.Process.Pid; !p.running() || got != pid {
		t.Fatalf("after the restart: running %v, pid %d; want pid %d still running", p.running(), got, pid)
	}
	// The store was reopened with everything in it; the token still works.
	if got, err := p.Client().Probe(ctxTimeout(t, 10*time.Second), probe.ID); err != nil || got.ID != probe.ID {
		t.Errorf("the probe written before the restart: %+v, %v", got, err)
	}
	if r := send(p, http.MethodGet, base+"/api/v1/policy", nil); r.status != http.StatusOK || !strings.Contains(string(r.body), `"max_token_lifetime_days":45`) {
		t.Errorf("the policy written during the restart: %d %s (%v)", r.status, r.body, r.err)
	}
	if audits := restartAudits(t, p); audits != 1 {
		t.Errorf("%d server.restart audit entries, want 1", audits)
	}
	// The file was read again; the environment was not, and still wins.
	wantSetting(t, p, "app.port_start", "21000", "config_file")
	wantSetting(t, p, "log.level", "info", "environment")

	t.Run("two restarts asked for at once", func(t *testing.T) {
		before := startedAt(t, base)
		var wg sync.WaitGroup
		replies := make([]reply, 2)
		for i := range replies {
			wg.Go(func() { replies[i] = send(p, http.MethodPost, base+"/api/v1/restart", nil) })
		}
		wg.Wait()
		for i, r := range replies {
			if r.err != nil || r.status != http.StatusAccepted {
				t.Errorf("restart %d: %d %s (%v), want 202", i+1, r.status, r.body, r.err)
			}
		}
		waitRestarted(t, p, before)
		// Each restart either joined the pending one or, arriving after it,
		// ran once more: every generation but the last was restarted once.
		deadline := time.Now().Add(scaled(30 * time.Second))
		for {
			requested := strings.Count(p.currentLog(), "restart requested")
			if generations(p) == requested+1 && requested >= 2 && requested <= 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d generations for %d restarts requested", generations(p), requested)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if got := p.current().cmd.Process.Pid; !p.running() || got != pid {
			t.Fatalf("running %v, pid %d; want pid %d still running", p.running(), got, pid)
		}
		p.waitReady(scaled(15 * time.Second))
		if audits := restartAudits(t, p); audits != 3 {
			t.Errorf("%d server.restart audit entries, want 3", audits)
		}
	})

	t.Run("an invalid config file keeps the previous configuration", func(t *testing.T) {
		writeConfig(t, cfgFile, "app:\n  port_start: 22000\nserver:\n  colour: blue\n")
		before := startedAt(t, base)
		if r := send(p, http.MethodPost, base+"/api/v1/restart", nil); r.status != http.StatusAccepted {
			t.Fatalf("POST /api/v1/restart: %d %s (%v)", r.status, r.body, r.err)
		}
		waitRestarted(t, p, before)
		if line, ok := p.waitLog(regexp.MustCompile(`.*configuration refused.*server\.colour.*`), scaled(10*time.Second)); !ok {
			t.Errorf("the log does not name the refused key server.colour:\n%s", lastLines(p.currentLog(), 20))
		} else {
			t.Logf("logged: %s", line)
		}
		if got := p.current().cmd.Process.Pid; !p.running() || got != pid {
			t.Fatalf("running %v, pid %d; want pid %d still running", p.running(), got, pid)
		}
		p.waitReady(scaled(15 * time.Second))
		wantSetting(t, p, "app.port_start", "21000", "config_file")
	})

	if code, _ := p.stop(scaled(30 * time.Second)); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
}

func writeConfig(t *testing.T, path, yaml string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reply is the answer to one request sent by hand.
type reply struct {
	status int
	body   []byte
	err    error
}

// send sends one request with the process's token, on a connection of its
// own (a kept-alive one may have been closed by a restart).
func send(p *proc, method, url string, body io.Reader) reply {
	p.mu.Lock()
	token := p.token
	p.mu.Unlock()
	return sendToken(token, method, url, body)
}

// sendToken sends one request with a token.
func sendToken(token, method, url string, body io.Reader) reply {
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return reply{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{Timeout: scaled(60 * time.Second), Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, body: b, err: err}
}

// startedAt reads started_at from /healthz.
func startedAt(t *testing.T, base string) time.Time {
	t.Helper()
	at, err := healthStartedAt(base)
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	return at
}

func healthStartedAt(base string) (time.Time, error) {
	c := &http.Client{Timeout: scaled(30 * time.Second), Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(base + "/healthz")
	if err != nil {
		return time.Time{}, err
	}
	defer resp.Body.Close()
	var h struct {
		StartedAt time.Time `json:"started_at"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.StartedAt.IsZero() {
		return time.Time{}, fmt.Errorf("status %d, started_at %v: %v", resp.StatusCode, h.StartedAt, err)
	}
	return h.StartedAt, nil
}

// waitRestarted waits until /healthz reports a started_at later than
// before, and points the process's client at the new server.
func waitRestarted(t *testing.T, p *proc, before time.Time) time.Time {
	t.Helper()
	deadline := time.Now().Add(scaled(60 * time.Second))
	for {
		at, err := healthStartedAt(p.Base())
		if err == nil && at.After(before) {
			p.serveAt(p.Base()) // drop connections to the previous server
			return at
		}
		if err == nil && !at.Equal(before) {
			t.Fatalf("started_at went from %s to %s", before, at)
		}
		if !p.running() {
			t.Fatalf("the process exited during the restart")
		}
		if time.Now().After(deadline) {
			t.Fatalf("started_at still %s (last error %v) 60s after the restart was asked for", before, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nthIndex is the offset of the nth (from 1) occurrence of sub in s, or -1.
func nthIndex(s, sub string, n int) int {
	off := 0
	for ; n > 0; n-- {
		i := strings.Index(s[off:], sub)
		if i < 0 {
			return -1
		}
		if n == 1 {
			return off + i
		}
		off += i + len(sub)
	}
	return -1
}

// generations counts the servers the process has started.
func generations(p *proc) int { return strings.Count(p.currentLog(), `msg="svc is serving"`) }

func restartAudits(t *testing.T, p *proc) int {
	t.Helper()
	r := send(p, http.MethodGet, p.Base()+"/api/v1/audit?action=server.restart", nil)
	var page struct {
		Items []struct {
			Action string `json:"action"`
		} `json:"items"`
	}
	if r.err != nil || r.status != http.StatusOK || json.Unmarshal(r.body, &page) != nil {
		t.Fatalf("GET /api/v1/audit: %d %s (%v)", r.status, r.body, r.err)
	}
	return len(page.Items)
}

// wantSetting checks one setting of GET /api/v1/config.
func wantSetting(t *testing.T, p *proc, name, value, origin string) {
	t.Helper()
	cfg, err := p.Client().Config(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatalf("GET /api/v1/config: %v", err)
	}
	for _, s := range cfg.Settings {
		if s.Name == name {
			if s.Value != value || s.Origin != origin {
				t.Errorf("%s = %q from %s, want %q from %s", name, s.Value, s.Origin, value, origin)
			}
			return
		}
	}
	t.Errorf("GET /api/v1/config lists no %s", name)
}
