package fakenomad

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Config configures a fake Nomad.
type Config struct {
	// DataDir holds the allocation directories. Required.
	DataDir string
	// Token, when set, is the only ACL token accepted (X-Nomad-Token);
	// any other request answers 403 "Permission denied", as Nomad does.
	Token string
	// Vault is where templates' secret function reads from; nil uses
	// Secrets only.
	Vault *Vault
	// Secrets answers the secret function by path (the path as written
	// in the template, e.g. "secret/data/svc/apps/app-x/db"), as Vault's
	// KV version 2 would: the map is the secret's data (.Data.data).
	Secrets map[string]map[string]any
	// Datacenter and NodePool of the one node; "dc1" and "default" when
	// empty.
	Datacenter string
	NodePool   string
	// Drivers the node has; raw_exec and exec when nil.
	Drivers []string
	// NodeCPU (MHz, 1000 per core) and NodeMemoryMB are what the node
	// offers; 0 means this machine's cores and memory.
	NodeCPU      int
	NodeMemoryMB int
	// Hold places allocations without starting them (they stay pending):
	// for benchmarks and tests of the control plane alone.
	Hold bool
	// HealthyDeadline is the deployment health deadline when a group's
	// update block sets none; 0 means 30 seconds.
	HealthyDeadline time.Duration
	// Consul, when set, is the local Consul agent the client registers
	// the services of provider consul with (services.go).
	Consul *Consul
}

// Vault is a Vault server the fake's templates read KV secrets from.
type Vault struct {
	Address string
	Token   string
}

// Server is a running fake Nomad.
type Server struct {
	cfg    Config
	ln     net.Listener
	srv    *http.Server
	url    string
	nodeID string
	client *http.Client

	mu      sync.Mutex
	index   uint64
	tables  map[string]uint64 // table name -> last index that changed it
	changed chan struct{}     // closed and replaced at every change
	jobs    map[string]*api.Job
	allocs  map[string]*alloc
	volumes map[string]*api.HostVolume
	// versions keeps every version of each job (by key), oldest first;
	// deployments each service job's latest deployment; evals every
	// evaluation by ID.
	versions    map[string][]*api.Job
	deployments map[string]*api.Deployment
	evals       map[string]*api.Evaluation
	closed      bool

	runners sync.WaitGroup
	consul  *consulClient // nil without Config.Consul
}

// Start starts a fake Nomad on a loopback port.
func Start(cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("fakenomad: a data directory is required")
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	cfg.DataDir = abs
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "allocs"), 0o700); err != nil {
		return nil, err
	}
	if cfg.Datacenter == "" {
		cfg.Datacenter = "dc1"
	}
	if cfg.NodePool == "" {
		cfg.NodePool = "default"
	}
	if cfg.Drivers == nil {
		cfg.Drivers = []string{"raw_exec", "exec"}
	}
	if cfg.NodeCPU == 0 {
		cfg.NodeCPU = runtime.NumCPU() * 1000
	}
	if cfg.NodeMemoryMB == 0 {
		cfg.NodeMemoryMB = int(hostMemoryMB())
	}
	if cfg.HealthyDeadline <= 0 {
		cfg.HealthyDeadline = 30 * time.Second
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, ln: ln, url: "http://" + ln.Addr().String(), nodeID: newID(),
		client:   &http.Client{Timeout: 2 * time.Minute},
		index:    10,
		tables:   map[string]uint64{"jobs": 1, "allocs": 1, "nodes": 5, "evals": 1, "host_volumes": 1},
		changed:  make(chan struct{}),
		jobs:     map[string]*api.Job{},
		allocs:   map[string]*alloc{},
		versions: map[string][]*api.Job{}, deployments: map[string]*api.Deployment{}, evals: map[string]*api.Evaluation{},
		volumes: map[string]*api.HostVolume{},
	}
	s.srv = &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	s.consul = s.startConsul()
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL is the fake's address, for api.Config.Address.
func (s *Server) URL() string { return s.url }

// NodeID is the ID of the fake's one node.
func (s *Server) NodeID() string { return s.nodeID }

// Close stops every allocation and the server.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var all []*alloc
	for _, a := range s.allocs {
		all = append(all, a)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	_ = s.srv.Close()
	for _, a := range all {
		a.shutdown()
	}
	s.runners.Wait()
	s.closeConsul()
	return nil
}

// State returns the fake's stored state as JSON: every job as registered
// and every allocation as the API shows it. Tests use it to check what
// Nomad would have kept.
func (s *Server) State() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := struct {
		Jobs   map[string]*api.Job
		Allocs map[string]*api.Allocation
	}{Jobs: s.jobs, Allocs: map[string]*api.Allocation{}}
	for id, a := range s.allocs {
		st.Allocs[id] = a.apiLocked()
	}
	b, _ := json.Marshal(st)
	return b
}

// bump records a change to the named tables; s.mu must be held.
func (s *Server) bumpLocked(tables ...string) uint64 {
	s.index++
	for _, t := range tables {
		s.tables[t] = s.index
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return s.index
}

func (s *Server) currentIndex() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.index
}

func (s *Server) bump(tables ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bumpLocked(tables...)
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/agent/self", s.agentSelf)
	mux.HandleFunc("GET /v1/status/leader", s.statusLeader)
	mux.HandleFunc("GET /v1/jobs", s.jobList)
	mux.HandleFunc("PUT /v1/jobs", s.jobRegister)
	mux.HandleFunc("POST /v1/jobs", s.jobRegister)
	mux.HandleFunc("GET /v1/job/{id}", s.jobGet)
	mux.HandleFunc("DELETE /v1/job/{id}", s.jobDeregister)
	mux.HandleFunc("PUT /v1/job/{id}/plan", s.jobPlan)
	mux.HandleFunc("POST /v1/job/{id}/plan", s.jobPlan)
	mux.HandleFunc("GET /v1/job/{id}/allocations", s.jobAllocations)
	mux.HandleFunc("GET /v1/job/{id}/versions", s.jobVersions)
	mux.HandleFunc("PUT /v1/job/{id}/versions/{name}/tag", s.jobTag)
	mux.HandleFunc("DELETE /v1/job/{id}/versions/{name}/tag", s.jobTag)
	mux.HandleFunc("PUT /v1/job/{id}/revert", s.jobRevert)
	mux.HandleFunc("POST /v1/job/{id}/revert", s.jobRevert)
	mux.HandleFunc("GET /v1/job/{id}/deployment", s.jobDeployment)
	mux.HandleFunc("GET /v1/job/{id}/evaluations", s.jobEvaluations)
	mux.HandleFunc("PUT /v1/deployment/promote/{id}", s.deploymentPromote)
	mux.HandleFunc("POST /v1/deployment/promote/{id}", s.deploymentPromote)
	mux.HandleFunc("GET /v1/evaluation/{id}", s.evalGet)
	mux.HandleFunc("GET /v1/allocation/{id}", s.allocGet)
	mux.HandleFunc("GET /v1/nodes", s.nodeList)
	mux.HandleFunc("GET /v1/node/{id}", s.nodeGet)
	mux.HandleFunc("PUT /v1/client/allocation/{id}/restart", s.allocRestart)
	mux.HandleFunc("POST /v1/client/allocation/{id}/restart", s.allocRestart)
	mux.HandleFunc("GET /v1/client/allocation/{id}/stats", s.allocStats)
	mux.HandleFunc("GET /v1/client/allocation/{id}/checks", s.allocChecks)
	mux.HandleFunc("GET /v1/client/allocation/{id}/exec", s.allocExec)
	mux.HandleFunc("GET /v1/client/fs/logs/{id}", s.allocLogs)
	mux.HandleFunc("PUT /v1/volume/host/create", s.volumeCreate)
	mux.HandleFunc("POST /v1/volume/host/create", s.volumeCreate)
	mux.HandleFunc("GET /v1/volumes", s.volumeList)
	mux.HandleFunc("GET /v1/volume/host/{id}", s.volumeGet)
	return s.auth(mux)
}

// auth answers 403 as Nomad does when ACLs are on and the token is not
// the one the fake accepts.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Token != "" && r.Header.Get("X-Nomad-Token") != s.cfg.Token {
			codedError(w, http.StatusForbidden, "Permission denied")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// codedError answers as Nomad's HTTP agent does: the status, a plain-text
// body with the error's text.
func codedError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
}

func (s *Server) writeJSON(w http.ResponseWriter, index uint64, v any) {
	setMeta(w, index)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func setMeta(w http.ResponseWriter, index uint64) {
	if index == 0 {
		index = 1
	}
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(index, 10))
	w.Header().Set("X-Nomad-KnownLeader", "true")
	w.Header().Set("X-Nomad-LastContact", "0")
}

// Blocking queries: Nomad's defaults and cap.
const (
	defaultWait = 5 * time.Minute
	maxWait     = 10 * time.Minute
)

// blockingQuery runs a blocking query over the named table: with
// ?index=N, it waits until the table's index passes N or ?wait= (Nomad's
// duration syntax, default 5m, at most 10m) ends, then answers with run's
// result, under the lock. run returns the value and the index to report
// (0 means the table's).
func (s *Server) blockingQuery(w http.ResponseWriter, r *http.Request, table string, run func() (any, uint64, int, string)) {
	minIndex, _ := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
	wait := defaultWait
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := parseWait(v)
		if err != nil {
			codedError(w, http.StatusBadRequest, "Invalid wait time")
			return
		}
		wait = d
	}
	wait = min(wait, maxWait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		idx := s.tables[table]
		if minIndex == 0 || idx > minIndex {
			break
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
			continue
		case <-timer.C:
			s.mu.Lock()
		case <-r.Context().Done():
			return
		}
		break
	}
	// s.mu is held here.
	v, idx, code, msg := run()
	if idx == 0 {
		idx = s.tables[table]
	}
	s.mu.Unlock()
	if code != 0 {
		setMeta(w, idx)
		codedError(w, code, msg)
		return
	}
	s.writeJSON(w, idx, v)
}

// parseWait reads Nomad's wait parameter: a Go duration, or a number of
// milliseconds with or without "ms" (what the api client sends).
func parseWait(v string) (time.Duration, error) {
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		return time.Duration(n) * time.Millisecond, nil
	}
	return time.ParseDuration(v)
}

func (s *Server) agentSelf(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, 0, map[string]any{
		"config": map[string]any{"Region": "global", "Datacenter": s.cfg.Datacenter, "Version": map[string]any{"Version": "2.0.5"}},
		"member": map[string]any{"Name": "fakenomad", "Addr": "127.0.0.1", "Status": "alive"},
		"stats":  map[string]any{},
	})
}

func (s *Server) statusLeader(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode("127.0.0.1:4647")
}

func (s *Server) node() *api.Node {
	drivers := map[string]*api.DriverInfo{}
	for _, d := range s.cfg.Drivers {
		drivers[d] = &api.DriverInfo{Detected: true, Healthy: true, HealthDescription: "Healthy"}
	}
	host, port, _ := net.SplitHostPort(s.ln.Addr().String())
	return &api.Node{
		ID: s.nodeID, Datacenter: s.cfg.Datacenter, Name: "fakenomad-node", HTTPAddr: net.JoinHostPort(host, port),
		NodePool: s.cfg.NodePool, SchedulingEligibility: "eligible", Status: "ready",
		Attributes: map[string]string{"unique.network.ip-address": "127.0.0.1", "kernel.name": runtime.GOOS},
		NodeResources: &api.NodeResources{
			Cpu:    api.NodeCpuResources{CpuShares: int64(s.cfg.NodeCPU), TotalCpuCores: uint16(max(s.cfg.NodeCPU/1000, 1))},
			Memory: api.NodeMemoryResources{MemoryMB: int64(s.cfg.NodeMemoryMB)},
			Disk:   api.NodeDiskResources{DiskMB: 100 << 10},
		},
		ReservedResources: &api.NodeReservedResources{},
		Drivers:           drivers,
		CreateIndex:       5, ModifyIndex: 5,
	}
}

func (s *Server) nodeList(w http.ResponseWriter, r *http.Request) {
	s.blockingQuery(w, r, "nodes", func() (any, uint64, int, string) {
		n := s.node()
		stub := &api.NodeListStub{
			Address: "127.0.0.1", ID: n.ID, Datacenter: n.Datacenter, Name: n.Name, NodePool: n.NodePool,
			SchedulingEligibility: n.SchedulingEligibility, Status: n.Status, Drivers: n.Drivers,
			CreateIndex: n.CreateIndex, ModifyIndex: n.ModifyIndex,
		}
		if r.URL.Query().Get("resources") == "true" {
			stub.NodeResources, stub.ReservedResources = n.NodeResources, n.ReservedResources
		}
		return []*api.NodeListStub{stub}, 0, 0, ""
	})
}

func (s *Server) nodeGet(w http.ResponseWriter, r *http.Request) {
	s.blockingQuery(w, r, "nodes", func() (any, uint64, int, string) {
		if r.PathValue("id") != s.nodeID {
			return nil, 0, http.StatusNotFound, "node not found"
		}
		return s.node(), 0, 0, ""
	})
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return fmt.Sprintf("%s-%s-%s-%s-%s", h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
}

// hostMemoryMB reads MemTotal; 4096 when it cannot.
func hostMemoryMB() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 4096
	}
	var kb int64
	for _, line := range splitLines(string(b)) {
		if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
			return kb / 1024
		}
	}
	return 4096
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
