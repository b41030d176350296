//go:build linux

// Linux only, as raftstore's write benchmarks: the figures are of Linux's
// fsync, and the check that the data is on a disk asks Linux.

package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svchost/svc/internal/testserver"
)

// BenchmarkWritesBesideEtcd measures replicated writes through svc's HTTP
// API as its clients make them, beside etcd doing the same number of puts
// through its HTTP API, on this machine:
//
//   - svc: the real binary, one node, its work dir on disk (Raft's log
//     fsyncs every commit), each write a PATCH /api/v1/me/sections/{id}
//     with a bearer token: a rename of a launcher section, a plain update
//     that is one Raft command (the row and its audit entry);
//   - etcd: Debian's etcd-server (3.4), one member on loopback with its
//     default settings and its data dir beside svc's, each write a POST
//     /v3/kv/put (grpc-gateway JSON, base64 key and value), no auth.
//
// Each runs b.N writes three ways: 1 client; 64 clients each writing its
// own object (its own section, its own key); 64 clients all writing the
// same object (the hot object). Every request counts: the failures of each
// way are counted and printed by status and code, never retried, and
// writes/s counts only the writes that succeeded. A client is a goroutine
// sending one request after another on a kept-alive connection.
//
// It prints a table with both sides' writes/s, p50 and p99 latency (of the
// writes that succeeded), failures and svc/etcd. ETCD_BIN names the etcd
// binary (else etcd on PATH); without one it says what is missing and
// measures svc alone. SVC_BENCH_DIR is where the data goes (else the
// repository's .bench). `make bench` runs it with -benchtime 2000x; CI
// never runs it.
func BenchmarkWritesBesideEtcd(b *testing.B) {
	dir := writesBenchDir(b)
	srv := startAppServerIn(b, "writes-bench", filepath.Join(dir, "svc"))
	sections := make([]string, 64)
	for i := range sections {
		var out struct{ Section struct{ ID string } }
		srv.must(b, "POST", "/me/sections", map[string]string{"name": fmt.Sprintf("bench %02d", i)}, http.StatusCreated, &out)
		sections[i] = out.Section.ID
	}
	svcWrite := svcSectionWriter(srv.p.Base(), srv.token(), sections)

	etcdBin, etcdVersion, missing := findEtcd()
	var etcdWrite writeFunc
	if missing != "" {
		fmt.Printf("\nwrites beside etcd: %s; measuring svc alone\n", missing)
	} else {
		etcdWrite = etcdPutter(startEtcd(b, etcdBin, filepath.Join(dir, "etcd")))
	}

	ways := []writeWay{{"1 client", 1, false}, {"64 clients, own objects", 64, false}, {"64 clients, one object", 64, true}}
	results := map[string]writeResult{}
	for _, w := range ways {
		sides := []struct {
			name  string
			write writeFunc
		}{{"svc", svcWrite}, {"etcd", etcdWrite}}
		for _, side := range sides {
			if side.write == nil {
				continue
			}
			key := side.name + "/" + w.name
			b.Run(fmt.Sprintf("%s/clients=%d/hot=%v", side.name, w.clients, w.hot), func(b *testing.B) {
				r := runWrites(b, w, side.write)
				results[key] = r
				b.ReportMetric(r.perSecond(), "writes/s")
				b.ReportMetric(ms(r.at(50)), "p50-ms")
				b.ReportMetric(ms(r.at(99)), "p99-ms")
				b.ReportMetric(float64(r.failed()), "failed")
			})
		}
	}
	printWrites(ways, results, etcdVersion, missing)
}

// writeWay is one shape of load: how many clients, and whether they all
// write one object.
type writeWay struct {
	name    string
	clients int
	hot     bool
}

// writeFunc makes write number seq of client (0-based) and returns the
// failure's class ("409 STATE_INVALID", "transport") and message, or "" for
// a success.
type writeFunc func(client int, seq int64, hot bool) (class, msg string)

// writeResult is one run of b.N writes.
type writeResult struct {
	n        int
	elapsed  time.Duration
	ok       []time.Duration // the latencies of the writes that succeeded, sorted
	failures map[string]int  // by class
	example  map[string]string
}

func (r writeResult) perSecond() float64 { return float64(len(r.ok)) / r.elapsed.Seconds() }

func (r writeResult) failed() int { return r.n - len(r.ok) }

// at is the p-th percentile latency of the successes, 0 without any.
func (r writeResult) at(p int) time.Duration {
	if len(r.ok) == 0 {
		return 0
	}
	return r.ok[(len(r.ok)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// runWrites shares b.N writes among the way's clients and times them.
func runWrites(b *testing.B, w writeWay, write writeFunc) writeResult {
	r := writeResult{n: b.N, failures: map[string]int{}, example: map[string]string{}}
	lat := make([]time.Duration, b.N)
	okAt := make([]bool, b.N)
	var (
		next atomic.Int64
		mu   sync.Mutex
		wg   sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for c := range w.clients {
		wg.Go(func() {
			for seq := int64(0); ; seq++ {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				began := time.Now()
				class, msg := write(c, seq, w.hot)
				lat[i] = time.Since(began)
				if class == "" {
					okAt[i] = true
					continue
				}
				mu.Lock()
				r.failures[class]++
				if _, ok := r.example[class]; !ok {
					r.example[class] = msg
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	b.StopTimer()
	for i, ok := range okAt {
		if ok {
			r.ok = append(r.ok, lat[i])
		}
	}
	slices.Sort(r.ok)
	return r
}

// benchClient is a client whose connections are kept alive, one per
// concurrent client (Go's default keeps two idle per host and so would
// open a new connection for most requests of 64 clients).
func benchClient() *http.Client {
	return &http.Client{Timeout: scaled(60 * time.Second), Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     time.Minute,
	}}
}

// post sends one request and classifies its answer: "" when it answered
// want, else the status and the error envelope's code, or "transport".
func post(c *http.Client, method, url, token string, body []byte, want int) (class, msg string) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return "request", err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "transport", err.Error()
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body) // read to the end: the connection is reused
	if err != nil {
		return "transport", err.Error()
	}
	if resp.StatusCode == want {
		return "", ""
	}
	var e struct{ Code, Message string }
	if json.Unmarshal(answer, &e) != nil || e.Message == "" {
		e.Message = string(answer[:min(len(answer), 200)])
	}
	return strings.TrimSpace(fmt.Sprintf("%d %s", resp.StatusCode, e.Code)), e.Message
}

// svcSectionWriter renames sections: client i its own section i, or every
// client section 0 when hot. Names are unique, as a person's sections'
// names must be.
func svcSectionWriter(base, token string, sections []string) writeFunc {
	c := benchClient()
	return func(client int, seq int64, hot bool) (string, string) {
		id, name := sections[client], fmt.Sprintf("c%02d w%d", client, seq)
		if hot {
			// Not a name another section took in the runs before.
			id, name = sections[0], "hot "+name
		}
		body, _ := json.Marshal(map[string]string{"name": name})
		return post(c, "PATCH", base+"/api/v1/me/sections/"+id, token, body, http.StatusOK)
	}
}

// etcdPutter puts the same kind of value: client i to its own key, or
// every client to one key when hot.
func etcdPutter(base string) writeFunc {
	c := benchClient()
	b64 := base64.StdEncoding.EncodeToString
	return func(client int, seq int64, hot bool) (string, string) {
		key := fmt.Sprintf("bench/sections/%02d", client)
		if hot {
			key = "bench/sections/00"
		}
		value := fmt.Sprintf(`{"name":"c%02d w%d"}`, client, seq)
		body, _ := json.Marshal(map[string]string{"key": b64([]byte(key)), "value": b64([]byte(value))})
		return post(c, "POST", base+"/v3/kv/put", "", body, http.StatusOK)
	}
}

// writesBenchDir is a new directory for both servers' data, removed when
// the benchmark ends: under $SVC_BENCH_DIR, else the repository's .bench,
// so that it is on the work dir's disk rather than on a tmpfs /tmp.
func writesBenchDir(b *testing.B) string {
	parent := os.Getenv("SVC_BENCH_DIR")
	if parent == "" {
		root, err := moduleRoot()
		if err != nil {
			b.Fatal(err)
		}
		parent = filepath.Join(root, ".bench")
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		b.Fatal(err)
	}
	dir, err := os.MkdirTemp(parent, "writes-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && (st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC) {
		fmt.Printf("warning: %s is in memory; the figures do not reflect a disk\n", dir)
	}
	return dir
}

// findEtcd finds the etcd binary (ETCD_BIN, else etcd on PATH) and its
// version, or says what is missing.
func findEtcd() (bin, version, missing string) {
	bin = os.Getenv("ETCD_BIN")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("etcd"); err != nil {
			return "", "", "etcd is not installed (apt-get install etcd-server, Debian's etcd 3.4; or set ETCD_BIN=/path/to/etcd)"
		}
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", "", fmt.Sprintf("ETCD_BIN=%s does not run (%v): set ETCD_BIN to an etcd binary, or apt-get install etcd-server", bin, err)
	}
	version, _, _ = strings.Cut(string(out), "\n")
	return bin, strings.TrimSpace(strings.TrimPrefix(version, "etcd Version:")), ""
}

// startEtcd starts a one-member etcd on loopback with its data under dir,
// its default settings otherwise, and returns its client URL. It is
// stopped (SIGINT, then SIGKILL) when the benchmark ends, and killed by the
// kernel if the benchmark dies first.
func startEtcd(b *testing.B, bin, dir string) string {
	var last error
	for range 3 { // a free port may be taken before etcd binds it
		port, err := testserver.FreePorts(2)
		if err != nil {
			b.Fatal(err)
		}
		client := "http://127.0.0.1:" + strconv.Itoa(port)
		peer := "http://127.0.0.1:" + strconv.Itoa(port+1)
		_ = os.RemoveAll(dir)
		logPath := filepath.Join(b.TempDir(), "etcd.log")
		log, err := os.Create(logPath)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(bin, "--name", "bench", "--data-dir", dir,
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", "bench="+peer)
		cmd.Env = testserver.EnvironWithout("ETCD_") // etcd reads ETCD_* as flags
		cmd.SysProcAttr = procAttr()
		exited, err := testserver.Run(cmd, log)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { testserver.Stop(cmd.Process, exited, 10*time.Second) })
		if last = waitEtcd(client, exited); last == nil {
			return client
		}
		testserver.Stop(cmd.Process, exited, 10*time.Second)
		last = fmt.Errorf("%w; its log:\n%s", last, testserver.Tail(logPath, 2000))
	}
	b.Fatalf("etcd did not start: %v", last)
	return ""
}

// waitEtcd waits until etcd's /health says true.
func waitEtcd(client string, exited <-chan struct{}) error {
	deadline := time.Now().Add(scaled(30 * time.Second))
	for {
		select {
		case <-exited:
			return errors.New("etcd exited")
		default:
		}
		if resp, err := http.Get(client + "/health"); err == nil {
			var h struct{ Health string }
			_ = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if h.Health == "true" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("etcd not healthy within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// printWrites prints the table the issue note quotes.
func printWrites(ways []writeWay, results map[string]writeResult, etcdVersion, missing string) {
	fmt.Printf("\nreplicated writes through HTTP on one node, every write on disk (fsync) before its answer; loopback, this machine\n")
	fmt.Printf("svc:  PATCH /api/v1/me/sections/{id} (a rename: one Raft command, the row and its audit entry), bearer token\n")
	if missing != "" {
		fmt.Printf("etcd: not measured: %s\n", missing)
	} else {
		fmt.Printf("etcd: %s, POST /v3/kv/put (grpc-gateway JSON), one member, default settings, no auth\n", etcdVersion)
	}
	fmt.Printf("%-25s %6s | %9s %8s %8s %7s | %9s %8s %8s %7s | %9s\n",
		"way", "writes", "svc w/s", "p50", "p99", "failed", "etcd w/s", "p50", "p99", "failed", "svc/etcd")
	for _, w := range ways {
		s, okS := results["svc/"+w.name]
		e, okE := results["etcd/"+w.name]
		if !okS {
			continue
		}
		etcdCols, ratio := fmt.Sprintf("%9s %8s %8s %7s", "-", "-", "-", "-"), "-"
		if okE {
			etcdCols = fmt.Sprintf("%9.0f %8s %8s %7d", e.perSecond(), round(e.at(50)), round(e.at(99)), e.failed())
			ratio = fmt.Sprintf("%.2f", s.perSecond()/e.perSecond())
		}
		fmt.Printf("%-25s %6d | %9.0f %8s %8s %7d | %s | %9s\n", w.name, s.n, s.perSecond(), round(s.at(50)), round(s.at(99)), s.failed(), etcdCols, ratio)
	}
	for _, side := range []string{"svc", "etcd"} {
		for _, w := range ways {
			r, ok := results[side+"/"+w.name]
			if !ok {
				continue
			}
			classes := make([]string, 0, len(r.failures))
			for c := range r.failures {
				classes = append(classes, c)
			}
			sort.Strings(classes)
			for _, c := range classes {
				fmt.Printf("%s, %s: %d × %s (e.g. %s)\n", side, w.name, r.failures[c], c, r.example[c])
			}
		}
	}
	fmt.Println()
}

func round(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(10 * time.Microsecond).String()
}
