// Package fakeconsul is an HTTP fake of exactly the part of Consul's API
// that edge/consul calls: GET /v1/catalog/services, GET
// /v1/health/service/<name> (with ?passing) and GET /v1/status/leader, as
// a Consul Community Edition agent answers them. It keeps Consul's
// blocking-query semantics (X-Consul-Index; a request with index=N blocks
// until the index of what it reads exceeds N, or its wait elapses; wait
// parsed as Consul parses it, defaulting to 5 minutes and capped at 10,
// plus up to a sixteenth of jitter; a service with no instance reads at
// the index of the last service to lose its last instance), its ACL
// behaviour (a management token sees everything; a token made with
// AddToken sees the services and nodes its policy reads, an instance only
// when it may read both; no token sees what the anonymous token may, which
// with a deny-by-default policy is nothing; an unknown token is refused
// with 403; X-Consul-Results-Filtered-By-ACLs only ever answers a request
// that carried a token), and what Consul refuses: a method other than GET
// (405, OPTIONS answered with the Allow header), namespaces and partitions
// (400: Enterprise features), another datacenter (500), and every read
// while the cluster has no leader (500). A Go API lets tests register and
// deregister instances, flip their checks, add tokens, restore an older
// index and make Consul fail. It answers nothing Consul does not have: any
// other path is a 404, as in Consul.
//
// It also serves the local agent's endpoints that Nomad's client calls to
// register allocations' services (agent.go): PUT
// /v1/agent/service/register (with ?replace-existing-checks), PUT
// /v1/agent/service/deregister/<id> and PUT /v1/agent/check/update/<check
// id>, validated and answered as the agent does. What they register is in
// the catalog at once, and moves its indexes as the Go API does; an
// instance's status is its checks' aggregate. The fake runs no checks:
// it takes TTL checks only (one not renewed in time turns critical, "TTL
// expired") and refuses the others with 400, where Consul would run them.
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

// Policy is what a token made with AddToken may read, as the rules
// service_prefix "<p>" { policy = "read" } and node_prefix "<p>" { policy
// = "read" } grant it: the services, and the nodes, whose names start
// with one of the prefixes ("" matches every name).
type Policy struct {
	Services []string
	Nodes    []string
}

// everything is what a management token reads, and any request while ACLs
// are off.
var everything = Policy{Services: []string{""}, Nodes: []string{""}}

// readsService and readsNode say whether p grants read on the service, or
// the node, called name.
func (p Policy) readsService(name string) bool { return matches(p.Services, name) }
func (p Policy) readsNode(name string) bool    { return matches(p.Nodes, name) }

func matches(prefixes []string, name string) bool {
	return slices.ContainsFunc(prefixes, func(pre string) bool { return strings.HasPrefix(name, pre) })
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
	serviceIx map[string]uint64 // index of each service name that has instances
	extinct   uint64            // when a service last lost its last instance (0: never)
	insts     map[string]Instance
	hub       *fakeblock.Hub // guarded by mu
	acl       string
	tokens    map[string]Policy
	fail      int
	leader    string
	requests  []Request
}

// New starts a fake Consul on a loopback port. Close stops it.
func New() *Server {
	s := &Server{
		index: 1, catalogIx: 1, serviceIx: map[string]uint64{}, insts: map[string]Instance{},
		tokens: map[string]Policy{}, leader: "127.0.0.1:8300",
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
	s.closeAgent()
	s.hub.Close()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Register adds an instance, or replaces the one with its ID. As in
// Consul, a registration that changes nothing moves no index, and one
// that changes only the check's status moves the service's health index,
// not the catalog's.
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
	old, had := s.insts[in.ID]
	if had && sameService(old, in) {
		if old.Status != in.Status {
			s.insts[in.ID] = in
			s.serviceIx[in.Name] = s.bump()
		}
		return
	}
	ix := s.bump()
	s.insts[in.ID] = in
	if had && old.Name != in.Name {
		s.leftLocked(old.Name, ix)
	}
	s.serviceIx[in.Name] = ix
	s.catalogIx = ix
}

// sameService says whether two registrations of one ID differ at most in
// their check's status.
func sameService(a, b Instance) bool {
	return a.Name == b.Name && a.Node == b.Node && a.NodeAddress == b.NodeAddress &&
		a.Address == b.Address && a.Port == b.Port && slices.Equal(a.Tags, b.Tags)
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
	s.leftLocked(old.Name, ix)
	s.catalogIx = ix
	return true
}

// leftLocked records at ix that an instance of service name went away: the
// service's index moves, or, when that was its last instance, its index
// is dropped and the extinction index moves, as in Consul's state store.
// Callers hold s.mu.
func (s *Server) leftLocked(name string, ix uint64) {
	for _, in := range s.insts {
		if in.Name == name {
			s.serviceIx[name] = ix
			return
		}
	}
	delete(s.serviceIx, name)
	s.extinct = ix
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
// management token; requests without a token see nothing, requests with a
// token that is neither it nor one made with AddToken are refused (403
// "ACL not found").
func (s *Server) EnableACL(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acl = token
	s.wakeLocked()
}

// AddToken makes secret an ACL token whose policy reads what p says (a
// token with node read but no service read, or the reverse, sees no
// instance). It matters once ACLs are on (EnableACL).
func (s *Server) AddToken(secret string, p Policy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[secret] = Policy{Services: slices.Clone(p.Services), Nodes: slices.Clone(p.Nodes)}
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
// without a leader: Consul answers 200 with an empty string there, and
// fails every read of the catalog and of health (500 "No cluster
// leader"), blocked ones as they wake.
func (s *Server) SetLeader(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leader = addr
	s.wakeLocked()
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
	s.extinct = min(s.extinct, index)
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

// allowed is the methods of the fake's endpoints, as Consul lists them in
// a 405's Allow header.
const allowed = "OPTIONS,GET"

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/v1/agent/") {
		s.serveAgent(w, r) // agent.go
		return
	}
	path := r.URL.Path
	var read func(q query, p Policy) (any, uint64, bool)
	switch {
	case path == "/v1/status/leader":
	case path == "/v1/catalog/services":
		read = s.readCatalog
	case strings.HasPrefix(path, "/v1/health/service/"):
		name := strings.TrimPrefix(path, "/v1/health/service/")
		read = func(q query, p Policy) (any, uint64, bool) { return s.readHealth(name, q, p) }
	default:
		// What Consul answers for a path it has no endpoint for.
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintln(w, "Invalid URL path: not a recognized HTTP API endpoint")
		return
	}
	s.mu.Lock()
	policy := "allow"
	if s.acl != "" {
		policy = "deny"
	}
	s.mu.Unlock()
	w.Header().Set("X-Consul-Default-ACL-Policy", policy)
	switch r.Method {
	case http.MethodGet:
	case http.MethodOptions:
		w.Header().Add("Allow", allowed)
		return
	default:
		w.Header().Add("Allow", allowed)
		http.Error(w, fmt.Sprintf("method %s not allowed", r.Method), http.StatusMethodNotAllowed)
		return
	}

	v := r.URL.Query()
	token := tokenOf(r)
	if read == nil {
		s.serveLeader(w, v, token)
		return
	}
	q, status, msg := parseQuery(v, strings.HasPrefix(path, "/v1/health/"))
	q.token = token
	rec := Request{Path: path, Index: q.minIndex, Wait: q.wait, Token: q.token, Passing: q.passing}
	if status == 0 && path == "/v1/health/service/" {
		status, msg = http.StatusBadRequest, "Missing service name"
	}
	if status == 0 {
		status, msg = checkDC(v)
	}
	if status != 0 {
		s.record(rec, status)
		http.Error(w, msg, status)
		return
	}

	var (
		body     any
		index    uint64
		filtered bool
		refusal  int
		reason   string
		pol      Policy
	)
	switch s.hub.Block(r.Context(), q.wait, func(bool) (ready, stop bool) {
		switch {
		case s.fail != 0:
			refusal, reason = s.fail, http.StatusText(s.fail)
			return false, true
		case s.leader == "":
			refusal, reason = http.StatusInternalServerError, "No cluster leader"
			return false, true
		}
		var known bool
		if pol, known = s.authorize(q.token); !known {
			refusal, reason = http.StatusForbidden, "ACL not found"
			return false, true
		}
		body, index, filtered = read(q, pol)
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
		body, index, filtered = read(q, pol)
		s.mu.Unlock()
	}
	s.record(rec, http.StatusOK)
	w.Header().Set("X-Consul-Index", strconv.FormatUint(index, 10))
	w.Header().Set("X-Consul-KnownLeader", "true")
	w.Header().Set("X-Consul-LastContact", "0")
	w.Header().Set("X-Consul-Effective-Consistency", "leader")
	// Consul never tells a request without a token that ACLs hid
	// something (maskResultsFilteredByACLs).
	if filtered && q.token != "" {
		w.Header().Set("X-Consul-Results-Filtered-By-ACLs", "true")
	}
	writeJSON(w, http.StatusOK, body)
}

// serveLeader answers /v1/status/leader: no ACL applies to it, but its
// parameters are parsed and its datacenter forwarded as for any read.
func (s *Server) serveLeader(w http.ResponseWriter, v url.Values, token string) {
	rec := Request{Path: "/v1/status/leader", Token: token}
	_, _, status, msg := fakeblock.ParseQuery(v, DefaultWait, MaxWait)
	if status == 0 {
		status, msg = checkDC(v)
	}
	s.mu.Lock()
	fail, leader := s.fail, s.leader
	s.mu.Unlock()
	if status == 0 && fail != 0 {
		status, msg = fail, http.StatusText(fail)
	}
	if status != 0 {
		s.record(rec, status)
		http.Error(w, msg, status)
		return
	}
	s.record(rec, http.StatusOK)
	writeJSON(w, http.StatusOK, leader)
}

// checkDC refuses a request for another datacenter as Consul does when it
// has no path to it.
func checkDC(v url.Values) (int, string) {
	if dc := v.Get("dc"); dc != "" && dc != Datacenter {
		return http.StatusInternalServerError, "No path to datacenter"
	}
	return 0, ""
}

// authorize returns what token may read, and false for a token Consul
// does not know. Callers hold s.mu.
func (s *Server) authorize(token string) (Policy, bool) {
	switch {
	case s.acl == "" || token == s.acl:
		return everything, true
	case token == "":
		return Policy{}, true // the anonymous token, denied by default
	}
	p, ok := s.tokens[token]
	return p, ok
}

// readCatalog answers /v1/catalog/services: every service name p may read
// with the union of its instances' tags. Callers hold s.mu.
func (s *Server) readCatalog(_ query, p Policy) (any, uint64, bool) {
	out := map[string][]string{}
	filtered := false
	for _, in := range s.insts {
		if !p.readsService(in.Name) {
			filtered = true
			continue
		}
		tags := append(out[in.Name], in.Tags...)
		slices.Sort(tags)
		out[in.Name] = slices.Compact(tags)
		if out[in.Name] == nil {
			out[in.Name] = []string{}
		}
	}
	return out, s.catalogIx, filtered
}

// readHealth answers /v1/health/service/<name>: the instances whose
// service and node p may both read. A service without instances reads at
// the last extinction index, as in Consul (the catalog's index before any
// service ever went away). Callers hold s.mu.
func (s *Server) readHealth(name string, q query, p Policy) (any, uint64, bool) {
	index, ok := s.serviceIx[name]
	switch {
	case ok:
	case s.extinct > 0:
		index = s.extinct
	default:
		index = s.catalogIx
	}
	var ins []Instance
	for _, in := range s.insts {
		if in.Name == name {
			ins = append(ins, in)
		}
	}
	slices.SortFunc(ins, func(a, b Instance) int {
		return strings.Compare(a.Node+"\x00"+a.ID, b.Node+"\x00"+b.ID)
	})
	out := []*api.ServiceEntry{}
	filtered := false
	for _, in := range ins {
		if !p.readsService(in.Name) || !p.readsNode(in.Node) {
			filtered = true
			continue
		}
		if q.passing && in.Status != Passing {
			continue
		}
		out = append(out, s.agentEntryLocked(entry(in)))
	}
	return out, index, filtered
}

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

// parseQuery reads a read's parameters as Consul does: namespaces and
// partitions are refused (400: Enterprise features); wait is a Go duration
// (400 "Invalid wait time"), defaulting to 5 minutes and capped at 10;
// index an unsigned integer (400 "Invalid index"); and, for health
// queries, passing is true when present without a value, else a Go
// boolean (400).
func parseQuery(v url.Values, health bool) (q query, status int, msg string) {
	if v.Get("ns") != "" {
		return q, http.StatusBadRequest, `Invalid query parameter: "ns" - Namespaces are a Consul Enterprise feature`
	}
	if v.Get("partition") != "" {
		return q, http.StatusBadRequest, `Invalid query parameter: "partition" - Partitions are a Consul Enterprise feature`
	}
	q.minIndex, q.wait, status, msg = fakeblock.ParseQuery(v, DefaultWait, MaxWait)
	if status != 0 || !health {
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

// tokenOf finds the ACL token where Consul looks for it, in its order:
// ?token=, the X-Consul-Token header, then an Authorization bearer token
// (the scheme in any case, the first word of the value).
func tokenOf(r *http.Request) string {
	if t := r.URL.Query().Get("token"); t != "" {
		return t
	}
	if t := r.Header.Get("X-Consul-Token"); t != "" {
		return t
	}
	scheme, value, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	if f := strings.Fields(value); len(f) > 0 {
		return f[0]
	}
	return ""
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
