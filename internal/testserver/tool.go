package testserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ToolCache is where scripts/<name>-tool.sh keeps the binary it builds:
// ${SVC_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/svc-tools}/<name>-<version>/<name>,
// the version being versionEnv's value when set, else version.
func ToolCache(name, versionEnv, version string) string {
	if v := os.Getenv(versionEnv); v != "" {
		version = v
	}
	dir := os.Getenv("SVC_TOOLS_DIR")
	if dir == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return ""
			}
			cache = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(cache, "svc-tools")
	}
	return filepath.Join(dir, name+"-"+version, name)
}

// FindTool returns the binary of a test-time tool: envBinary's value,
// which must be an executable file; else name on PATH; else cached (the
// path ToolCache names) when it is there. The error says why there is none.
func FindTool(envBinary, name, cached string) (string, error) {
	if p := os.Getenv(envBinary); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%s=%s is not an executable file: %w", envBinary, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if cached != "" && executable(cached) == nil {
		return cached, nil
	}
	return "", fmt.Errorf("no %s binary (%s is not set, no %s is on PATH and none is at %s)", name, envBinary, name, cached)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return err
	case fi.IsDir():
		return errors.New("it is a directory")
	case fi.Mode()&0o111 == 0:
		return errors.New("it is not executable")
	}
	return nil
}

// StartTool starts a server of a test-time tool for t: it finds the
// binary with find; without one it skips t, saying what the test runs and
// how to get the tool (howToGet), or fails it when envRequire is set to 1
// (CI); then it makes up to three attempts of start in one temporary
// directory (a free port can be taken between picking and binding it, and
// each attempt picks another), and fails t when none succeeds.
func StartTool[S any](t testing.TB, find func() (string, error), envRequire, what, howToGet string,
	start func(bin, dir string, attempt int) (S, error)) S {
	t.Helper()
	bin, err := find()
	if err != nil {
		if os.Getenv(envRequire) == "1" {
			t.Fatalf("%s=1 but there is %v; %s", envRequire, err, howToGet)
		}
		t.Skipf("skipping: this test runs %s and there is %v; to run it, %s", what, err, howToGet)
	}
	dir := t.TempDir()
	for attempt := 1; ; attempt++ {
		s, err := start(bin, dir, attempt)
		if err == nil {
			return s
		}
		if attempt == 3 {
			t.Fatalf("start %s: %v", what, err)
		}
	}
}

// WaitHTTP polls url with client until it answers 200, within timeout;
// it gives up early when exited is closed (the server's process ended).
// what names the server in the error.
func WaitHTTP(client *http.Client, url string, exited <-chan struct{}, timeout time.Duration, what string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = "it answered HTTP " + strconv.Itoa(resp.StatusCode)
		} else {
			last = err.Error()
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before it answered %s", what, url)
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer %s with 200 within %s: %s", what, url, timeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Serve starts a server's process, cmd, with its output in a new file at
// logPath, and waits for ready (given a channel closed once the process
// has exited). When the test ends the process is stopped (SIGINT, then
// SIGKILL after grace), and then, if the test failed, the tail of its log
// is shown. When ready fails the process is stopped and the error carries
// the log's tail. stop stops it at once; it is safe to call more than once.
// what names the server in messages.
func Serve(t testing.TB, cmd *exec.Cmd, logPath, what string, grace time.Duration, ready func(exited <-chan struct{}) error) (stop func(), err error) {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	exited, err := Run(cmd, logFile)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	stop = func() { once.Do(func() { Stop(cmd.Process, exited, grace) }) }
	// Cleanups run last-in first-out: the server stops, then its log is
	// shown if the test failed.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s output (%s):\n%s", what, logPath, Tail(logPath, 32<<10))
		}
	})
	t.Cleanup(stop)
	if err := ready(exited); err != nil {
		stop()
		return nil, fmt.Errorf("%w\n%s output (%s):\n%s", err, what, logPath, Tail(logPath, 8<<10))
	}
	return stop, nil
}
