package e2e

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const modulePath = "github.com/svchost/svc"

var (
	// svcBin is the binary TestMain built.
	svcBin string
	// raceBuild says the binary was built with -race: it is slower, and
	// its logs are checked for race reports.
	raceBuild bool
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse() // for testing.Verbose below
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "svc-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)

	svcBin = filepath.Join(dir, "svc")
	args := []string{"build", "-o", svcBin}
	if os.Getenv("SVC_E2E_RACE") == "1" {
		raceBuild = true
		args = append(args, "-race")
	}
	args = append(args, "./cmd/svc")
	start := time.Now()
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go %s (in %s): %v\n%s", strings.Join(args, " "), root, err, out)
		return 1
	}
	if testing.Verbose() {
		fmt.Printf("e2e: built %s (race=%v) in %s\n", svcBin, raceBuild, time.Since(start).Round(time.Millisecond))
	}
	return m.Run()
}

// moduleRoot walks up from the working directory to the go.mod of svc.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			if modfileModule(string(b)) != modulePath {
				return "", fmt.Errorf("%s/go.mod is not module %s", dir, modulePath)
			}
			return dir, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

func modfileModule(gomod string) string {
	sc := bufio.NewScanner(strings.NewReader(gomod))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// scaled stretches a timeout for a -race binary, which runs several times
// slower.
func scaled(d time.Duration) time.Duration {
	if raceBuild {
		return 3 * d
	}
	return d
}

var (
	portMu    sync.Mutex
	portsUsed = map[int]bool{}
)

// freeRaftAddr returns a loopback address nobody listens on, for a raft
// port that must be known before the node starts (SVC_CLUSTER_PEERS names
// it).
//
// The port is taken below the kernel's ephemeral range when there is room:
// a node that is killed and restarted must bind its raft port again, and an
// ephemeral port may meanwhile have become the local end of some outgoing
// connection. No port is handed out twice in one run.
func freeRaftAddr(t *testing.T) string {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	lo, _ := ephemeralRange()
	if lo > 12000 {
		for range 200 {
			port := 10000 + rand.IntN(lo-10000-1)
			if portsUsed[port] {
				continue
			}
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				continue
			}
			_ = ln.Close()
			portsUsed[port] = true
			return ln.Addr().String()
		}
	}
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("pick a free port: %v", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if !portsUsed[port] {
			portsUsed[port] = true
			return ln.Addr().String()
		}
	}
	t.Fatal("could not pick a free port")
	return ""
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
