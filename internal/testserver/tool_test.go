package testserver

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFindTool(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "tool")
	if err := os.WriteFile(plain, []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "my-tool")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	// A setting that is not an executable file is an error naming it.
	for _, p := range []string{dir, plain, filepath.Join(dir, "missing")} {
		t.Setenv("SVC_TOOL_BIN", p)
		if got, err := FindTool("SVC_TOOL_BIN", "tool", exe); err == nil || !strings.Contains(err.Error(), "SVC_TOOL_BIN") {
			t.Errorf("SVC_TOOL_BIN=%s: FindTool = %q, %v; want an error naming SVC_TOOL_BIN", p, got, err)
		}
	}
	// The setting comes first, then the cache.
	t.Setenv("SVC_TOOL_BIN", exe)
	if got, err := FindTool("SVC_TOOL_BIN", "tool", plain); err != nil || got != exe {
		t.Errorf("FindTool = %q, %v; want the setting %s", got, err, exe)
	}
	t.Setenv("SVC_TOOL_BIN", "")
	if got, err := FindTool("SVC_TOOL_BIN", "tool", exe); err != nil || got != exe {
		t.Errorf("FindTool = %q, %v; want the cached %s", got, err, exe)
	}
	if got, err := FindTool("SVC_TOOL_BIN", "tool", plain); err == nil || !strings.Contains(err.Error(), plain) {
		t.Errorf("FindTool with nothing usable = %q, %v; want an error naming where it looked", got, err)
	}
}

func TestWaitHTTP(t *testing.T) {
	answers := make(chan int, 10)
	answers <- http.StatusServiceUnavailable
	answers <- http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		select {
		case code := <-answers:
			w.WriteHeader(code)
		default:
		}
	}))
	defer srv.Close()
	running := make(chan struct{})
	if err := WaitHTTP(srv.Client(), srv.URL, running, 10*time.Second, "server"); err != nil {
		t.Errorf("WaitHTTP on a server answering 503 twice, then 200: %v", err)
	}
	answers <- http.StatusServiceUnavailable
	exited := make(chan struct{})
	close(exited)
	if err := WaitHTTP(srv.Client(), srv.URL+"/x", exited, 10*time.Second, "server"); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("WaitHTTP after the process exited: %v", err)
	}
}
