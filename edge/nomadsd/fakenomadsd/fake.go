// Package fakenomadsd is an HTTP fake of exactly the part of Nomad's API
// that edge/nomadsd calls: GET /v1/services, GET /v1/service/<name> (with
// ?namespace and ?region) and GET /v1/status/leader, with Nomad's
// blocking-query semantics (X-Nomad-Index is the index of the whole
// service registrations table; a request with index=N answers at once when
// that index is above N, and otherwise blocks until what it reads changes
// or its wait elapses; wait parsed as Nomad parses it, defaulting to and
// capped at 5 minutes, plus up to a sixteenth of jitter), its ACL
// behaviour (with ACLs on, a request without the management token is
// refused with 403), and a Go API for tests to register and deregister
// instances, restore an older index and make Nomad fail.
//
// It is for tests only: production code never links it (internal/archtest
// checks). It must not import edge/nomadsd, whose tests use it, nor Nomad's
// API client (only scheduler/nomad may), nor anything of svc but
// edge/blocking/fakeblock (the parking of blocking queries it shares with
// fakeconsul): it declares the wire format it serves.
package fakenomadsd

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svchost/svc/edge/blocking/fakeblock"
)

// Blocking-query limits, as Nomad has them.
const (
	DefaultWait = 5 * time.Minute
	MaxWait     = 5 * time.Minute
)

// Region is the fake's region; a request for another one fails as Nomad
// fails it. DefaultNamespace is the namespace of a request that names none.
const (
	Region           = "global"
	DefaultNamespace = "default"
)

// Registration is a service registration as GET /v1/service/<name>
// returns it.
type Registration struct {
	ID          string
	ServiceName string
	Namespace   string
	NodeID      string
	Datacenter  string
	JobID       string
	AllocID     string
	Tags        []string
	Address     string
	Port        int
	CreateIndex uint64
	ModifyIndex uint64
}

// serviceStub and namespaceServices are the elements of GET /v1/services.
type (
	serviceStub struct {
		ServiceName string
		Tags        []string
	}
	namespaceServices struct {
		Namespace string
		Services  []serviceStub
	}
)

// Request is one query the fake answered, for tests to inspect.
type Request struct {
	Path      string
	Namespace string
	Index     uint64
	Wait      time.Duration
	Token     string
	Status    int
}

// Server is the fake Nomad agent.
type Server struct {
	srv *httptest.Server

	mu       sync.Mutex
	index    uint64            // the service registrations table's index
	svcIx    map[string]uint64 // namespace/name -> index of its last change, kept after it leaves
	regs     map[string]Registration
	hub      *fakeblock.Hub // guarded by mu
	acl      string
	fail     int
	leader   string
	requests []Request
}

// New starts a fake Nomad on a loopback port. Close stops it.
func New() *Server {
	s := &Server{
		index: 1, svcIx: map[string]uint64{}, regs: map[string]Registration{},
		leader: "127.0.0.1:4647",
	}
	s.hub = fakeblock.New(&s.mu)
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

// Register adds a registration, or replaces the one with its ID. Namespace
// defaults to DefaultNamespace, Datacenter to dc1, Address to 127.0.0.1.
func (s *Server) Register(r Registration) {
	if r.Namespace == "" {
		r.Namespace = DefaultNamespace
	}
	if r.Datacenter == "" {
		r.Datacenter = "dc1"
	}
	if r.Address == "" {
		r.Address = "127.0.0.1"
	}
	if r.NodeID == "" {
		r.NodeID = "00000000-0000-0000-0000-000000000001"
	}
	r.Tags = slices.Clone(r.Tags)
	s.mu.Lock()
	defer s.mu.Unlock()
	ix := s.bump()
	r.CreateIndex, r.ModifyIndex = ix, ix
	if old, ok := s.regs[r.ID]; ok {
		r.CreateIndex = old.CreateIndex
		s.svcIx[key(old.Namespace, old.ServiceName)] = ix
	}
	s.regs[r.ID] = r
	s.svcIx[key(r.Namespace, r.ServiceName)] = ix
}

// Deregister removes a registration and reports whether it was there.
func (s *Server) Deregister(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.regs[id]
	if !ok {
		return false
	}
	ix := s.bump()
	delete(s.regs, id)
	s.svcIx[key(old.Namespace, old.ServiceName)] = ix
	return true
}

// EnableACL turns ACLs on: token is the management token, and every
// request without it is refused (403), as the anonymous policy grants
// nothing by default.
func (s *Server) EnableACL(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acl = token
	s.wakeLocked()
}

// FailWith makes every request (blocked ones included, as they wake, and
// /v1/status/leader) answer with status; 0 makes the fake answer normally
// again.
func (s *Server) FailWith(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = status
	s.wakeLocked()
}

// SetLeader sets the address /v1/status/leader answers; "" is a cluster
// without a leader.
func (s *Server) SetLeader(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leader = addr
}

// Restore sets every index to at most index, as a snapshot restore does,
// and wakes every query in flight.
func (s *Server) Restore(index uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index = max(index, 1)
	for k, ix := range s.svcIx {
		s.svcIx[k] = min(ix, s.index)
	}
	s.hub.AbandonLocked()
}

// Requests returns the queries answered so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Blocked returns how many queries are blocked now, and a channel closed
// when that number next changes.
func (s *Server) Blocked() (int, <-chan struct{}) { return s.hub.Blocked() }

func key(namespace, name string) string { return namespace + "/" + name }

func (s *Server) bump() uint64 {
	s.index++
	s.wakeLocked()
	return s.index
}

func (s *Server) wakeLocked() { s.hub.WakeLocked() }

// query is what a read needs from the request.
type query struct {
	minIndex  uint64
	wait      time.Duration
	namespace string
	token     string
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, fmt.Sprintf("Invalid method: %s", r.Method), http.StatusMethodNotAllowed)
		return
	}
	token := r.Header.Get("X-Nomad-Token")
	var (
		read    func(q query) any
		changed func(q query) uint64 // the index of the last change of what is read
	)
	switch {
	case r.URL.Path == "/v1/status/leader":
		s.mu.Lock()
		fail, leader := s.fail, s.leader
		s.mu.Unlock()
		if fail != 0 {
			s.record(Request{Path: r.URL.Path, Token: token}, fail)
			http.Error(w, http.StatusText(fail), fail)
			return
		}
		s.record(Request{Path: r.URL.Path, Token: token}, http.StatusOK)
		writeJSON(w, leader)
		return
	case r.URL.Path == "/v1/services":
		read = s.readList
		changed = func(query) uint64 { return s.index }
	case strings.HasPrefix(r.URL.Path, "/v1/service/") && len(r.URL.Path) > len("/v1/service/"):
		name := strings.TrimPrefix(r.URL.Path, "/v1/service/")
		read = func(q query) any { return s.readService(q.namespace, name) }
		changed = func(q query) uint64 { return s.svcIx[key(q.namespace, name)] }
	default:
		http.NotFound(w, r)
		return
	}
	q, status, msg := parseQuery(r.URL.Query())
	q.token = token
	rec := Request{Path: r.URL.Path, Namespace: q.namespace, Index: q.minIndex, Wait: q.wait, Token: token}
	if status != 0 {
		s.record(rec, status)
		http.Error(w, msg, status)
		return
	}
	if region := r.URL.Query().Get("region"); region != "" && region != Region {
		s.record(rec, http.StatusInternalServerError)
		http.Error(w, "No path to region", http.StatusInternalServerError)
		return
	}

	var (
		body    any
		index   uint64
		refusal int
		reason  string
	)
	switch s.hub.Block(r.Context(), q.wait, func(blocked bool) (ready, stop bool) {
		if s.fail != 0 {
			refusal, reason = s.fail, http.StatusText(s.fail)
			return false, true
		}
		if s.acl != "" && q.token != s.acl {
			refusal, reason = http.StatusForbidden, "ACL token not found"
			if q.token == "" {
				reason = "Permission denied"
			}
			return false, true
		}
		// Nomad answers at once when the table's index is past the
		// client's; otherwise it waits for what it reads to change (not
		// for any change of the table), then answers with the table's index.
		index, body = s.index, read(q)
		return q.minIndex == 0 || (!blocked && index > q.minIndex) || (blocked && changed(q) > q.minIndex), false
	}) {
	case fakeblock.Gone:
		return
	case fakeblock.Stopped:
		s.record(rec, refusal)
		http.Error(w, reason, refusal)
		return
	case fakeblock.Expired:
		s.mu.Lock()
		index, body = s.index, read(q)
		s.mu.Unlock()
	}
	s.record(rec, http.StatusOK)
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(index, 10))
	w.Header().Set("X-Nomad-KnownLeader", "true")
	w.Header().Set("X-Nomad-LastContact", "0")
	writeJSON(w, body)
}

// readList answers /v1/services for a namespace ("*" for all): its
// services with the union of their registrations' tags. Callers hold s.mu.
func (s *Server) readList(q query) any {
	byNS := map[string]map[string][]string{}
	for _, r := range s.regs {
		if q.namespace != "*" && r.Namespace != q.namespace {
			continue
		}
		if byNS[r.Namespace] == nil {
			byNS[r.Namespace] = map[string][]string{}
		}
		tags := append(byNS[r.Namespace][r.ServiceName], r.Tags...)
		slices.Sort(tags)
		byNS[r.Namespace][r.ServiceName] = slices.Compact(tags)
	}
	out := []namespaceServices{}
	for _, ns := range slices.Sorted(maps.Keys(byNS)) {
		e := namespaceServices{Namespace: ns, Services: []serviceStub{}}
		for _, name := range slices.Sorted(maps.Keys(byNS[ns])) {
			tags := byNS[ns][name]
			if tags == nil {
				tags = []string{}
			}
			e.Services = append(e.Services, serviceStub{ServiceName: name, Tags: tags})
		}
		out = append(out, e)
	}
	return out
}

// readService answers /v1/service/<name>. Callers hold s.mu.
func (s *Server) readService(namespace, name string) any {
	out := []Registration{}
	for _, r := range s.regs {
		if r.Namespace == namespace && r.ServiceName == name {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Registration) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// parseQuery reads the blocking-query parameters as Nomad does: wait is a
// Go duration (400 "Invalid wait time"), defaulting to and capped at 5
// minutes; index an unsigned integer (400 "Invalid index"); namespace
// defaults to "default".
func parseQuery(v url.Values) (q query, status int, msg string) {
	q.minIndex, q.wait, status, msg = fakeblock.ParseQuery(v, DefaultWait, MaxWait)
	if status != 0 {
		return q, status, msg
	}
	q.namespace = v.Get("namespace")
	if q.namespace == "" {
		q.namespace = DefaultNamespace
	}
	return q, 0, ""
}

func (s *Server) record(rec Request, status int) {
	rec.Status = status
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, rec)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
