package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svchost/svc/api"
)

// The config file is the person's credential: 0600 in a 0700 directory
// (tightened when it was looser), and a file others can read is refused.
func TestConfigFileIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "svc")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.json")
	want := cliConfig{Addr: "http://localhost:8080", Token: "svc_secret"}
	if err := saveConfig(path, want); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v (%v); want %04o", p, fi.Mode().Perm(), err, mode)
		}
	}
	if got, err := loadConfig(path); err != nil || got != want {
		t.Errorf("loadConfig = %+v, %v; want %+v", got, err, want)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the directory holds %d entries; want the file alone (no temporary left)", len(ents))
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a file others can read: %v; want a refusal naming chmod 600", err)
	}
	if got, err := loadConfig(filepath.Join(dir, "none.json")); err != nil || got != (cliConfig{}) {
		t.Errorf("a missing file = %+v, %v; want the zero config", got, err)
	}
}

// Flags win over the environment, which wins over the file; the file's
// token goes only to the file's address.
func TestResolveOrder(t *testing.T) {
	file := cliConfig{Addr: "http://a:1", Token: "file-token"}
	tests := []struct {
		name                               string
		flagAddr, flagTok, envAddr, envTok string
		wantAddr, wantTok                  string
	}{
		{"file alone", "", "", "", "", "http://a:1", "file-token"},
		{"env wins over file", "", "", "http://b:2", "env-token", "http://b:2", "env-token"},
		{"flags win over env", "http://c:3", "flag-token", "http://b:2", "env-token", "http://c:3", "flag-token"},
		{"file token not sent elsewhere", "http://c:3", "", "", "", "http://c:3", ""},
		{"file token to the same address", "http://a:1/", "", "", "", "http://a:1/", "file-token"},
		{"env address, file token not sent", "", "", "http://b:2", "", "http://b:2", ""},
	}
	for _, tt := range tests {
		addr, tok := resolve(tt.flagAddr, tt.flagTok, tt.envAddr, tt.envTok, file)
		if addr != tt.wantAddr || tok != tt.wantTok {
			t.Errorf("%s: resolve = %q, %q; want %q, %q", tt.name, addr, tok, tt.wantAddr, tt.wantTok)
		}
	}
}

// Using a command wrongly exits 2 with a message on stderr, before any
// request: no server listens at the address given.
func TestUsageErrorsExit2(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("SVC_ADDR", "")
	t.Setenv("SVC_TOKEN", "")
	for _, args := range [][]string{
		{"frob"},
		{"apps", "frob"},
		{"apps", "get"},
		{"apps", "get", "a", "b"},
		{"apps", "list", "--bogus"},
		{"apps", "list", "--addr", "http://127.0.0.1:1", "--output", "yaml"},
		{"apps", "list"}, // no address anywhere
		{"deploy", "app", "--revision", "x", "--addr", "http://127.0.0.1:1"},
		{"login", "--addr", "http://127.0.0.1:1", "--token", "t", "--token-stdin"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("svc %s: exit %d, stderr %q; want 2 and a message", strings.Join(args, " "), code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run([]string{"apps"}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "list") {
		t.Errorf("svc apps: exit %d, %q; want its help and 0", code, out.String())
	}
}

// A refusal shows its code and message, then the remedy, one a line.
func TestPrintErrorShowsCodeAndRemedy(t *testing.T) {
	var b bytes.Buffer
	printError(&b, &exitError{code: 1, err: &api.Error{Code: "NOT_FOUND", Message: "no app x", Remedy: "svc apps list names them", RequestID: "req_1"}})
	if want := "NOT_FOUND: no app x\nremedy: svc apps list names them\nrequest: req_1\n"; b.String() != want {
		t.Errorf("printError = %q; want %q", b.String(), want)
	}
	b.Reset()
	printError(&b, usageError("bad"))
	if b.String() != "svc: bad\n" {
		t.Errorf("printError = %q", b.String())
	}
}
