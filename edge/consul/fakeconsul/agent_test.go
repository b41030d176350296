package fakeconsul

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/consul/api"
)

// agentClient is Consul's own client on the fake's agent API.
func agentClient(t *testing.T, s *Server, token string) *api.Agent {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: s.URL(), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return c.Agent()
}

// statusOf is the HTTP status of an error of Consul's client (0: none).
func statusOf(err error) int {
	var se api.StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	if err != nil {
		return -1
	}
	return 0
}

// checkView is what a test compares of a health check.
type checkView struct {
	ID, Name, Status, Output, Type string
}

func checksOf(e *api.ServiceEntry) []checkView {
	var out []checkView
	for _, c := range e.Checks {
		out = append(out, checkView{c.CheckID, c.Name, c.Status, c.Output, c.Type})
	}
	return out
}

func TestAgentRegistrationReachesBlockedHealthQueries(t *testing.T) {
	s := New()
	defer s.Close()
	agent := agentClient(t, s, "")
	first := get(s, "/v1/health/service/web", params("passing", "1"), "")
	cat := get(s, "/v1/catalog/services", nil, "")

	got := getAsync(s, "/v1/health/service/web", params("index", strconv.FormatUint(first.index, 10), "wait", "1m"), "")
	catGot := getAsync(s, "/v1/catalog/services", params("index", strconv.FormatUint(cat.index, 10), "wait", "1m"), "")
	waitBlocked(t, s, 2)
	reg := &api.AgentServiceRegistration{
		ID: "_nomad-task-a1-group-web-web-http", Name: "web", Tags: []string{"svc", "svc-primary"},
		Address: "127.0.0.1", Port: 23456, Meta: map[string]string{"app_id": "app_1", "external-source": "nomad"},
		Checks: api.AgentServiceChecks{{CheckID: "_nomad-check-abc", Name: "health", TTL: "41s", Timeout: "2s"}},
	}
	if err := agent.ServiceRegister(reg); err != nil {
		t.Fatalf("register: %v", err)
	}
	a := <-got
	es := entries(t, a)
	if len(es) != 1 || a.index <= first.index {
		t.Fatalf("after the registration: %d entries at index %d, want 1 above %d", len(es), a.index, first.index)
	}
	e := es[0]
	if e.Service.ID != reg.ID || e.Service.Address != "127.0.0.1" || e.Service.Port != 23456 ||
		!cmp.Equal(e.Service.Tags, reg.Tags) || !cmp.Equal(e.Service.Meta, reg.Meta) {
		t.Errorf("service = %+v, want the registration's ID, address, port, tags and meta", e.Service)
	}
	want := []checkView{{"serfHealth", "Serf Health Status", Passing, "", ""}, {"_nomad-check-abc", "health", Critical, "", "ttl"}}
	if diff := cmp.Diff(want, checksOf(e)); diff != "" {
		t.Errorf("checks (-want +got):\n%s", diff)
	}
	if c := <-catGot; c.index <= cat.index {
		t.Errorf("catalog index %d after a registration, want more than %d", c.index, cat.index)
	}
	// A critical check is not passing.
	if es := entries(t, get(s, "/v1/health/service/web", params("passing", "1"), "")); len(es) != 0 {
		t.Errorf("%d passing instances while the check is critical, want 0", len(es))
	}

	passing := getAsync(s, "/v1/health/service/web", params("passing", "1", "index", strconv.FormatUint(a.index, 10), "wait", "1m"), "")
	waitBlocked(t, s, 1)
	if err := agent.UpdateTTL("_nomad-check-abc", "tcp ok", api.HealthPassing); err != nil {
		t.Fatalf("update: %v", err)
	}
	p := <-passing
	if es := entries(t, p); len(es) != 1 || es[0].Checks[1].Output != "tcp ok" {
		t.Fatalf("after the check passed: %d passing entries (%+v)", len(es), es)
	}

	// The check fails: the passing query that waits on the index drops it.
	gone := getAsync(s, "/v1/health/service/web", params("passing", "1", "index", strconv.FormatUint(p.index, 10), "wait", "1m"), "")
	waitBlocked(t, s, 1)
	if err := agent.UpdateTTL("_nomad-check-abc", "refused", api.HealthCritical); err != nil {
		t.Fatalf("update: %v", err)
	}
	if es := entries(t, <-gone); len(es) != 0 {
		t.Errorf("after the check failed: %d passing entries, want 0", len(es))
	}

	// Deregistration wakes a catalog query and removes the instance.
	cat = get(s, "/v1/catalog/services", nil, "")
	catGot = getAsync(s, "/v1/catalog/services", params("index", strconv.FormatUint(cat.index, 10), "wait", "1m"), "")
	waitBlocked(t, s, 1)
	if err := agent.ServiceDeregister(reg.ID); err != nil {
		t.Fatalf("deregister: %v", err)
	}
	if c := <-catGot; c.index <= cat.index {
		t.Errorf("catalog index %d after a deregistration, want more than %d", c.index, cat.index)
	}
	if es := entries(t, get(s, "/v1/health/service/web", nil, "")); len(es) != 0 {
		t.Errorf("after the deregistration: %d entries", len(es))
	}
	if err := agent.UpdateTTL("_nomad-check-abc", "", api.HealthPassing); statusOf(err) != http.StatusNotFound {
		t.Errorf("update of a deregistered service's check: %v, want 404", err)
	}
}

func TestAgentRegistrationDefaultsAndReregistration(t *testing.T) {
	s := New()
	defer s.Close()
	agent := agentClient(t, s, "")
	health := func() *api.ServiceEntry {
		t.Helper()
		es := entries(t, get(s, "/v1/health/service/db", nil, ""))
		if len(es) != 1 {
			t.Fatalf("%d instances of db, want 1", len(es))
		}
		return es[0]
	}
	// No ID: the name. No check IDs or names: the agent's. Status given.
	err := agent.ServiceRegister(&api.AgentServiceRegistration{Name: "db", Port: 5432, Checks: api.AgentServiceChecks{
		{TTL: "1m"}, {TTL: "1m", Status: api.HealthWarning, Name: "replication"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e := health()
	want := []checkView{{"serfHealth", "Serf Health Status", Passing, "", ""},
		{"service:db:1", "Service 'db' check", Critical, "", "ttl"}, {"service:db:2", "replication", Warning, "", "ttl"}}
	if e.Service.ID != "db" {
		t.Errorf("service ID %q, want the name", e.Service.ID)
	}
	if diff := cmp.Diff(want, checksOf(e)); diff != "" {
		t.Errorf("checks (-want +got):\n%s", diff)
	}

	// A re-registration keeps a check's status and output, even over a
	// status it gives; without replace-existing-checks the other checks
	// stay.
	if err := agent.UpdateTTL("service:db:1", "up", api.HealthPassing); err != nil {
		t.Fatal(err)
	}
	err = agent.ServiceRegister(&api.AgentServiceRegistration{ID: "db", Name: "db", Port: 5433, Checks: api.AgentServiceChecks{
		{CheckID: "service:db:1", TTL: "1m", Status: api.HealthCritical},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e = health()
	want = []checkView{{"serfHealth", "Serf Health Status", Passing, "", ""},
		{"service:db:1", "Service 'db' check", Passing, "up", "ttl"}, {"service:db:2", "replication", Warning, "", "ttl"}}
	if diff := cmp.Diff(want, checksOf(e)); diff != "" || e.Service.Port != 5433 {
		t.Errorf("after a re-registration, port %d, checks (-want +got):\n%s", e.Service.Port, diff)
	}

	// With replace-existing-checks, the checks it does not name go.
	err = agent.ServiceRegisterOpts(&api.AgentServiceRegistration{ID: "db", Name: "db", Port: 5433, Checks: api.AgentServiceChecks{
		{CheckID: "service:db:1", TTL: "1m"},
	}}, api.ServiceRegisterOpts{ReplaceExistingChecks: true})
	if err != nil {
		t.Fatal(err)
	}
	want = []checkView{{"serfHealth", "Serf Health Status", Passing, "", ""}, {"service:db:1", "Service 'db' check", Passing, "up", "ttl"}}
	if diff := cmp.Diff(want, checksOf(health())); diff != "" {
		t.Errorf("after replace-existing-checks (-want +got):\n%s", diff)
	}

	// An output alone is kept without a sync: the index does not move.
	before := get(s, "/v1/health/service/db", nil, "")
	if err := agent.UpdateTTL("service:db:1", "still up", api.HealthPassing); err != nil {
		t.Fatal(err)
	}
	after := get(s, "/v1/health/service/db", nil, "")
	if after.index != before.index {
		t.Errorf("an output-only update moved the index from %d to %d", before.index, after.index)
	}
	if out := entries(t, after)[0].Checks[1].Output; out != "still up" {
		t.Errorf("output %q after the update, want %q", out, "still up")
	}
}

func TestAgentTTLExpires(t *testing.T) {
	s := New()
	defer s.Close()
	agent := agentClient(t, s, "")
	err := agent.ServiceRegister(&api.AgentServiceRegistration{Name: "cron", Port: 1,
		Check: &api.AgentServiceCheck{CheckID: "cron-ttl", TTL: "50ms", Status: api.HealthPassing}})
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.UpdateTTL("cron-ttl", "alive", api.HealthPassing); err != nil {
		t.Fatal(err)
	}
	// No further update: the agent turns the check critical when its TTL
	// runs out, and the change wakes the health query.
	a := get(s, "/v1/health/service/cron", nil, "")
	for {
		es := entries(t, a)
		if c := es[0].Checks[1]; c.Status == Critical {
			if want := "TTL expired (last output before timeout follows): alive"; c.Output != want {
				t.Errorf("output %q, want %q", c.Output, want)
			}
			break
		}
		a = get(s, "/v1/health/service/cron", params("index", strconv.FormatUint(a.index, 10), "wait", "1m"), "")
	}
	// An update revives it.
	if err := agent.UpdateTTL("cron-ttl", "back", api.HealthPassing); err != nil {
		t.Fatal(err)
	}
	if es := entries(t, get(s, "/v1/health/service/cron", params("passing", ""), "")); len(es) != 1 {
		t.Errorf("after the update: %d passing instances, want 1", len(es))
	}
}

func TestAgentRefusals(t *testing.T) {
	s := New()
	defer s.Close()
	s.Register(Instance{ID: "web-1", Name: "web", Port: 8080})
	put := func(path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPut, s.URL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	for _, tc := range []struct {
		name, path, body string
		status           int
		reason           string
	}{
		{"no name", agentServiceRegister, `{"Port":1}`, 400, "Missing service name"},
		{"any address", agentServiceRegister, `{"Name":"x","Address":"0.0.0.0"}`, 400, "Invalid service address"},
		{"not JSON", agentServiceRegister, `{`, 400, "Request decode failed: unexpected EOF"},
		{"no TTL", agentServiceRegister, `{"Name":"x","Checks":[{"Name":"c"}]}`, 400, "Invalid check: TTL must be > 0 for TTL checks"},
		{"TTL and interval", agentServiceRegister, `{"Name":"x","Check":{"TTL":"10s","Interval":"5s"}}`, 400,
			"Invalid check: Interval and TTL cannot both be specified"},
		{"a TCP check", agentServiceRegister, `{"Name":"x","Check":{"TCP":"127.0.0.1:1","Interval":"5s"}}`, 400,
			"Invalid check: fakeconsul runs no script, HTTP, TCP, UDP, gRPC or H2PING checks; register a TTL check and update it"},
		{"bad check status", agentServiceRegister, `{"Name":"x","Check":{"TTL":"10s","Status":"fine"}}`, 400,
			"Status for checks must 'passing', 'warning', 'critical'"},
		{"unknown service", agentServiceDeregister + "nope", ``, 404,
			`Unknown service ID "nope". Ensure that the service ID is passed, not the service name.`},
		{"unknown check", agentCheckUpdate + "nope", `{"Status":"passing"}`, 404,
			`Unknown check ID "nope". Ensure that the check ID is passed, not the check name.`},
		{"bad update status", agentCheckUpdate + "service:web-1", `{"Status":"ok"}`, 400, "Invalid check status: 'ok'"},
		{"not a TTL check", agentCheckUpdate + "service:web-1", `{"Status":"critical"}`, 500,
			`CheckID "service:web-1" does not have associated TTL`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, reason := put(tc.path, tc.body)
			if status != tc.status || reason != tc.reason {
				t.Errorf("PUT %s %s: %d %q, want %d %q", tc.path, tc.body, status, reason, tc.status, tc.reason)
			}
		})
	}
	if es := entries(t, get(s, "/v1/health/service/x", nil, "")); len(es) != 0 {
		t.Errorf("a refused registration registered %d instances", len(es))
	}
	resp, err := http.Post(s.URL()+agentServiceRegister, "application/json", strings.NewReader(`{"Name":"x","Port":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "OPTIONS,PUT" {
		t.Errorf("POST register: %d (Allow %q), want 405 (Allow %q)", resp.StatusCode, resp.Header.Get("Allow"), "OPTIONS,PUT")
	}
	if status, _ := put("/v1/agent/nothing", ``); status != http.StatusNotFound {
		t.Errorf("PUT an agent path Consul has not: %d, want 404", status)
	}
	s.FailWith(http.StatusInternalServerError)
	if status, _ := put(agentServiceRegister, `{"Name":"x","Port":1}`); status != http.StatusInternalServerError {
		t.Errorf("register while Consul fails: %d, want 500", status)
	}
}

func TestAgentACL(t *testing.T) {
	s := New()
	defer s.Close()
	s.EnableACL("root")
	reg := &api.AgentServiceRegistration{Name: "web", Port: 80, Check: &api.AgentServiceCheck{CheckID: "web-ttl", TTL: "1m"}}
	for _, tc := range []struct {
		token  string
		status int
	}{
		{"", http.StatusForbidden},
		{"wrong", http.StatusForbidden},
		{"root", 0},
	} {
		if err := agentClient(t, s, tc.token).ServiceRegister(reg); statusOf(err) != tc.status {
			t.Errorf("register with token %q: %v, want status %d", tc.token, err, tc.status)
		}
	}
	if err := agentClient(t, s, "").UpdateTTL("web-ttl", "", api.HealthPassing); statusOf(err) != http.StatusForbidden {
		t.Errorf("update without a token: %v, want 403", err)
	}
	if err := agentClient(t, s, "wrong").ServiceDeregister("web"); statusOf(err) != http.StatusForbidden {
		t.Errorf("deregister with an unknown token: %v, want 403", err)
	}
	if err := agentClient(t, s, "root").ServiceDeregister("web"); err != nil {
		t.Errorf("deregister with the management token: %v", err)
	}
}
