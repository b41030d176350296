// Package pgtest starts a real, throwaway PostgreSQL cluster for tests: it
// runs initdb and postgres from the installed binaries (Debian's
// /usr/lib/postgresql/<major>/bin, or SVC_POSTGRES_BIN_DIR, or PATH) in the
// test's temporary directory, listening on a free loopback port over TCP
// only, with password (SCRAM) authentication for a superuser whose password
// is drawn at random. It stops the cluster when the test ends and shows its
// log when the test failed. Running as root, it runs the cluster as the
// postgres system user (PostgreSQL refuses to run as root). It never uses
// the distribution's own cluster or its service.
//
// Without the binaries, tests skip and say how to install them
// (apt-get install postgresql); with SVC_REQUIRE_POSTGRES=1 (CI) they fail.
//
// It is for tests only and must not be imported by production code. It
// speaks no PostgreSQL protocol: a test connects with the driver of the
// package under test.
package pgtest

import (
	"errors"
	"fmt"
	"github.com/svchost/svc/internal/testserver"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Environment variables the harness reads.
const (
	// EnvBinDir names a directory holding initdb and postgres.
	EnvBinDir = "SVC_POSTGRES_BIN_DIR"
	// EnvRequire, set to 1, turns missing binaries into a test failure.
	EnvRequire = "SVC_REQUIRE_POSTGRES"
)

// howToGet is how a developer gets the binaries.
const howToGet = "install PostgreSQL: apt-get install postgresql (its own cluster need not run: tests start their own), or set " +
	EnvBinDir + " to a directory holding initdb and postgres"

// Timeouts of a cluster's start and stop.
const (
	startTimeout = 60 * time.Second
	stopTimeout  = 15 * time.Second
)

// Server is a running cluster.
type Server struct {
	// Host and Port are where it listens (TCP, loopback).
	Host string
	Port int
	// User and Password are the superuser's credentials; Database is the
	// database it has from the start.
	User     string
	Password string
	Database string
	// Version is the server's major version, from the binary's directory
	// or its --version answer.
	Version string
	// LogPath is the file its output goes to.
	LogPath string

	dataDir  string
	cmd      *exec.Cmd
	exited   <-chan struct{}
	stopOnce sync.Once
}

// URL is a connection URL for the superuser to the initial database, with
// TLS off (the cluster has none).
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", s.User, s.Password, s.Addr(), s.Database)
}

// Addr is host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// Binaries returns the directory holding initdb and postgres, or an error
// that says why there is none. Of several Debian versions, the newest wins.
func Binaries() (string, error) {
	if d := os.Getenv(EnvBinDir); d != "" {
		if err := hasBinaries(d); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvBinDir, d, err)
		}
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return majorOf(b) - majorOf(a) })
	for _, d := range dirs {
		if hasBinaries(d) == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		if d := filepath.Dir(p); hasBinaries(d) == nil {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (no /usr/lib/postgresql/*/bin/postgres, none on PATH, " + EnvBinDir + " not set)")
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func hasBinaries(dir string) error {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is not an executable file", filepath.Join(dir, name))
		}
	}
	return nil
}

// Start starts a cluster for the test and stops it at the test's end.
// Without the binaries it skips the test, or fails it when
// SVC_REQUIRE_POSTGRES=1.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binaries()
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%s=1 but there are %v; %s", EnvRequire, err, howToGet)
		}
		t.Skipf("skipping: this test runs a real PostgreSQL and there are %v; to run it, %s", err, howToGet)
	}
	as, err := runAs()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	dir := t.TempDir()
	if err := as.prepare(dir); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	s := &Server{Host: "127.0.0.1", User: "postgres", Password: "pg-" + testserver.RandomHex(16), Database: "postgres",
		Version: version(bin), dataDir: filepath.Join(dir, "data")}
	if err := s.initdb(bin, dir, as); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	var lastErr error
	// A free port can be taken between picking and binding it: try again
	// on another.
	for attempt := 1; attempt <= 3; attempt++ {
		if lastErr = s.start(t, bin, dir, as, attempt); lastErr == nil {
			return s
		}
	}
	t.Fatalf("pgtest: start postgres: %v", lastErr)
	return nil
}

// identity is the system user the cluster runs as: nil credentials for
// the current user.
type identity struct {
	cred *syscall.Credential
}

// runAs picks the user the cluster runs as: the current one, or, as
// root, the postgres system user.
func runAs() (identity, error) {
	if os.Geteuid() != 0 {
		return identity{}, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return identity{}, fmt.Errorf("running as root, the cluster must run as the postgres system user, and there is none (%v); the Debian package creates it: apt-get install postgresql", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return identity{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}, nil
}

// prepare lets the cluster's user reach dir: it owns dir, and every
// directory above it up to the system's temporary directory may be
// traversed (not listed) by others.
func (id identity) prepare(dir string) error {
	if id.cred == nil {
		return nil
	}
	if err := os.Chown(dir, int(id.cred.Uid), int(id.cred.Gid)); err != nil {
		return fmt.Errorf("give %s to the postgres user: %w", dir, err)
	}
	tmp := filepath.Clean(os.TempDir())
	for p := filepath.Dir(dir); strings.HasPrefix(p, tmp+string(filepath.Separator)); p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if err := os.Chmod(p, fi.Mode().Perm()|0o011); err != nil {
			return fmt.Errorf("let the postgres user traverse %s: %w", p, err)
		}
	}
	return nil
}

func (id identity) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	// No PG* settings of ours, and a locale every system has.
	cmd.Env = append(testserver.EnvironWithout("PG", "LC_", "LANG="), "LC_ALL=C", "LANG=C")
	cmd.SysProcAttr = procAttr(id.cred)
	return cmd
}

func (s *Server) initdb(bin, dir string, as identity) error {
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(s.Password+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(pwfile)
	if as.cred != nil {
		if err := os.Chown(pwfile, int(as.cred.Uid), int(as.cred.Gid)); err != nil {
			return err
		}
	}
	cmd := as.command(filepath.Join(bin, "initdb"), "-D", s.dataDir, "-U", s.User, "--pwfile="+pwfile,
		"--auth=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-sync")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		hint := ""
		if as.cred != nil {
			hint = fmt.Sprintf("\n(running as root, the cluster runs as the postgres user, which must be able to reach %s: set TMPDIR to a directory it can traverse, such as /tmp)", dir)
		}
		return fmt.Errorf("initdb: %w\n%s%s", err, out, hint)
	}
	return nil
}

func (s *Server) start(t testing.TB, bin, dir string, as identity, attempt int) error {
	t.Helper()
	port, err := testserver.FreePorts(1)
	if err != nil {
		return err
	}
	s.Port = port
	s.LogPath = filepath.Join(dir, fmt.Sprintf("postgres-%d.log", attempt))
	s.stopOnce = sync.Once{}
	logFile, err := os.Create(s.LogPath)
	if err != nil {
		return err
	}
	s.cmd = as.command(filepath.Join(bin, "postgres"), "-D", s.dataDir,
		"-c", "listen_addresses=127.0.0.1", "-p", strconv.Itoa(port),
		"-c", "unix_socket_directories=", // TCP only: no socket in /var/run/postgresql
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=60", "-c", "shared_buffers=16MB")
	s.cmd.Dir = dir
	if s.exited, err = testserver.Run(s.cmd, logFile); err != nil {
		return err
	}
	// Cleanups run last-in first-out: the server stops, then its log is
	// shown if the test failed.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("postgres output (%s):\n%s", s.LogPath, testserver.Tail(s.LogPath, 16<<10))
		}
	})
	t.Cleanup(s.Stop)
	if err := s.waitReady(); err != nil {
		s.Stop()
		return fmt.Errorf("%w\npostgres output (%s):\n%s", err, s.LogPath, testserver.Tail(s.LogPath, 8<<10))
	}
	return nil
}

// waitReady waits until postmaster.pid says the server accepts
// connections and its port answers.
func (s *Server) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	for {
		if b, err := os.ReadFile(filepath.Join(s.dataDir, "postmaster.pid")); err == nil {
			lines := strings.Split(string(b), "\n")
			if len(lines) > 7 && strings.TrimSpace(lines[7]) == "ready" {
				if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
					c.Close()
					return nil
				}
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited before it was ready (%s)", s.cmd.ProcessState)
		case <-time.After(25 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres was not ready within %s", startTimeout)
		}
	}
}

// Stop stops the cluster (a fast shutdown, then SIGKILL after a grace
// period); it is safe to call more than once, and tests call it to make the
// server unreachable.
func (s *Server) Stop() {
	s.stopOnce.Do(func() { testserver.Stop(s.cmd.Process, s.exited, stopTimeout) })
}

// Log returns the server's output so far.
func (s *Server) Log() string { return testserver.Tail(s.LogPath, 1<<20) }

// version names the major version of the binaries.
func version(bin string) string {
	if n := majorOf(bin); n > 0 {
		return strconv.Itoa(n)
	}
	out, err := exec.Command(filepath.Join(bin, "postgres"), "--version").Output()
	if err != nil {
		return ""
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return ""
	}
	major, _, _ := strings.Cut(f[len(f)-1], ".")
	return major
}
