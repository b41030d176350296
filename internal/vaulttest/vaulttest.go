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
	"fmt"
	"github.com/svchost/svc/internal/testserver"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

	stop func()
}

// Binary returns the vault binary the harness would run, or an error that
// says why there is none.
func Binary() (string, error) { return testserver.FindTool(EnvBinary, "vault", CachePath()) }

// CachePath is where scripts/vault-tool.sh keeps the binary it builds:
// ${SVC_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/svc-tools}/vault-<version>/vault.
func CachePath() string { return testserver.ToolCache("vault", "SVC_VAULT_VERSION", Version) }

// Start starts a dev server for the test and stops it at the test's end.
// Without a vault binary it skips the test, or fails it when
// SVC_REQUIRE_VAULT=1.
func Start(t testing.TB) *Server {
	t.Helper()
	return testserver.StartTool(t, Binary, EnvRequire, "a real Vault dev server", howToGet, func(bin, dir string, attempt int) (*Server, error) {
		return start(t, bin, dir, attempt)
	})
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
	home := filepath.Join(dir, fmt.Sprintf("home-%d", attempt))
	if err := os.Mkdir(home, 0o700); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "server", "-dev",
		"-dev-root-token-id="+s.RootToken,
		"-dev-listen-address=127.0.0.1:"+strconv.Itoa(port))
	// The dev server stores its root token in ~/.vault-token: give it a
	// home of its own, and none of our VAULT_* settings.
	cmd.Env = append(testserver.EnvironWithout("VAULT_", "HOME="), "HOME="+home)
	cmd.Dir = dir
	cmd.SysProcAttr = procAttr()
	// sys/health answers 200 once the server is initialised, unsealed and
	// active.
	s.stop, err = testserver.Serve(t, cmd, s.LogPath, "vault dev server", stopTimeout, func(exited <-chan struct{}) error {
		return testserver.WaitHTTP(&http.Client{Timeout: 2 * time.Second}, s.Addr+"/v1/sys/health", exited, startTimeout, "vault dev server")
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Stop stops the server (SIGINT, then SIGKILL after a grace period); it is
// safe to call more than once, and tests call it to make Vault unreachable.
func (s *Server) Stop() {
	s.stop()
}

// Log returns the server's output so far.
func (s *Server) Log() string { return testserver.Tail(s.LogPath, 1<<20) }
