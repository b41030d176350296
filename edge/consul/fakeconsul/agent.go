package fakeconsul

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
)

// The local agent's endpoints the fake serves, PUT only, as Nomad's
// client calls them to register allocations' services
// (command/agent/consul/service_client.go in Nomad).
const (
	agentServiceRegister   = "/v1/agent/service/register"
	agentServiceDeregister = "/v1/agent/service/deregister/"
	agentCheckUpdate       = "/v1/agent/check/update/"
)

// agentService is what the agent API registered under one service ID
// beyond its Instance: its meta and its checks. An instance the agent API
// registered has as its Status the aggregate of its checks' (a critical
// one makes it critical, else a warning one warning), so that the
// catalog's reads and indexes treat it as any other instance.
type agentService struct {
	in     Instance // as registered, to tell when the Go API took it over
	meta   map[string]string
	checks []*agentCheck
}

// agentCheck is a TTL check registered through the agent API.
type agentCheck struct {
	id, name, notes string
	status, output  string
	ttl             time.Duration
	timer           *time.Timer
}

// agentState is one server's agent API state. svcs is guarded by the
// server's lock; write serializes the agent's writes from start to end,
// since each ends with a call of the Go API (Register, Deregister,
// SetStatus), which moves the indexes as for any instance.
type agentState struct {
	write sync.Mutex
	svcs  map[string]*agentService
}

// agents holds each server's agent state, so that the agent API adds no
// field to Server: *Server -> *agentState, dropped by closeAgent.
var agents sync.Map

func (s *Server) agent() *agentState {
	v, _ := agents.LoadOrStore(s, &agentState{svcs: map[string]*agentService{}})
	return v.(*agentState)
}

// closeAgent stops the TTLs of the agent's checks and forgets its state.
func (s *Server) closeAgent() {
	st := s.agent()
	st.write.Lock()
	defer st.write.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, svc := range st.svcs {
		svc.stopTimers()
	}
	agents.Delete(s)
}

func (svc *agentService) stopTimers() {
	for _, c := range svc.checks {
		if c.timer != nil {
			c.timer.Stop()
			c.timer = nil
		}
	}
}

// agentError is an answer of the agent's handlers other than 200: a
// status and a plain-text reason (Consul's HTTPError).
type agentError struct {
	status int
	reason string
}

// serveAgent answers the /v1/agent/ endpoints as Consul's agent does:
// the path, then the method, then the body, then the ACL, then the
// change.
func (s *Server) serveAgent(w http.ResponseWriter, r *http.Request) {
	var handle func(r *http.Request, token string) *agentError
	switch p := r.URL.Path; {
	case p == agentServiceRegister:
		handle = s.agentRegister
	case strings.HasPrefix(p, agentServiceDeregister):
		handle = s.agentDeregister
	case strings.HasPrefix(p, agentCheckUpdate):
		handle = s.agentCheckUpdate
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintln(w, "Invalid URL path: not a recognized HTTP API endpoint")
		return
	}
	rec := Request{Path: r.URL.Path, Token: tokenOf(r)}
	switch r.Method {
	case http.MethodPut:
	case http.MethodOptions:
		w.Header().Add("Allow", "OPTIONS,PUT")
		return
	default:
		s.record(rec, http.StatusMethodNotAllowed)
		w.Header().Add("Allow", "OPTIONS,PUT")
		http.Error(w, fmt.Sprintf("method %s not allowed", r.Method), http.StatusMethodNotAllowed)
		return
	}
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	if fail != 0 {
		s.record(rec, fail)
		http.Error(w, http.StatusText(fail), fail)
		return
	}
	if e := handle(r, rec.Token); e != nil {
		s.record(rec, e.status)
		http.Error(w, e.reason, e.status)
		return
	}
	s.record(rec, http.StatusOK)
	w.WriteHeader(http.StatusOK)
}

// resolveLocked resolves the request's token as the agent does first:
// with ACLs on, a token other than the management token is not found
// (the fake's other tokens only read). Callers hold s.mu.
func (s *Server) resolveLocked(token string) *agentError {
	if s.acl != "" && token != "" && token != s.acl {
		return &agentError{http.StatusForbidden, "ACL not found"}
	}
	return nil
}

// allowedLocked is the agent's check of service:write on a service name:
// with ACLs on, the anonymous token is denied by default. Callers hold
// s.mu and have resolved the token.
func (s *Server) allowedLocked(token, name string) *agentError {
	if s.acl != "" && token == "" {
		return &agentError{http.StatusForbidden,
			fmt.Sprintf("Permission denied: anonymous token lacks permission 'service:write' on %q", name)}
	}
	return nil
}

// ownedLocked returns the agent's registration of the service ID, or nil
// when there is none or the Go API has since deregistered the instance or
// registered another in its place, which makes it the Go API's. Callers
// hold s.mu.
func (s *Server) ownedLocked(st *agentState, id string) *agentService {
	svc := st.svcs[id]
	if svc == nil {
		return nil
	}
	if in, ok := s.insts[id]; !ok || !sameInstance(in, svc.in) {
		return nil
	}
	return svc
}

// sameInstance says whether two instances differ at most in their status.
func sameInstance(a, b Instance) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Node == b.Node && a.NodeAddress == b.NodeAddress &&
		a.Address == b.Address && a.Port == b.Port && slices.Equal(a.Tags, b.Tags)
}

// aggregate is a service's status from its checks, as Consul aggregates
// them: critical if one is, else warning if one is, else passing.
func aggregate(checks []*agentCheck) string {
	status := Passing
	for _, c := range checks {
		switch c.status {
		case Critical:
			return Critical
		case Warning:
			status = Warning
		}
	}
	return status
}

// agentEntryLocked gives a health entry the meta and checks the agent API
// registered for it, after the node's serfHealth check. Callers hold s.mu.
func (s *Server) agentEntryLocked(e *api.ServiceEntry) *api.ServiceEntry {
	v, ok := agents.Load(s)
	if !ok || e.Service == nil {
		return e
	}
	svc := s.ownedLocked(v.(*agentState), e.Service.ID)
	if svc == nil {
		return e
	}
	e.Service.Meta = maps.Clone(svc.meta)
	checks := api.HealthChecks{}
	for _, c := range e.Checks {
		if c.ServiceID == "" {
			checks = append(checks, c) // the node's
		}
	}
	for _, c := range svc.checks {
		checks = append(checks, &api.HealthCheck{Node: svc.in.Node, CheckID: c.id, Name: c.name, Status: c.status,
			Notes: c.notes, Output: c.output, ServiceID: svc.in.ID, ServiceName: svc.in.Name,
			ServiceTags: e.Service.Tags, Type: "ttl"})
	}
	e.Checks = checks
	return e
}

// agentRegister is PUT /v1/agent/service/register (AgentRegisterService):
// the definition is validated as the agent does; each check gets its ID
// ("service:<id>", with ":<n>" when there are several), name and status
// (critical unless given), and a check the service already has under
// that ID keeps its status and output; with ?replace-existing-checks the
// service's other checks go, without it they stay.
func (s *Server) agentRegister(r *http.Request, token string) *agentError {
	var def api.AgentServiceRegistration
	if err := json.NewDecoder(r.Body).Decode(&def); err != nil {
		return &agentError{http.StatusBadRequest, fmt.Sprintf("Request decode failed: %v", err)}
	}
	if def.Name == "" {
		return &agentError{http.StatusBadRequest, "Missing service name"}
	}
	if def.Address == "0.0.0.0" || def.Address == "::" || def.Address == "[::]" {
		return &agentError{http.StatusBadRequest, "Invalid service address"}
	}
	var defs api.AgentServiceChecks
	if def.Check != nil && !reflect.DeepEqual(*def.Check, api.AgentServiceCheck{}) {
		defs = append(defs, def.Check)
	}
	for _, c := range def.Checks {
		if c != nil {
			defs = append(defs, c)
		}
	}
	ttls := make([]time.Duration, len(defs))
	for i, c := range defs {
		ttl, err := checkTTL(c)
		if err != nil {
			return &agentError{http.StatusBadRequest, fmt.Sprintf("Invalid check: %v", err)}
		}
		if c.Status != "" && c.Status != Passing && c.Status != Warning && c.Status != Critical {
			return &agentError{http.StatusBadRequest, "Status for checks must 'passing', 'warning', 'critical'"}
		}
		ttls[i] = ttl
	}
	if def.ID == "" {
		def.ID = def.Name
	}
	q := r.URL.Query()
	replace := len(q["replace-existing-checks"]) > 0 && (q.Get("replace-existing-checks") == "" || q.Get("replace-existing-checks") == "true")

	st := s.agent()
	st.write.Lock()
	defer st.write.Unlock()
	s.mu.Lock()
	if e := s.resolveLocked(token); e != nil {
		s.mu.Unlock()
		return e
	}
	if e := s.allowedLocked(token, def.Name); e != nil {
		s.mu.Unlock()
		return e
	}
	in := Instance{ID: def.ID, Name: def.Name, Node: "node1", NodeAddress: "127.0.0.1", Address: def.Address,
		Port: def.Port, Tags: slices.Clone(def.Tags)}
	svc := &agentService{in: in, meta: maps.Clone(def.Meta)}
	prev := map[string]*agentCheck{}
	var kept []*agentCheck
	if old := s.ownedLocked(st, def.ID); old != nil {
		for _, c := range old.checks {
			prev[c.id] = c
		}
		if !replace {
			kept = old.checks
		}
	}
	if old := st.svcs[def.ID]; old != nil {
		old.stopTimers()
	}
	defined := map[string]bool{}
	for i, d := range defs {
		c := &agentCheck{id: d.CheckID, name: d.Name, notes: d.Notes, status: Critical, ttl: ttls[i]}
		if c.id == "" {
			c.id = "service:" + def.ID
			if len(defs) > 1 {
				c.id += fmt.Sprintf(":%d", i+1)
			}
		}
		if c.name == "" {
			c.name = fmt.Sprintf("Service '%s' check", def.Name)
		}
		if d.Status != "" {
			c.status = d.Status
		}
		if p := prev[c.id]; p != nil {
			c.status, c.output = p.status, p.output
		}
		defined[c.id] = true
		svc.checks = append(svc.checks, c)
	}
	for _, c := range kept {
		if !defined[c.id] {
			svc.checks = append(svc.checks, &agentCheck{id: c.id, name: c.name, notes: c.notes, status: c.status, output: c.output, ttl: c.ttl})
		}
	}
	in.Status = aggregate(svc.checks)
	svc.in = in
	st.svcs[def.ID] = svc
	for _, c := range svc.checks {
		s.armLocked(st, svc, c)
	}
	s.mu.Unlock()
	s.Register(in)
	return nil
}

// checkTTL validates a check definition as Consul's CheckType.Validate
// does and returns its TTL. The fake runs no checks of its own, so it
// takes TTL checks only.
func checkTTL(c *api.AgentServiceCheck) (time.Duration, error) {
	var ttl, interval time.Duration
	var err error
	if c.TTL != "" {
		if ttl, err = time.ParseDuration(c.TTL); err != nil {
			return 0, fmt.Errorf("invalid TTL %q: %w", c.TTL, err)
		}
	}
	if c.Interval != "" {
		if interval, err = time.ParseDuration(c.Interval); err != nil {
			return 0, fmt.Errorf("invalid Interval %q: %w", c.Interval, err)
		}
	}
	intervalCheck := len(c.Args) > 0 || c.HTTP != "" || c.TCP != "" || c.UDP != "" || c.GRPC != "" || c.H2PING != ""
	switch {
	case interval > 0 && ttl > 0:
		return 0, fmt.Errorf("Interval and TTL cannot both be specified")
	case intervalCheck:
		return 0, fmt.Errorf("fakeconsul runs no script, HTTP, TCP, UDP, gRPC or H2PING checks; register a TTL check and update it")
	case c.AliasNode != "" || c.AliasService != "":
		return 0, fmt.Errorf("fakeconsul has no alias checks")
	case ttl <= 0:
		return 0, fmt.Errorf("TTL must be > 0 for TTL checks")
	}
	return ttl, nil
}

// armLocked (re)starts a check's TTL: if no update comes before it runs
// out, the check turns critical with the agent's "TTL expired" output.
// Callers hold s.mu.
func (s *Server) armLocked(st *agentState, svc *agentService, c *agentCheck) {
	if c.timer != nil {
		c.timer.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(c.ttl, func() {
		st.write.Lock()
		defer st.write.Unlock()
		s.mu.Lock()
		if c.timer != t || s.ownedLocked(st, svc.in.ID) != svc {
			s.mu.Unlock()
			return // renewed, replaced or gone meanwhile
		}
		c.timer = nil
		out := "TTL expired"
		if c.output != "" {
			out += " (last output before timeout follows): " + c.output
		}
		s.setCheckLocked(svc, c, Critical, out)
	})
	c.timer = t
}

// setCheckLocked records a check's status and output, unlocks s.mu and
// sets the instance's status when the aggregate changed, which moves the
// service's health index (not the catalog's) and wakes blocked queries.
// An output alone moves nothing: the agent defers syncing it
// (check_update_interval). Callers hold st.write and s.mu.
func (s *Server) setCheckLocked(svc *agentService, c *agentCheck, status, output string) {
	c.status, c.output = status, output
	agg := aggregate(svc.checks)
	changed := agg != svc.in.Status
	svc.in.Status = agg
	s.mu.Unlock()
	if changed {
		s.SetStatus(svc.in.ID, agg)
	}
}

// agentDeregister is PUT /v1/agent/service/deregister/<id>
// (AgentDeregisterService): the service and its checks leave; an unknown
// ID is 404 with the agent's text.
func (s *Server) agentDeregister(r *http.Request, token string) *agentError {
	id := strings.TrimPrefix(r.URL.Path, agentServiceDeregister)
	st := s.agent()
	st.write.Lock()
	defer st.write.Unlock()
	s.mu.Lock()
	if e := s.resolveLocked(token); e != nil {
		s.mu.Unlock()
		return e
	}
	in, ok := s.insts[id]
	if !ok {
		s.mu.Unlock()
		return &agentError{http.StatusNotFound,
			fmt.Sprintf("Unknown service ID %q. Ensure that the service ID is passed, not the service name.", id)}
	}
	if e := s.allowedLocked(token, in.Name); e != nil {
		s.mu.Unlock()
		return e
	}
	if svc := st.svcs[id]; svc != nil {
		svc.stopTimers()
		delete(st.svcs, id)
	}
	s.mu.Unlock()
	s.Deregister(id)
	return nil
}

// agentCheckUpdate is PUT /v1/agent/check/update/<check id> with
// {"Status","Output"} (AgentCheckUpdate): it sets a TTL check's status
// and output and renews its TTL.
func (s *Server) agentCheckUpdate(r *http.Request, token string) *agentError {
	var u struct{ Status, Output string }
	if err := json.NewDecoder(r.Body).Decode(&u); err != nil {
		return &agentError{http.StatusBadRequest, fmt.Sprintf("Request decode failed: %v", err)}
	}
	switch u.Status {
	case Passing, Warning, Critical:
	default:
		return &agentError{http.StatusBadRequest, fmt.Sprintf("Invalid check status: '%s'", u.Status)}
	}
	id := strings.TrimPrefix(r.URL.Path, agentCheckUpdate)
	st := s.agent()
	st.write.Lock()
	defer st.write.Unlock()
	s.mu.Lock()
	if e := s.resolveLocked(token); e != nil {
		s.mu.Unlock()
		return e
	}
	svc, c := s.checkLocked(st, id)
	if c == nil {
		// A Go API instance's one check, "service:<id>", is not a TTL.
		if in, ok := s.insts[strings.TrimPrefix(id, "service:")]; ok && strings.HasPrefix(id, "service:") {
			if e := s.allowedLocked(token, in.Name); e != nil {
				s.mu.Unlock()
				return e
			}
			s.mu.Unlock()
			return &agentError{http.StatusInternalServerError, fmt.Sprintf("CheckID %q does not have associated TTL", id)}
		}
		s.mu.Unlock()
		return &agentError{http.StatusNotFound,
			fmt.Sprintf("Unknown check ID %q. Ensure that the check ID is passed, not the check name.", id)}
	}
	if e := s.allowedLocked(token, svc.in.Name); e != nil {
		s.mu.Unlock()
		return e
	}
	s.armLocked(st, svc, c)
	s.setCheckLocked(svc, c, u.Status, u.Output)
	return nil
}

// checkLocked finds an agent check by ID. Callers hold s.mu.
func (s *Server) checkLocked(st *agentState, id string) (*agentService, *agentCheck) {
	for sid := range st.svcs {
		svc := s.ownedLocked(st, sid)
		if svc == nil {
			continue
		}
		for _, c := range svc.checks {
			if c.id == id {
				return svc, c
			}
		}
	}
	return nil, nil
}
