// Package vaulttest starts a real Vault dev server (`vault server -dev`) on
// a free loopback port for tests, with a random root token, and stops it
// when the test ends. Its output goes to a file under the test's temporary
// directory and is shown when the test fails. A dev server keeps
// everything in memory and mounts KV version 2 at secret/.
//
// The vault binary is SVC_VAULT_BIN, else `vault` on PATH, else the one
// scripts/vault-tool.sh built into its cache. Without one, tests skip and
// say how to get one; with SVC_REQUIRE_VAULT=1 (CI) they fail instead.
//
// It is for tests only and must not be imported by production code. It
// speaks to Vault with net/http alone: Vault's API client belongs to
// vaultsecrets.
package vaulttest

import (
	"context"
	"errors"
	"fmt"
	"github.com/svchost/svc/internal/testserver"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Version is the Vault release scripts/vault-tool.sh builds.
const Version = "v1.21.0"

// Environment variables the harness reads.
const (
	// EnvBinary names the vault binary to run.
	EnvBinary = "SVC_VAULT_BIN"
	// EnvRequire, set to 1, turns a missing binary into a test failure.
	EnvRequire = "SVC_REQUIRE_VAULT"
)

// howToGet is how a developer gets a vault binary.
const howToGet = "build one with `bash scripts/vault-tool.sh` (once per machine: Vault " + Version +
	" goes into a cache outside the repository, in about 6.5 minutes; `make test` then finds it), or set " +
	EnvBinary + " to a vault binary"

// startTimeout bounds a dev server's start, up to answering sys/health.
const startTimeout = 60 * time.Second

// stopTimeout is how long a dev server has to exit after SIGINT.
const stopTimeout = 10 * time.Second

// Server is a running dev server.
type Server struct {
	// Addr is its API address, http://127.0.0.1:<port>.
	Addr string
	// RootToken is its root token.
	RootToken string
	// LogPath is the file its output goes to.
	LogPath string

	cmd      *exec.Cmd
	exited   <-chan struct{}
	stopOnce sync.Once
}

// Binary returns the vault binary the harness would run, or an error that
// says why there is none.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%s=%s is not an executable file: %w", EnvBinary, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("vault"); err == nil {
		return p, nil
	}
	if p := CachePath(); p != "" && executable(p) == nil {
		return p, nil
	}
	return "", errors.New("no vault binary (" + EnvBinary + " is not set, no vault is on PATH and none is at " + CachePath() + ")")
}

// CachePath is where scripts/vault-tool.sh keeps the binary it builds:
// ${SVC_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/svc-tools}/vault-<version>/vault.
func CachePath() string {
	version := os.Getenv("SVC_VAULT_VERSION")
	if version == "" {
		version = Version
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
	return filepath.Join(dir, "vault-"+version, "vault")
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

// Start starts a dev server for the test and stops it at the test's end.
// Without a vault binary it skips the test, or fails it when
// SVC_REQUIRE_VAULT=1.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%s=1 but there is %v; %s", EnvRequire, err, howToGet)
		}
		t.Skipf("skipping: this test runs a real Vault dev server and there is %v; to run it, %s", err, howToGet)
	}
	dir := t.TempDir()
	var lastErr error
	// A free port can be taken between picking and binding it: try again
	// on another.
	for attempt := 1; attempt <= 3; attempt++ {
		s, err := start(t, bin, dir, attempt)
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatalf("start vault dev server: %v", lastErr)
	return nil
}

func start(t testing.TB, bin, dir string, attempt int) (*Server, error) {
	t.Helper()
	port, err := testserver.FreePorts(2)
	if err != nil {
		return nil, err
	}
	s := &Server{
		Addr:      "http://127.0.0.1:" + strconv.Itoa(port),
		RootToken: "root-" + testserver.RandomHex(16),
		LogPath:   filepath.Join(dir, fmt.Sprintf("vault-%d.log", attempt)),
	}
	logFile, err := os.Create(s.LogPath)
	if err != nil {
		return nil, err
	}
	home := filepath.Join(dir, fmt.Sprintf("home-%d", attempt))
	if err := os.Mkdir(home, 0o700); err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, "server", "-dev",
		"-dev-root-token-id="+s.RootToken,
		"-dev-listen-address=127.0.0.1:"+strconv.Itoa(port))
	// The dev server stores its root token in ~/.vault-token: give it a
	// home of its own, and none of our VAULT_* settings.
	s.cmd.Env = append(testserver.EnvironWithout("VAULT_", "HOME="), "HOME="+home)
	s.cmd.Dir = dir
	s.cmd.SysProcAttr = procAttr()
	if s.exited, err = testserver.Run(s.cmd, logFile); err != nil {
		return nil, err
	}
	// Cleanups run last-in first-out: the server stops, then its log is
	// shown if the test failed.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("vault dev server output (%s):\n%s", s.LogPath, testserver.Tail(s.LogPath, 32<<10))
		}
	})
	t.Cleanup(s.Stop)

	if err := s.waitHealthy(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%w\nvault output (%s):\n%s", err, s.LogPath, testserver.Tail(s.LogPath, 8<<10))
	}
	return s, nil
}

// waitHealthy polls sys/health until the server is initialised, unsealed
// and active.
func (s *Server) waitHealthy() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Addr+"/v1/sys/health", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = "sys/health answered HTTP " + strconv.Itoa(resp.StatusCode)
		} else {
			last = err.Error()
		}
		select {
		case <-s.exited:
			return fmt.Errorf("vault dev server exited before it answered sys/health (%s)", s.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("vault dev server did not become healthy within %s: %s", startTimeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop stops the server (SIGINT, then SIGKILL after a grace period); it is
// safe to call more than once, and tests call it to make Vault unreachable.
func (s *Server) Stop() {
	s.stopOnce.Do(func() { testserver.Stop(s.cmd.Process, s.exited, stopTimeout) })
}

// Log returns the server's output so far.
func (s *Server) Log() string { return testserver.Tail(s.LogPath, 1<<20) }
