package vaulttest

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStartAnswersAndStops(t *testing.T) {
	s := Start(t)
	if !strings.HasPrefix(s.Addr, "http://127.0.0.1:") || !strings.HasPrefix(s.RootToken, "root-") {
		t.Fatalf("server %+v", s)
	}
	// The root token works, and KV version 2 is mounted at secret/.
	req, _ := http.NewRequest(http.MethodGet, s.Addr+"/v1/sys/mounts/secret", nil)
	req.Header.Set("X-Vault-Token", s.RootToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var mount struct {
		Type    string            `json:"type"`
		Options map[string]string `json:"options"`
	}
	err = json.NewDecoder(resp.Body).Decode(&mount)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || mount.Type != "kv" || mount.Options["version"] != "2" {
		t.Fatalf("sys/mounts/secret: HTTP %d, %+v, %v; want KV version 2", resp.StatusCode, mount, err)
	}
	if home, err := os.UserHomeDir(); err == nil {
		if b, err := os.ReadFile(filepath.Join(home, ".vault-token")); err == nil && strings.Contains(string(b), s.RootToken) {
			t.Fatal("the dev server wrote its root token into the user's ~/.vault-token")
		}
	}
	if !strings.Contains(s.Log(), "Api Address: "+s.Addr) { // printed before it listens
		t.Errorf("the server's output was not captured:\n%s", s.Log())
	}

	s.Stop()
	s.Stop() // twice is fine
	client := &http.Client{Timeout: 2 * time.Second}
	if resp, err := client.Get(s.Addr + "/v1/sys/health"); err == nil {
		resp.Body.Close()
		t.Fatal("the server still answers after Stop")
	}
}

func TestTwoServersRunSideBySide(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.Addr == b.Addr || a.RootToken == b.RootToken {
		t.Fatalf("two servers share an address or a token: %s %s", a.Addr, b.Addr)
	}
}
