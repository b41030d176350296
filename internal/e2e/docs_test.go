package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/nomadtest"
	"github.com/svchost/svc/internal/vaulttest"
)

// docBlocks returns the ```sh blocks of a section (from its "## " heading
// to the next) of a document under docs/, except those that only export
// the environment (where things are: the test sets that itself).
func docBlocks(t *testing.T, name, section string) []string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	text, ok := strings.CutPrefix(string(b)[max(strings.Index(string(b), "\n## "+section+"\n"), 0):], "\n## "+section+"\n")
	if !ok {
		t.Fatalf("docs/%s has no section %q", name, section)
	}
	if end := strings.Index(text, "\n## "); end >= 0 {
		text = text[:end]
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(text, -1) {
		exportsOnly := true
		for line := range strings.SplitSeq(m[1], "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "export ") {
				exportsOnly = false
			}
		}
		if !exportsOnly {
			out = append(out, m[1])
		}
	}
	return out
}

// jwksProxy stands in front of the fake Nomad, which serves no JWKS:
// /.well-known/jwks.json answers an RSA key set, as a Nomad agent's does,
// and everything else goes to the fake.
func jwksProxy(t *testing.T, nomad string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "alg": "RS256", "use": "sig", "kid": "doc-test",
		"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
	}}})
	u, err := url.Parse(nomad)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/jwks.json" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(jwks)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// vaultCall calls the Vault dev server's API with token and decodes the
// answer's data into out (when not nil); it returns the status.
func vaultCall(t *testing.T, v *vaulttest.Server, token, method, path string, body, out any) int {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, v.Addr+"/v1/"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Vault-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// TestClusterModeDocWorksWhenPasted runs the shell blocks of
// docs/cluster-mode.md's "Configure it", in order, in one POSIX shell, as an operator
// pasting them would: against the real svc binary, a real Vault dev server
// (the vault CLI sets up the JWT auth method for Nomad's workload
// identities, the policies and svc's AppRole login), the fake Consul, and
// Nomad: a real agent when SVC_NOMAD_BIN is set (Vault then fetches its
// JWKS), else the fake one behind a proxy that serves a JWKS. Every curl
// that sends a body says it is JSON. Afterwards svc has loaded the three
// adapters the doc configures, as primaries, logs in to Vault with the
// AppRole the doc made (a secret set through the API lands in Vault, so
// svc's policy suffices), a token of the workloads' policy can read it,
// the JWT role is there, and the CLI's `svc adapters delete` refuses to
// delete the vault adapter, naming its dependents.
func TestClusterModeDocWorksWhenPasted(t *testing.T) {
	blocks := docBlocks(t, "cluster-mode.md", "Configure it")
	if len(blocks) < 3 {
		t.Fatalf("docs/cluster-mode.md has %d shell blocks to run; want the vault setup, the adapters and the list", len(blocks))
	}
	script := strings.Join(blocks, "\n")
	for _, cmd := range regexp.MustCompile(`(?s)curl .*?(?:\n\n|$)`).FindAllString(script, -1) {
		if strings.Contains(cmd, " -d ") && !strings.Contains(cmd, "Content-Type: application/json") {
			t.Errorf("a curl with a body lacks Content-Type: application/json: %s", cmd)
		}
	}

	vaultBin, err := vaulttest.Binary()
	if err != nil {
		t.Skipf("no vault binary (%v): the doc's recipe needs the vault CLI", err)
	}
	v := vaulttest.Start(t)
	f := startFakes(t, v)
	nomadAddr := ""
	if os.Getenv("SVC_NOMAD_BIN") != "" {
		nomadAddr = nomadtest.Start(t, nomadtest.Options{}).Addr
	} else {
		t.Log("SVC_NOMAD_BIN is not set: the doc runs against the fake Nomad, and Vault fetches a stand-in JWKS")
		nomadAddr = jwksProxy(t, f.Nomad)
	}
	s := startAppServer(t, "docs")
	base := s.p.Base()
	var before struct {
		StartedAt time.Time `json:"started_at"`
	}
	s.must(t, "GET", "/adapters", nil, http.StatusOK, &before)

	home := t.TempDir()
	sh := exec.Command("sh", "-eu", "-c", script)
	sh.Dir = home
	sh.Env = []string{
		"PATH=" + filepath.Dir(vaultBin) + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + home,
		"SVC=" + base, "TOKEN=" + s.token(), "SVC_ARTIFACT_URL=" + base,
		"VAULT_ADDR=" + v.Addr, "VAULT_TOKEN=" + v.RootToken,
		"NOMAD_ADDR=" + nomadAddr, "NOMAD_TOKEN=doc-nomad-token",
		"CONSUL_HTTP_ADDR=" + f.Consul, "CONSUL_HTTP_TOKEN=doc-consul-token",
	}
	out, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("the doc's commands failed: %v\n%s", err, out)
	}
	waitRestarted(t, s.p, before.StartedAt)

	// The three adapters are loaded and primary.
	type view struct {
		AdapterID    string         `json:"adapter_id"`
		Category     string         `json:"category"`
		Kind         string         `json:"kind"`
		Primary      bool           `json:"primary"`
		Loaded       bool           `json:"loaded"`
		Capabilities map[string]any `json:"capabilities"`
	}
	want := map[string]string{"secrets": "vault", "runtime": "nomad", "routes": "consul"}
	got := map[string]view{}
	for deadline := time.Now().Add(scaled(30 * time.Second)); len(got) < len(want); time.Sleep(100 * time.Millisecond) {
		var list struct{ Items []view }
		s.must(t, "GET", "/adapters", nil, http.StatusOK, &list)
		clear(got)
		for _, it := range list.Items {
			if it.Primary && it.Loaded && want[it.Category] == it.Kind {
				got[it.Category] = it
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the doc's restart the loaded primaries are %+v; want %v", list.Items, want)
		}
	}
	if c := got["secrets"].Capabilities; c["auth"] != "approle" || c["prefix"] != "svc" {
		t.Errorf("vault adapter capabilities = %v; want the doc's AppRole login and prefix", c)
	}
	if c := got["runtime"].Capabilities; c["build_location"] != "nomad" || c["driver"] != "exec" {
		t.Errorf("nomad runtime capabilities = %v", c)
	}

	// svc's policy lets it write a secret; the workloads' policy reads it.
	app := s.createApp(t, "Doc app")
	s.must(t, "PUT", "/apps/"+app+"/secrets/DOC_KEY", map[string]string{"value": "doc-value"}, http.StatusOK, nil)
	if val, err := readKV(v, "secret/data/svc/apps/"+app+"/DOC_KEY"); err != nil || val != "doc-value" {
		t.Fatalf("vault holds %q (%v) where the doc's paths say", val, err)
	}
	var tok struct {
		Auth struct {
			ClientToken string `json:"client_token"`
		} `json:"auth"`
	}
	if st := vaultCall(t, v, v.RootToken, "POST", "auth/token/create", map[string]any{"policies": []string{"svc-apps"}}, &tok); st != http.StatusOK {
		t.Fatalf("a token of the workloads' policy: %d", st)
	}
	var caps struct {
		Data map[string][]string `json:"data"`
	}
	path := "secret/data/svc/apps/" + app + "/DOC_KEY"
	vaultCall(t, v, tok.Auth.ClientToken, "POST", "sys/capabilities-self", map[string]any{"paths": []string{path}}, &caps)
	if c := caps.Data[path]; !slices.Equal(c, []string{"read"}) {
		t.Errorf("the workloads' policy gives %v on %s; want read", caps.Data, path)
	}
	var role struct {
		Data struct {
			BoundAudiences []string `json:"bound_audiences"`
			TokenPolicies  []string `json:"token_policies"`
		} `json:"data"`
	}
	if st := vaultCall(t, v, v.RootToken, "GET", "auth/jwt-nomad/role/svc-apps", nil, &role); st != http.StatusOK ||
		!slices.Contains(role.Data.TokenPolicies, "svc-apps") || !slices.Contains(role.Data.BoundAudiences, "vault.io") {
		t.Errorf("the JWT role: %d %+v", st, role.Data)
	}

	// The CLI refuses to delete the vault adapter, naming its dependents.
	cli := exec.Command(svcBin, "adapters", "delete", got["secrets"].AdapterID)
	cli.Env = []string{"SVC_ADDR=" + base, "SVC_TOKEN=" + s.token()}
	var stdout, stderr bytes.Buffer
	cli.Stdout, cli.Stderr = &stdout, &stderr
	err = cli.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(stderr.String(), "STATE_INVALID") ||
		!strings.Contains(stderr.String(), "secrets:") || !strings.Contains(stderr.String(), "primary:") {
		t.Fatalf("svc adapters delete of the vault adapter: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	list := exec.Command(svcBin, "adapters", "list", "--addr", base, "--token", s.token())
	out, err = list.CombinedOutput()
	if err != nil || !strings.Contains(string(out), got["secrets"].AdapterID) {
		t.Fatalf("svc adapters list: %v\n%s", err, out)
	}
	// Its row says it was configured through the API (ORIGIN, the fourth
	// column).
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 3 && f[0] == got["secrets"].AdapterID && f[3] != "api" {
			t.Errorf("svc adapters list: the vault adapter's origin is %q, want api\n%s", f[3], out)
		}
	}
}
