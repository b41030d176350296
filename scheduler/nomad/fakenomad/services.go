package fakenomad

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Consul is the local Consul agent the fake's client registers the
// services of provider consul with, as Nomad's client does.
type Consul struct {
	// Address is the agent's HTTP address, such as http://127.0.0.1:8500
	// (http:// is assumed when it names no scheme).
	Address string
	// Token, when set, is the ACL token the agent calls carry
	// (X-Consul-Token), as Nomad's consul.token.
	Token string
}

// What Nomad's service client (command/agent/consul/service_client.go,
// client/serviceregistration) names and adds.
const (
	nomadTaskPrefix  = "_nomad-task-"
	nomadCheckPrefix = "_nomad-check-"
	// ttlCheckBuffer is what Nomad adds to a script check's interval to
	// make its Consul TTL.
	ttlCheckBuffer = 31 * time.Second
	// consulRetry and consulMaxRetry are the service client's backoff
	// after a failed sync.
	consulRetry    = time.Second
	consulMaxRetry = 30 * time.Second
)

// Consul's check statuses.
const (
	consulPassing  = "passing"
	consulCritical = "critical"
)

// agentServiceRegistration is the body of Consul's PUT
// /v1/agent/service/register, as Nomad's service client fills it
// (consul/api.AgentServiceRegistration; the fake does not import
// Consul's API, which only edge/consul may).
type agentServiceRegistration struct {
	ID                string
	Name              string
	Tags              []string          `json:",omitempty"`
	Port              int               `json:",omitempty"`
	Address           string            `json:",omitempty"`
	EnableTagOverride bool              `json:",omitempty"`
	Meta              map[string]string `json:",omitempty"`
	Checks            []agentServiceCheck
}

// agentServiceCheck is one check of a registration
// (consul/api.AgentServiceCheck), the way Nomad registers a script check:
// a TTL of the interval plus ttlCheckBuffer, no interval.
type agentServiceCheck struct {
	CheckID                string
	Name                   string
	TTL                    string
	Timeout                string `json:",omitempty"`
	Status                 string `json:",omitempty"`
	Notes                  string `json:",omitempty"`
	SuccessBeforePassing   int    `json:",omitempty"`
	FailuresBeforeCritical int    `json:",omitempty"`
	FailuresBeforeWarning  int    `json:",omitempty"`
}

// consulService is one service the client wants in Consul: its
// registration and, for each check, the status and output its task's
// health gives it now and how often Nomad would heartbeat it.
type consulService struct {
	reg    agentServiceRegistration
	checks []consulCheck
}

type consulCheck struct {
	id, status, output string
	every              time.Duration
}

// consulClient is the fake client's Consul service client: one goroutine
// that, whenever the fake's state changes (and when a heartbeat is due,
// or after a failure with Nomad's backoff), registers the services its
// allocations should have in Consul, updates their checks and
// deregisters the rest. Only that goroutine touches regs.
type consulClient struct {
	s    *Server
	base string
	cfg  Consul
	http *http.Client
	kick chan chan struct{} // a sync to run now; closed when it has run
	stop chan struct{}
	done chan struct{}
	regs map[string]*consulRegistered // service ID -> what Consul holds
}

// consulRegistered is what the client last told Consul of one service.
type consulRegistered struct {
	key    string // the registration without check statuses
	checks map[string]*consulSent
}

type consulSent struct {
	status string
	at     time.Time // the last registration or update, which renews the TTL
}

// startConsul starts the service client when the fake has a Consul agent.
func (s *Server) startConsul() *consulClient {
	if s.cfg.Consul == nil || s.cfg.Consul.Address == "" {
		return nil
	}
	base := strings.TrimSuffix(s.cfg.Consul.Address, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	c := &consulClient{
		s: s, base: base, cfg: *s.cfg.Consul, http: &http.Client{Timeout: 10 * time.Second},
		kick: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
		regs: map[string]*consulRegistered{},
	}
	go c.run()
	return c
}

// syncServices brings Consul up to the fake's state now and returns when
// it has: the client calls it before it kills an allocation's tasks, as
// Nomad's group and task service hooks deregister in PreKill.
func (s *Server) syncServices() {
	c := s.consul
	if c == nil {
		return
	}
	ran := make(chan struct{})
	select {
	case c.kick <- ran:
		select {
		case <-ran:
		case <-c.done:
		}
	case <-c.done:
	}
}

// closeConsul deregisters what is left and stops the service client.
func (s *Server) closeConsul() {
	if c := s.consul; c != nil {
		close(c.stop)
		<-c.done
	}
}

func (c *consulClient) run() {
	defer close(c.done)
	backoff := consulRetry
	var ran []chan struct{}
	for {
		c.s.mu.Lock()
		want := c.s.consulServicesLocked()
		changed := c.s.changed
		c.s.mu.Unlock()
		wait, failed := c.sync(want, time.Now())
		for _, r := range ran {
			close(r)
		}
		ran = nil
		if failed {
			wait = min(wait, backoff)
			backoff = min(2*backoff, consulMaxRetry)
		} else {
			backoff = consulRetry
		}
		timer := time.NewTimer(wait)
		select {
		case <-changed:
		case r := <-c.kick:
			ran = append(ran, r)
		case <-timer.C:
		case <-c.stop:
			timer.Stop()
			c.sync(nil, time.Now())
			return
		}
		timer.Stop()
	}
}

// sync makes Consul hold want: it deregisters the services it registered
// that are no longer wanted, registers the new and changed ones (a
// re-registration replaces the checks; Consul keeps the status of a check
// it already has), and updates each check whose status changed or whose
// heartbeat is due. It returns when the next heartbeat is due and whether
// a call failed.
func (c *consulClient) sync(want map[string]*consulService, now time.Time) (time.Duration, bool) {
	next, failed := time.Hour, false
	for id := range c.regs {
		if want[id] != nil {
			continue
		}
		if err := c.put("/v1/agent/service/deregister/"+url.PathEscape(id), nil); err != nil && !isNotFound(err) {
			failed = true
			continue
		}
		delete(c.regs, id)
	}
	for id, w := range want {
		reg := c.regs[id]
		if key := registrationKey(w.reg); reg == nil || reg.key != key {
			path := "/v1/agent/service/register"
			if reg != nil {
				path += "?replace-existing-checks=true"
			}
			if err := c.put(path, w.reg); err != nil {
				failed = true
				continue
			}
			sent := map[string]*consulSent{}
			for i, ch := range w.checks {
				s := &consulSent{status: w.reg.Checks[i].Status, at: now}
				if reg != nil && reg.checks[ch.id] != nil {
					s.status = reg.checks[ch.id].status
				}
				sent[ch.id] = s
			}
			reg = &consulRegistered{key: key, checks: sent}
			c.regs[id] = reg
		}
		for _, ch := range w.checks {
			s := reg.checks[ch.id]
			if s.status != ch.status || now.Sub(s.at) >= ch.every {
				body := struct{ Status, Output string }{ch.status, ch.output}
				err := c.put("/v1/agent/check/update/"+url.PathEscape(ch.id), body)
				if isNotFound(err) {
					// Consul lost it (a restarted agent): register again.
					delete(c.regs, id)
					failed = true
					break
				}
				if err != nil {
					failed = true
					continue
				}
				s.status, s.at = ch.status, now
			}
			next = min(next, ch.every-now.Sub(s.at))
		}
	}
	return max(next, 0), failed
}

// registrationKey is a registration without its checks' statuses: what
// must change for the client to register a service again.
func registrationKey(r agentServiceRegistration) string {
	r.Checks = slices.Clone(r.Checks)
	for i := range r.Checks {
		r.Checks[i].Status = ""
	}
	b, _ := json.Marshal(r)
	return string(b)
}

// consulError is an answer of the agent other than 200.
type consulError struct {
	status int
	body   string
}

func (e *consulError) Error() string {
	return fmt.Sprintf("consul: unexpected response code: %d (%s)", e.status, e.body)
}

func isNotFound(err error) bool {
	e, ok := err.(*consulError)
	return ok && e.status == http.StatusNotFound
}

// put calls the agent with a JSON body (none when body is nil).
func (c *consulClient) put(path string, body any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(http.MethodPut, c.base+path, rd)
	if err != nil {
		return err
	}
	if c.cfg.Token != "" {
		req.Header.Set("X-Consul-Token", c.cfg.Token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return &consulError{status: resp.StatusCode, body: strings.TrimSpace(string(b))}
	}
	return nil
}

// consulServicesLocked is every service of provider consul that the
// allocations should have in Consul now, by service ID, as Nomad's client
// decides it: a group's services from the moment its allocation runs
// (the group service hook's Prerun) until it is told to stop (PreKill) or
// ends (Postrun); a task's services while the task runs (Poststart to
// Exited). Held allocations never run, so they register nothing. Callers
// hold s.mu.
func (s *Server) consulServicesLocked() map[string]*consulService {
	out := map[string]*consulService{}
	if s.cfg.Hold {
		return out
	}
	for _, a := range s.allocs {
		if a.desired != "run" || a.client == api.AllocClientStatusFailed || a.client == api.AllocClientStatusComplete ||
			a.client == api.AllocClientStatusLost {
			continue
		}
		for _, svc := range a.tg.Services {
			if cs := a.consulServiceLocked(svc, nil); cs != nil {
				out[cs.reg.ID] = cs
			}
		}
		for _, t := range a.tg.Tasks {
			if ts := a.tasks[t.Name]; ts == nil || ts.State != "running" {
				continue
			}
			for _, svc := range t.Services {
				if cs := a.consulServiceLocked(svc, t); cs != nil {
					out[cs.reg.ID] = cs
				}
			}
		}
	}
	return out
}

// consulServiceLocked is the registration of one service of the
// allocation (a group's when task is nil), as Nomad's service client
// builds it (serviceRegs, checkRegs): the name, tags and meta
// interpolated with the task's environment, meta["external-source"] =
// "nomad", the address and port of the service's port label, and each
// check as a TTL check whose status is its task's health. It is nil for a
// service of another provider and for one whose port label the allocation
// does not have (Nomad fails the hook there). Callers hold s.mu.
func (a *alloc) consulServiceLocked(svc *api.Service, task *api.Task) *consulService {
	if svc.Provider != "" && svc.Provider != api.ServiceProviderConsul {
		return nil
	}
	workload := "group-" + a.group
	envTask := a.tg.Tasks[0]
	name := fmt.Sprintf("%s-%s", *a.job.Name, a.group)
	if task != nil {
		workload, envTask = task.Name, task
		name = fmt.Sprintf("%s-%s-%s", *a.job.Name, a.group, task.Name)
	}
	allocDir := filepath.Join(a.s.cfg.DataDir, "allocs", a.id)
	env := a.env(envTask, allocDir, filepath.Join(allocDir, envTask.Name))
	if svc.Name != "" {
		name = interpolate(svc.Name, env)
	}
	address, port, ok := a.serviceAddress(svc.Address, svc.PortLabel)
	if !ok {
		return nil
	}
	id := fmt.Sprintf("%s%s-%s-%s-%s", nomadTaskPrefix, a.id, workload, name, svc.PortLabel)
	meta := map[string]string{}
	for k, v := range svc.Meta {
		meta[k] = interpolate(v, env)
	}
	meta["external-source"] = "nomad"
	var tags []string
	for _, t := range svc.Tags {
		tags = append(tags, interpolate(t, env))
	}
	cs := &consulService{reg: agentServiceRegistration{
		ID: id, Name: name, Tags: tags, Port: port, Address: address,
		EnableTagOverride: svc.EnableTagOverride, Meta: meta, Checks: []agentServiceCheck{},
	}}
	for _, chk := range svc.Checks {
		checkTask := envTask.Name
		if chk.TaskName != "" {
			checkTask = chk.TaskName
		} else if svc.TaskName != "" {
			checkTask = svc.TaskName
		}
		every := chk.Interval
		if every <= 0 {
			every = 10 * time.Second
		}
		chkName := chk.Name
		if chkName == "" {
			chkName = fmt.Sprintf("service: %q check", name)
		}
		status, output := a.checkStatusLocked(checkTask, chk.Type, chk.InitialStatus)
		checkID := nomadCheckPrefix + checkHash(id, chk, chkName, svc.OnUpdate)
		cs.reg.Checks = append(cs.reg.Checks, agentServiceCheck{
			CheckID: checkID, Name: chkName, TTL: (every + ttlCheckBuffer).String(), Timeout: chk.Timeout.String(),
			Status: status, Notes: chk.Notes, SuccessBeforePassing: chk.SuccessBeforePassing,
			FailuresBeforeCritical: chk.FailuresBeforeCritical, FailuresBeforeWarning: chk.FailuresBeforeWarning,
		})
		cs.checks = append(cs.checks, consulCheck{id: checkID, status: status, output: output, every: every})
	}
	return cs
}

// serviceAddress is serviceregistration.GetAddress for the auto and host
// address modes on the fake's one host network: a custom address with the
// port label's port, else the port label's host IP and port; a numeric
// label is a port of the agent's address; no label is no port.
func (a *alloc) serviceAddress(custom, label string) (string, int, bool) {
	if label == "" {
		if custom == "" && len(a.ports) > 0 {
			return a.ports[0].HostIP, 0, true
		}
		return custom, 0, true
	}
	for _, p := range a.ports {
		if p.Label == label {
			if custom != "" {
				return custom, p.Value, true
			}
			return p.HostIP, p.Value, true
		}
	}
	if n, err := strconv.Atoi(label); err == nil && n > 0 {
		return custom, n, true
	}
	return "", 0, false
}

// checkStatusLocked is the Consul status of a check of the task, from the
// health the fake's runtime measures for it (its group's first check):
// passing while it passes; before the task was ever checked, the check's
// initial_status (Consul's default, critical, without one); critical
// otherwise. Callers hold s.mu.
func (a *alloc) checkStatusLocked(task, typ, initial string) (status, output string) {
	got, seen := a.checks[task]
	switch {
	case got == "success":
		return consulPassing, fmt.Sprintf("fakenomad: %s check of task %q passes", typ, task)
	case !seen && initial != "":
		return initial, ""
	case !seen:
		return consulCritical, ""
	default:
		return consulCritical, fmt.Sprintf("fakenomad: %s check of task %q fails (%s)", typ, task, got)
	}
}

// checkHash is Nomad's structs.(*ServiceCheck).Hash of the canonicalized
// check (its default name, and on_update inherited from the service, else
// require_healthy), which makes the check's ID in Consul.
func checkHash(serviceID string, c api.ServiceCheck, name, serviceOnUpdate string) string {
	onUpdate := c.OnUpdate
	if onUpdate == "" {
		onUpdate = serviceOnUpdate
	}
	if onUpdate == "" {
		onUpdate = api.OnUpdateRequireHealthy
	}
	h := sha256.New()
	for _, s := range []string{serviceID, name, c.Type, c.Command, strings.Join(c.Args, ""), c.Path, c.Protocol,
		c.PortLabel, c.Interval.String(), c.Timeout.String(), c.Method, c.Body, onUpdate, c.Notes} {
		_, _ = io.WriteString(h, s)
	}
	if c.TLSSkipVerify {
		_, _ = io.WriteString(h, "true")
	}
	// TLSServerName, AddressMode and GRPCService count only when set;
	// writing an empty string adds nothing.
	_, _ = io.WriteString(h, c.TLSServerName)
	if len(c.Header) > 0 {
		var headers []string
		for k, v := range c.Header {
			headers = append(headers, k+strings.Join(v, ""))
		}
		slices.Sort(headers)
		_, _ = io.WriteString(h, strings.Join(headers, ""))
	}
	_, _ = io.WriteString(h, c.AddressMode)
	_, _ = io.WriteString(h, c.GRPCService)
	if c.GRPCUseTLS {
		_, _ = io.WriteString(h, "true")
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"success", c.SuccessBeforePassing}, {"failures", c.FailuresBeforeCritical}, {"failures-before-warning", c.FailuresBeforeWarning}} {
		if n.v != 0 {
			_, _ = fmt.Fprintf(h, "%s:%d", n.name, n.v)
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}
