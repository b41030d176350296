// hostile is an app that tries what an attacker's app would: it reads the
// server's files, other processes' environments and the host's secrets,
// connects to ports around the edge, and prints what it finds. svc's tests
// deploy it to show that the sandbox holds; deploy it yourself and open
// /report to see what an app can reach on your installation.
//
//	GET /               "hello from hostile"
//	GET /report         what the running app can reach, as JSON
//	GET /build-report   the same, tried by the build step (see below)
//
// It tries the paths in PROBE_READ (files to read) and PROBE_EXISTS (paths
// to look at), the addresses in PROBE_DIAL (host:port), all comma
// separated, and looks for secret values everywhere it can read an
// environment: each is given in two halves, the nth entry of PROBE_CANARY_A
// joined to the nth of PROBE_CANARY_B, so that its own environment does not
// hold them whole. Besides those, it always tries
// /etc/shadow, /root, /home and every /proc/<pid>/environ it can see.
//
// Run "./app -report" to print the report and exit: a build step that does
// so ("go build -o app . && ./app -report > build-report.json") leaves the
// build's view in the app's files.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Report is what the app found.
type Report struct {
	UID       int               `json:"uid"`
	Hostname  string            `json:"hostname"`
	Read      map[string]string `json:"read"`   // path -> "ok" (with a size) or the error
	Exists    map[string]bool   `json:"exists"` // path -> whether it is there
	Dial      map[string]string `json:"dial"`   // host:port -> "ok" or the error
	Processes int               `json:"processes"`
	Canary    bool              `json:"canary_found"`
	Env       []string          `json:"env"` // the names of its environment variables
}

func list(env string, more ...string) []string {
	out := more
	for _, s := range strings.Split(os.Getenv(env), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func probe() Report {
	r := Report{UID: os.Getuid(), Read: map[string]string{}, Exists: map[string]bool{}, Dial: map[string]string{}}
	r.Hostname, _ = os.Hostname()
	for _, p := range list("PROBE_READ", "/etc/shadow") {
		if b, err := os.ReadFile(p); err != nil {
			r.Read[p] = err.Error()
		} else {
			r.Read[p] = "ok: " + strconv.Itoa(len(b)) + " bytes"
		}
	}
	for _, p := range list("PROBE_EXISTS", "/root", "/home") {
		_, err := os.Lstat(p)
		r.Exists[p] = err == nil
	}
	for _, a := range list("PROBE_DIAL") {
		c, err := net.DialTimeout("tcp", a, 3*time.Second)
		if err != nil {
			r.Dial[a] = err.Error()
			continue
		}
		c.Close()
		r.Dial[a] = "ok"
	}
	var canaries [][]byte
	a, b := list("PROBE_CANARY_A"), list("PROBE_CANARY_B")
	for i := range min(len(a), len(b)) {
		canaries = append(canaries, []byte(a[i]+b[i]))
	}
	found := func(b []byte) bool {
		for _, c := range canaries {
			if bytes.Contains(b, c) {
				return true
			}
		}
		return false
	}
	r.Canary = found([]byte(strings.Join(os.Environ(), "\x00")))
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		r.Processes++
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ")); err == nil && found(b) {
			r.Canary = true
		}
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		r.Env = append(r.Env, name)
	}
	sort.Strings(r.Env)
	return r
}

func main() {
	report := flag.Bool("report", false, "print the report and exit")
	flag.Parse()
	if *report {
		json.NewEncoder(os.Stdout).Encode(probe())
		return
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello from hostile")
	})
	http.HandleFunc("/report", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(probe())
	})
	http.HandleFunc("/build-report", func(w http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile("build-report.json")
		if err != nil {
			http.Error(w, "no build report: build with ./app -report > build-report.json", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	fmt.Println("hostile listening on", port)
	if err := http.ListenAndServe(":"+port, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
