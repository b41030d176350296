// Command fakes runs svc's in-repo fakes of Nomad and Consul as one
// process, for the end-to-end tests of cluster mode (internal/e2e,
// cluster_mode_test.go), which build it with go build.
//
// The fake Nomad (scheduler/nomad/fakenomad) really runs tasks and renders
// their Vault templates against the Vault given by -vault-addr and
// -vault-token. Its client registers the allocations' services of
// provider consul with the fake Consul (edge/consul/fakeconsul) through
// the agent API, as Nomad's does, keeps their checks' status with the
// tasks' health and deregisters them when the allocations stop; this
// program only wires the two together.
//
// svc is pointed at a recording proxy in front of the fake Nomad, which
// logs every job registration (job ID, the modify index it enforced, the
// answer's status and the job modify index the fake answered). A debug
// listener serves GET /state (the fake Nomad's stored jobs and allocations,
// as Nomad keeps them) and GET /registrations (that log).
//
// It prints one JSON line on stdout, {"nomad":…,"consul":…,"debug":…},
// once everything listens, and runs until stdin closes or it is signalled.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/edge/consul/fakeconsul"
	"github.com/svchost/svc/scheduler/nomad/fakenomad"
)

// registration is one job registration svc sent to Nomad.
type registration struct {
	JobID          string `json:"job_id"`
	EnforceIndex   bool   `json:"enforce_index"`
	JobModifyIndex uint64 `json:"job_modify_index"` // what the caller expected
	Status         int    `json:"status"`
	// AnswerModifyIndex is the JobModifyIndex of the answer (200 only).
	AnswerModifyIndex uint64    `json:"answer_modify_index"`
	At                time.Time `json:"at"`
}

type recorder struct {
	mu   sync.Mutex
	regs []registration
}

func main() {
	dir := flag.String("dir", "", "data directory of the fake Nomad")
	vaultAddr := flag.String("vault-addr", "", "Vault address the templates read from")
	vaultToken := flag.String("vault-token", "", "Vault token the templates read with")
	flag.Parse()
	if *dir == "" {
		log.Fatal("fakes: -dir is required")
	}
	consul := fakeconsul.New()
	cfg := fakenomad.Config{DataDir: *dir, Drivers: []string{"raw_exec"}, Consul: &fakenomad.Consul{Address: consul.URL()}}
	if *vaultAddr != "" {
		cfg.Vault = &fakenomad.Vault{Address: *vaultAddr, Token: *vaultToken}
	}
	nomad, err := fakenomad.Start(cfg)
	if err != nil {
		log.Fatalf("fakes: start the fake Nomad: %v", err)
	}

	rec := &recorder{}
	target, _ := url.Parse(nomad.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	nomadLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		_ = http.Serve(nomadLn, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if (r.Method == http.MethodPut || r.Method == http.MethodPost) && r.URL.Path == "/v1/jobs" {
				rec.register(w, r, proxy)
				return
			}
			proxy.ServeHTTP(w, r)
		}))
	}()

	debugLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(nomad.State())
	})
	mux.HandleFunc("GET /registrations", func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		b, _ := json.Marshal(rec.regs)
		rec.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	go func() { _ = http.Serve(debugLn, mux) }()

	line, _ := json.Marshal(map[string]string{
		"nomad":  "http://" + nomadLn.Addr().String(),
		"consul": consul.URL(),
		"debug":  "http://" + debugLn.Addr().String(),
	})
	fmt.Println(string(line))

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	eof := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(eof) }()
	select {
	case <-sig:
	case <-eof:
	}
	_ = nomad.Close()
	consul.Close()
}

// register forwards a job registration and records it.
func (rec *recorder) register(w http.ResponseWriter, r *http.Request, proxy http.Handler) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req nomadapi.JobRegisterRequest
	_ = json.Unmarshal(body, &req)
	reg := registration{EnforceIndex: req.EnforceIndex, JobModifyIndex: req.JobModifyIndex, At: time.Now()}
	if req.Job != nil && req.Job.ID != nil {
		reg.JobID = *req.Job.ID
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	cw := &captureWriter{ResponseWriter: w, status: http.StatusOK}
	proxy.ServeHTTP(cw, r)
	reg.Status = cw.status
	if cw.status == http.StatusOK {
		var resp nomadapi.JobRegisterResponse
		if json.Unmarshal(cw.buf.Bytes(), &resp) == nil {
			reg.AnswerModifyIndex = resp.JobModifyIndex
		}
	}
	rec.mu.Lock()
	rec.regs = append(rec.regs, reg)
	rec.mu.Unlock()
}

type captureWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (c *captureWriter) WriteHeader(code int) {
	c.status = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *captureWriter) Write(b []byte) (int, error) {
	c.buf.Write(b)
	return c.ResponseWriter.Write(b)
}
