// Package fakeconsul is an HTTP fake of exactly the part of Consul's API
// that edge/consul calls: GET /v1/catalog/services, GET
// /v1/health/service/<name> (with ?passing) and GET /v1/status/leader, with
// Consul's blocking-query semantics (X-Consul-Index; a request with index=N
// blocks until the index of what it reads exceeds N, or its wait elapses;
// wait parsed as Consul parses it, defaulting to 5 minutes and capped at
// 10, plus up to a sixteenth of jitter), its ACL behaviour (a management
// token sees everything, no token sees what the anonymous token may, which
// with a deny-by-default policy is nothing, and an unknown token is refused
// with 403), and a Go API for tests to register and deregister instances,
// flip their checks, restore an older index and make Consul fail.
//
// It is for tests only: production code never links it (internal/archtest
// checks). It must not import edge/consul, whose tests use it, nor
// anything of svc but edge/blocking/fakeblock (the parking of blocking
// queries it shares with fakenomadsd): it speaks Consul's wire format,
// with Consul's own API types.
package fakeconsul

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/svchost/svc/edge/blocking/fakeblock"
)

// Blocking-query limits, as Consul has them.
const (
	DefaultWait = 5 * time.Minute
	MaxWait     = 10 * time.Minute
)

// Datacenter is the fake's datacenter; a request for another one fails as
// Consul fails it (500, no path to datacenter).
const Datacenter = "dc1"

// Check statuses.
const (
	Passing  = api.HealthPassing
	Warning  = api.HealthWarning
	Critical = api.HealthCritical
)

// Instance is one registered service instance with one service check.
type Instance struct {
	// ID is the service ID; the fake keeps IDs unique across nodes.
	ID   string
	Name string
	// Node defaults to "node1", NodeAddress to 127.0.0.1.
	Node        string
	NodeAddress string
	// Address is the service's own address; empty means the node's, as in
	// Consul.
	Address string
	Port    int
	Tags    []string
	// Status is the service check's status; empty means passing.
	Status string
}

// Request is one query the fake answered, for tests to inspect.
type Request struct {
	Path    string
	Index   uint64
	Wait    time.Duration
	Token   string
	Passing bool
	Status  int
}

// Server is the fake Consul agent.
type Server struct {
	srv *httptest.Server

	mu        sync.Mutex
	index     uint64            // the last raft index handed out
	catalogIx uint64            // index of the services table
	serviceIx map[string]uint64 // index of each service name, kept after it leaves
	insts     map[string]Instance
	hub       *fakeblock.Hub // guarded by mu
	acl       string
	fail      int
	leader    string
	requests  []Request
}

// New starts a fake Consul on a loopback port. Close stops it.
func New() *Server {
	s := &Server{
		index: 1, catalogIx: 1, serviceIx: map[string]uint64{}, insts: map[string]Instance{},
		leader: "127.0.0.1:8300",
	}
	s.hub = fakeblock.New(&s.mu)
	// Consul registers itself as the service "consul" on its servers.
	s.Register(Instance{ID: "consul", Name: "consul", Port: 8300})
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	return s
}

// URL is the agent's HTTP address, such as http://127.0.0.1:41234.
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server; blocked queries end.
func (s *Server) Close() {
	s.hub.Close()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Register adds an instance, or replaces the one with its ID.
func (s *Server) Register(in Instance) {
	if in.Node == "" {
		in.Node = "node1"
	}
	if in.NodeAddress == "" {
		in.NodeAddress = "127.0.0.1"
	}
	if in.Status == "" {
		in.Status = Passing
	}
	in.Tags = slices.Clone(in.Tags)
	s.mu.Lock()
	defer s.mu.Unlock()
	ix := s.bump()
	if old, ok := s.insts[in.ID]; ok {
		s.serviceIx[old.Name] = ix
	}
	s.insts[in.ID] = in
	s.serviceIx[in.Name] = ix
	s.catalogIx = ix
}

// Deregister removes an instance and reports whether it was there.
func (s *Server) Deregister(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.insts[id]
	if !ok {
		return false
	}
	ix := s.bump()
	delete(s.insts, id)
	s.serviceIx[old.Name] = ix
	s.catalogIx = ix
	return true
}

// SetStatus sets an instance's check status (Passing, Warning, Critical)
// and reports whether the instance exists. Like a check update in Consul it
// moves the service's health index, not the catalog's.
func (s *Server) SetStatus(id, status string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.insts[id]
	if !ok {
		return false
	}
	if in.Status == status {
		return true
	}
	in.Status = status
	s.insts[id] = in
	s.serviceIx[in.Name] = s.bump()
	return true
}

// EnableACL turns ACLs on with a deny-by-default policy: token is the
// management token; requests without a token see nothing, requests with
// another token are refused (403 "ACL not found").
func (s *Server) EnableACL(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acl = token
	s.wakeLocked()
}

// FailWith makes every request (blocked ones included, as they wake, and
// /v1/status/leader) answer with status; 0 makes the fake answer normally again.
func (s *Server) FailWith(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = status
	s.wakeLocked()
}

// SetLeader sets the address /v1/status/leader answers; "" is a cluster
// without a leader (Consul answers 200 with an empty string).
func (s *Server) SetLeader(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leader = addr
}

// Restore sets every index to at most index, as a snapshot restore (or a
// new cluster behind the same address) does, and wakes every blocked
// query, as Consul abandons them on a restore: the indexes clients hold
// are then ahead of the server's.
func (s *Server) Restore(index uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	index = max(index, 1)
	s.index = index
	s.catalogIx = min(s.catalogIx, index)
	for name, ix := range s.serviceIx {
		s.serviceIx[name] = min(ix, index)
	}
	s.hub.AbandonLocked()
}

// Index is the fake's current raft index.
func (s *Server) Index() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.index
}

// Requests returns the queries answered so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Blocked returns how many queries are blocked now, and a channel closed
// when that number next changes: tests wait for a watcher to be parked
// in its queries before they change something, without sleeping.
func (s *Server) Blocked() (int, <-chan struct{}) { return s.hub.Blocked() }

func (s *Server) bump() uint64 {
	s.index++
	s.wakeLocked()
	return s.index
}

func (s *Server) wakeLocked() { s.hub.WakeLocked() }

// query is what a read needs from the request.
type query struct {
	minIndex uint64
	wait     time.Duration
	passing  bool
	token    string
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, fmt.Sprintf("method %s not allowed", r.Method), http.StatusMethodNotAllowed)
		return
	}
	var read func(q query) (any, uint64, bool)
	switch {
	case r.URL.Path == "/v1/status/leader":
		// No ACL applies to the leader's address.
		s.mu.Lock()
		fail, leader := s.fail, s.leader
		s.mu.Unlock()
		if fail != 0 {
			s.record(Request{Path: r.URL.Path, Token: tokenOf(r)}, fail)
			http.Error(w, http.StatusText(fail), fail)
			return
		}
		s.record(Request{Path: r.URL.Path, Token: tokenOf(r)}, http.StatusOK)
		writeJSON(w, http.StatusOK, leader)
		return
	case r.URL.Path == "/v1/catalog/services":
		read = s.readCatalog
	case strings.HasPrefix(r.URL.Path, "/v1/health/service/") && len(r.URL.Path) > len("/v1/health/service/"):
		name := strings.TrimPrefix(r.URL.Path, "/v1/health/service/")
		read = func(q query) (any, uint64, bool) { return s.readHealth(name, q) }
	default:
		http.NotFound(w, r)
		return
	}
	q, status, msg := parseQuery(r.URL.Query())
	q.token = tokenOf(r)
	rec := Request{Path: r.URL.Path, Index: q.minIndex, Wait: q.wait, Token: q.token, Passing: q.passing}
	if status != 0 {
		s.record(rec, status)
		http.Error(w, msg, status)
		return
	}
	if dc := r.URL.Query().Get("dc"); dc != "" && dc != Datacenter {
		s.record(rec, http.StatusInternalServerError)
		http.Error(w, "No path to datacenter", http.StatusInternalServerError)
		return
	}

	var (
		body     any
		index    uint64
		filtered bool
		refusal  int
		reason   string
	)
	switch s.hub.Block(r.Context(), q.wait, func(bool) (ready, stop bool) {
		if s.fail != 0 {
			refusal, reason = s.fail, http.StatusText(s.fail)
			return false, true
		}
		if s.acl != "" && q.token != "" && q.token != s.acl {
			refusal, reason = http.StatusForbidden, "ACL not found"
			return false, true
		}
		body, index, filtered = read(q)
		return q.minIndex == 0 || index > q.minIndex, false
	}) {
	case fakeblock.Gone:
		return
	case fakeblock.Stopped:
		s.record(rec, refusal)
		http.Error(w, reason, refusal)
		return
	case fakeblock.Expired:
		s.mu.Lock()
		body, index, filtered = read(q)
		s.mu.Unlock()
	}
	s.record(rec, http.StatusOK)
	w.Header().Set("X-Consul-Index", strconv.FormatUint(index, 10))
	w.Header().Set("X-Consul-KnownLeader", "true")
	w.Header().Set("X-Consul-LastContact", "0")
	if filtered {
		w.Header().Set("X-Consul-Results-Filtered-By-ACLs", "true")
	}
	writeJSON(w, http.StatusOK, body)
}

// readCatalog answers /v1/catalog/services: every service name with the
// union of its instances' tags. Callers hold s.mu.
func (s *Server) readCatalog(q query) (any, uint64, bool) {
	out := map[string][]string{}
	if s.denied(q) {
		return out, s.catalogIx, true
	}
	for _, in := range s.insts {
		tags := append(out[in.Name], in.Tags...)
		slices.Sort(tags)
		out[in.Name] = slices.Compact(tags)
		if out[in.Name] == nil {
			out[in.Name] = []string{}
		}
	}
	return out, s.catalogIx, false
}

// readHealth answers /v1/health/service/<name>. Callers hold s.mu.
func (s *Server) readHealth(name string, q query) (any, uint64, bool) {
	index, ok := s.serviceIx[name]
	if !ok {
		index = s.catalogIx
	}
	out := []*api.ServiceEntry{}
	if s.denied(q) {
		return out, index, true
	}
	ids := make([]string, 0, len(s.insts))
	for id, in := range s.insts {
		if in.Name == name {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		in := s.insts[id]
		if q.passing && in.Status != Passing {
			continue
		}
		out = append(out, entry(in))
	}
	return out, index, false
}

// denied says whether the request sees nothing: ACLs on and no token (the
// anonymous token, denied by default). An unknown token never gets here.
func (s *Server) denied(q query) bool { return s.acl != "" && q.token == "" }

func entry(in Instance) *api.ServiceEntry {
	tags := slices.Clone(in.Tags)
	if tags == nil {
		tags = []string{}
	}
	return &api.ServiceEntry{
		Node: &api.Node{ID: "00000000-0000-0000-0000-000000000001", Node: in.Node, Address: in.NodeAddress, Datacenter: Datacenter},
		Service: &api.AgentService{
			ID: in.ID, Service: in.Name, Tags: tags, Address: in.Address, Port: in.Port, Datacenter: Datacenter,
		},
		Checks: api.HealthChecks{
			{Node: in.Node, CheckID: "serfHealth", Name: "Serf Health Status", Status: Passing},
			{Node: in.Node, CheckID: "service:" + in.ID, Name: "Service '" + in.Name + "' check", Status: in.Status,
				ServiceID: in.ID, ServiceName: in.Name, ServiceTags: tags},
		},
	}
}

// parseQuery reads the blocking-query parameters as Consul does: wait is a
// Go duration (400 "Invalid wait time"), defaulting to 5 minutes and
// capped at 10; index an unsigned integer (400 "Invalid index"); passing
// is true when present without a value, else a Go boolean (400).
func parseQuery(v url.Values) (q query, status int, msg string) {
	q.minIndex, q.wait, status, msg = fakeblock.ParseQuery(v, DefaultWait, MaxWait)
	if status != 0 {
		return q, status, msg
	}
	if _, ok := v["passing"]; ok {
		if s := v.Get("passing"); s == "" {
			q.passing = true
		} else {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return q, http.StatusBadRequest, "Invalid value for ?passing"
			}
			q.passing = b
		}
	}
	return q, 0, ""
}

// tokenOf finds the ACL token where Consul looks for it: the
// X-Consul-Token header, an Authorization bearer token, or ?token=.
func tokenOf(r *http.Request) string {
	if t := r.Header.Get("X-Consul-Token"); t != "" {
		return t
	}
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return r.URL.Query().Get("token")
}

func (s *Server) record(rec Request, status int) {
	rec.Status = status
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, rec)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
