package e2e

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svchost/svc/internal/testserver"
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

// freeRaftAddr returns a loopback address nobody listens on, for a raft
// port that must be known before the node starts (SVC_CLUSTER_PEERS names
// it). testserver.FreePorts takes it below the kernel's ephemeral range: a
// node that is killed and restarted must bind its raft port again, and an
// ephemeral port may meanwhile have become the local end of some outgoing
// connection.
func freeRaftAddr(t *testing.T) string {
	t.Helper()
	port, err := testserver.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}
