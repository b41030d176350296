// Package testserver holds what the harnesses of real external servers in
// tests (a PostgreSQL cluster, a Vault dev server, versitygw) share: the
// binary of a test-time tool (set, on PATH, or where its scripts/*-tool.sh
// built it) and skipping a test without it, free loopback ports and
// attempts on another, random credentials, a clean environment for the
// child process, waiting for its HTTP health check, and the tail of its
// log for a failure message.
//
// It is for tests only and must not be imported by production code.
package testserver

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// FreePorts returns the first of n adjacent loopback ports that were free a
// moment ago and have not been handed out before in this process (a server
// may still take one before the caller binds it: callers retry on another).
//
// The ports are taken below the kernel's ephemeral range when there is
// room, at a random place: an ephemeral port may become the local end of
// any outgoing connection (a browser's, an HTTP client's) between the pick
// and the bind, which under load is not rare; a random place keeps test
// binaries running side by side apart.
func FreePorts(n int) (int, error) {
	portMu.Lock()
	defer portMu.Unlock()
	if lo, _ := ephemeralRange(); lo-portFloor > 2000+n {
		for range 200 {
			if port := portFloor + mrand.IntN(lo-portFloor-n); takePorts(port, n) {
				return port, nil
			}
		}
	}
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("pick a free port: %w", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if takePorts(port, n) {
			return port, nil
		}
	}
	return 0, errors.New("pick a free port: no adjacent free loopback ports")
}

// portFloor is the lowest port FreePorts hands out below the ephemeral
// range: above the ports the process runtime gives its workloads
// (runtime.workload_port_start..end, 10000-19999 by default), which svc
// refuses as a server or app port.
const portFloor = 20000

var (
	portMu    sync.Mutex
	portsUsed = map[int]bool{}
)

// takePorts reports whether the n ports from first were never handed out
// and can all be bound now, and marks them handed out if so.
func takePorts(first, n int) bool {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for p := first; p < first+n; p++ {
		if portsUsed[p] {
			return false
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return false
		}
		held = append(held, l)
	}
	for p := first; p < first+n; p++ {
		portsUsed[p] = true
	}
	return true
}

// ephemeralRange reads the kernel's range of ports for outgoing
// connections, or 0, 0 when it is not known.
func ephemeralRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	return lo, hi
}

// RandomHex returns n random bytes in hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// EnvironWithout returns this process's environment minus the variables
// whose names start with any of the prefixes.
func EnvironWithout(prefixes ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(kv, p) }) {
			out = append(out, kv)
		}
	}
	return out
}

// Tail returns at most the last n bytes of a file, from a line start.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
		return "…\n" + string(b)
	}
	return string(b)
}

// Stop asks a server process to stop (SIGINT) and kills it if it has not
// exited after grace; exited is closed when the process has been waited for.
// It returns once the process is gone.
func Stop(p *os.Process, exited <-chan struct{}, grace time.Duration) {
	select {
	case <-exited:
		return
	default:
	}
	_ = p.Signal(os.Interrupt)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = p.Kill()
		<-exited
	}
}

// Run starts cmd with its output in log, and returns a channel closed once
// the process has exited and log is closed.
func Run(cmd *exec.Cmd, log *os.File) (<-chan struct{}, error) {
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("run %s: %w", cmd.Path, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(exited)
	}()
	return exited, nil
}

// Output collects a process's output for a test's log; it is safe for the
// process's writers and the test to use at once.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String is what was written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// PassableDir returns a fresh t.TempDir() that users other than this
// process's can pass through (it and the directories above it, up to the
// system's temporary directory, are made 0711; t.TempDir() makes them
// 0700): a server running as root there gives each app's sandbox a user of
// its own, which must reach its own files below.
func PassableDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != filepath.Clean(os.TempDir()) && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return d
}
