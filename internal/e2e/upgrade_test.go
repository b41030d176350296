package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svchost/svc/api"
)

// The two versions of the upgrade tests' builds.
const (
	oldVersion = "1.0.0-e2e"
	newVersion = "1.1.0-e2e"
)

var (
	buildsMu sync.Mutex
	builds   = map[string]string{} // what → binary, next to svcBin (removed with it)
)

// versionBuild is svc built with main.version set to v, once per test
// binary; brokenBuild is testdata/brokensvc.
func versionBuild(t *testing.T, v string) string {
	return cachedBuild(t, "svc-"+v, "-ldflags", "-X main.version="+v, "./cmd/svc")
}

func brokenBuild(t *testing.T) string {
	return cachedBuild(t, "brokensvc", "./internal/e2e/testdata/brokensvc")
}

func cachedBuild(t *testing.T, name string, args ...string) string {
	t.Helper()
	buildsMu.Lock()
	defer buildsMu.Unlock()
	if bin, ok := builds[name]; ok {
		return bin
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(filepath.Dir(svcBin), name)
	cmd := exec.Command("go", append([]string{"build", "-o", bin}, args...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	builds[name] = bin
	return bin
}

// installBinary copies bin to dir/svc, the executable the test runs and
// the upgrade replaces.
func installBinary(t *testing.T, bin, dir string) string {
	t.Helper()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "svc")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

func fileDigest(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// upgradeState is GET /api/v1/upgrade's answer.
type upgradeState struct {
	Upgrade *struct {
		ID, State, From, To string
		Reason              *string
		Nodes               []struct{ ID, Version, State string }
	} `json:"upgrade"`
	Version           string `json:"version"`
	SignatureRequired bool   `json:"signature_required"`
}

// postUpgrade uploads bin to p's POST /api/v1/upgrade.
func postUpgrade(t *testing.T, p *proc, bin, signature string) (int, []byte) {
	t.Helper()
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := p.Base() + "/api/v1/upgrade"
	if signature != "" {
		u += "?signature=" + url.QueryEscape(signature)
	}
	req, err := http.NewRequest(http.MethodPost, u, f)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	req.Header.Set("Authorization", "Bearer "+p.token)
	p.mu.Unlock()
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := (&http.Client{Timeout: scaled(2 * time.Minute)}).Do(req)
	if err != nil {
		t.Fatalf("POST /api/v1/upgrade: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// waitUpgrade waits until p's latest upgrade is id and has finished, and
// returns GET /api/v1/upgrade. While the process restarts, requests fail;
// they are tried again.
func waitUpgrade(t *testing.T, p *proc, id string, timeout time.Duration) upgradeState {
	t.Helper()
	client := &http.Client{Timeout: scaled(10 * time.Second)}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		var st upgradeState
		status, err := apiCall(context.Background(), client, p, http.MethodGet, "/upgrade", nil, &st)
		switch {
		case err != nil:
			last = err.Error()
		case status != http.StatusOK:
			last = fmt.Sprintf("status %d", status)
		case st.Upgrade != nil && st.Upgrade.ID == id && (st.Upgrade.State == "done" || st.Upgrade.State == "failed"):
			return st
		default:
			b, _ := json.Marshal(st)
			last = string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("upgrade %s did not finish within %s; last: %s", id, timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitHook waits for a delivered event of type typ and returns its data.
func waitHook(t *testing.T, rc *soakReceiver, typ string, timeout time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, r := range rc.requests() {
			if r.eventType == typ {
				return deliveryData(t, r)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event delivered within %s", typ, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// deliveryData is a delivered event's data; a delivery whose signature or
// headers were wrong (r.bad) is reported.
func deliveryData(t *testing.T, r hookRequest) map[string]any {
	t.Helper()
	if r.bad != "" {
		t.Errorf("the %s delivery: %s", r.eventType, r.bad)
	}
	var ev struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(r.body, &ev); err != nil {
		t.Fatalf("the %s delivery's body: %v", r.eventType, err)
	}
	return ev.Data
}

// startUpgradable starts the old build, installed in its own directory,
// signs in and subscribes rc to the upgrade events.
func startUpgradable(t *testing.T, env ...string) (p *proc, exe string, rc *soakReceiver) {
	t.Helper()
	dir := t.TempDir()
	exe = installBinary(t, versionBuild(t, oldVersion), filepath.Join(dir, "bin"))
	p = newProc(t, "upgrade", append([]string{
		"SVC_SERVER_ADDR=127.0.0.1:0",
		"SVC_SERVER_WORK_DIR=" + filepath.Join(dir, "work"),
		"SVC_POLICY_ALLOW_PRIVATE_WEBHOOKS=true", // the receiver is on loopback
		"SVC_UPGRADE_READY_TIMEOUT=" + scaled(90*time.Second).String(),
	}, env...))
	p.bin = exe
	p.startServing()
	p.waitReady(scaled(30 * time.Second))
	signIn(t, scaled(30*time.Second), p)
	rc = subscribeUpgrades(t, p)
	return p, exe, rc
}

// subscribeUpgrades subscribes a new receiver, through p, to the upgrade
// events.
func subscribeUpgrades(t *testing.T, p *proc) *soakReceiver {
	t.Helper()
	rc := newSoakReceiver(t, 1, 0)
	var sub struct {
		SigningKey string `json:"signing_key"`
	}
	if _, err := apiCall(context.Background(), &http.Client{Timeout: scaled(30 * time.Second)}, p, http.MethodPost, "/subscriptions",
		map[string]any{"events": []string{"svc.upgraded", "svc.upgrade_failed"}, "url": rc.srv.URL + "/hook"}, &sub); err != nil || sub.SigningKey == "" {
		t.Fatalf("subscribe to the upgrade events: %v", err)
	}
	rc.setKey(sub.SigningKey)
	return rc
}

// TestUpgradeInPlace runs the old build, uploads a broken build (rolled
// back: the old binary serves on, svc.upgrade_failed says why), then the
// new build (svc.upgraded; the same process, now the new version, with
// its state).
func TestUpgradeInPlace(t *testing.T) {
	p, exe, rc := startUpgradable(t)
	pid := p.current().cmd.Process.Pid
	oldDigest := fileDigest(t, exe)
	a, _, err := p.Client().CreateApp(ctxTimeout(t, 30*time.Second), api.NewApp{Name: "Kept across upgrades"})
	if err != nil {
		t.Fatalf("create an app: %v", err)
	}

	// A broken build: it runs "version", then cannot serve.
	status, body := postUpgrade(t, p, brokenBuild(t), "")
	var accepted struct {
		Upgrade struct{ ID, State, From, To string } `json:"upgrade"`
	}
	if status != http.StatusAccepted || json.Unmarshal(body, &accepted) != nil || accepted.Upgrade.State != "restarting" ||
		accepted.Upgrade.From != oldVersion || accepted.Upgrade.To != "9.9.9-broken" {
		t.Fatalf("POST /api/v1/upgrade (broken build): %d %s; want 202, restarting from %s to 9.9.9-broken", status, body, oldVersion)
	}
	st := waitUpgrade(t, p, accepted.Upgrade.ID, scaled(3*time.Minute))
	if st.Upgrade.State != "failed" || st.Upgrade.Reason == nil || !strings.Contains(*st.Upgrade.Reason, "brokensvc: this build cannot serve") {
		t.Errorf("the broken build's upgrade: %+v; want failed with the build's last line as the reason", st.Upgrade)
	}
	if st.Version != oldVersion {
		t.Errorf("after the rollback version %q runs, want %q", st.Version, oldVersion)
	}
	failed := waitHook(t, rc, "svc.upgrade_failed", scaled(time.Minute))
	if failed["from"] != oldVersion || failed["to"] != "9.9.9-broken" || !strings.Contains(fmt.Sprint(failed["reason"]), "exit status 1") {
		t.Errorf("svc.upgrade_failed data %v; want from %s, to 9.9.9-broken and the exit status in the reason", failed, oldVersion)
	}
	if fileDigest(t, exe) != oldDigest {
		t.Error("after the rollback the executable is not the old binary")
	}
	if got := p.current().cmd.Process.Pid; !p.running() || got != pid {
		t.Fatalf("after the rollback: running %v, pid %d; want pid %d", p.running(), got, pid)
	}

	// The new build.
	status, body = postUpgrade(t, p, versionBuild(t, newVersion), "")
	if status != http.StatusAccepted || json.Unmarshal(body, &accepted) != nil || accepted.Upgrade.To != newVersion {
		t.Fatalf("POST /api/v1/upgrade (new build): %d %s; want 202 to %s", status, body, newVersion)
	}
	st = waitUpgrade(t, p, accepted.Upgrade.ID, scaled(3*time.Minute))
	if st.Upgrade.State != "done" || st.Version != newVersion || st.Upgrade.From != oldVersion || st.Upgrade.To != newVersion {
		t.Fatalf("after the upgrade: %+v, version %s; want done from %s to %s", st.Upgrade, st.Version, oldVersion, newVersion)
	}
	upgraded := waitHook(t, rc, "svc.upgraded", scaled(time.Minute))
	if upgraded["from"] != oldVersion || upgraded["to"] != newVersion {
		t.Errorf("svc.upgraded data %v; want from %s to %s", upgraded, oldVersion, newVersion)
	}
	if got := p.current().cmd.Process.Pid; !p.running() || got != pid {
		t.Fatalf("after the upgrade: running %v, pid %d; want the same pid %d", p.running(), got, pid)
	}
	if out, err := exec.Command(exe, "version").Output(); err != nil || strings.TrimSpace(string(out)) != newVersion {
		t.Errorf("%s version: %q, %v; want %s", exe, out, err, newVersion)
	}
	if _, err := os.Stat(exe + ".prev"); err != nil {
		t.Errorf("the previous binary is not kept as %s.prev: %v", exe, err)
	}
	if got, _, err := p.Client().App(ctxTimeout(t, 30*time.Second), a.App.ID); err != nil || got.App.Name != "Kept across upgrades" {
		t.Errorf("the app created before the upgrades: %+v, %v", got, err)
	}
	if n := strings.Count(p.logText(), "upgrade: first start after the upgrade"); n != 1 {
		t.Errorf("%d first starts of the new binary logged, want 1", n)
	}
}

// TestUpgradeRefusesABadSignature: with upgrade.signing_public_key set, a
// binary without a signature, or with one another key made, is refused
// before anything changes; the right signature is accepted.
func TestUpgradeRefusesABadSignature(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p, exe, _ := startUpgradable(t, "SVC_UPGRADE_SIGNING_PUBLIC_KEY="+base64.StdEncoding.EncodeToString(pub))
	before := fileDigest(t, exe)
	bin := versionBuild(t, newVersion)
	digest := fileDigest(t, bin)
	for _, tc := range []struct{ name, sig, want string }{
		{"unsigned", "", `"signature":"missing"`},
		{"signed with another key", base64.StdEncoding.EncodeToString(ed25519.Sign(other, digest[:])), `"signature":"invalid"`},
		{"not a signature", "bm90IGEgc2lnbmF0dXJl", `"signature":"invalid"`},
	} {
		status, body := postUpgrade(t, p, bin, tc.sig)
		if status != http.StatusBadRequest || !bytes.Contains(body, []byte("VALID_INVALID")) || !bytes.Contains(body, []byte(tc.want)) ||
			!bytes.Contains(body, []byte("svc upgrade sign")) {
			t.Errorf("%s: %d %s; want 400 VALID_INVALID with %s and the remedy", tc.name, status, body, tc.want)
		}
	}
	var st upgradeState
	if _, err := apiCall(context.Background(), &http.Client{Timeout: scaled(10 * time.Second)}, p, http.MethodGet, "/upgrade", nil, &st); err != nil ||
		st.Upgrade != nil || st.Version != oldVersion || !st.SignatureRequired {
		t.Errorf("after the refusals GET /api/v1/upgrade: %+v, %v; want no upgrade, version %s, signature_required", st, err, oldVersion)
	}
	if fileDigest(t, exe) != before {
		t.Error("a refused upload changed the executable")
	}
	status, body := postUpgrade(t, p, bin, base64.StdEncoding.EncodeToString(ed25519.Sign(priv, digest[:])))
	var accepted struct {
		Upgrade struct{ ID string } `json:"upgrade"`
	}
	if status != http.StatusAccepted || json.Unmarshal(body, &accepted) != nil {
		t.Fatalf("correctly signed: %d %s; want 202", status, body)
	}
	if st := waitUpgrade(t, p, accepted.Upgrade.ID, scaled(3*time.Minute)); st.Upgrade.State != "done" || st.Version != newVersion {
		t.Errorf("the signed upgrade: %+v, version %s; want done, %s", st.Upgrade, st.Version, newVersion)
	}
}
