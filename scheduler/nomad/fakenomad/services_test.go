package fakenomad

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/edge/consul/fakeconsul"
)

// helperTaskEnv makes the test binary a task: TestHelperTask serves
// GET /health on $NOMAD_PORT_http (200, or 500 after GET /fail until GET
// /recover).
const helperTaskEnv = "FAKENOMAD_HELPER_TASK"

func TestHelperTask(t *testing.T) {
	if os.Getenv(helperTaskEnv) != "serve" {
		return
	}
	var failing atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { failing.Store(true) })
	mux.HandleFunc("/recover", func(w http.ResponseWriter, r *http.Request) { failing.Store(false) })
	_ = http.ListenAndServe(":"+os.Getenv("NOMAD_PORT_http"), mux)
	os.Exit(1)
}

// serviceJob is a job of one group that runs the helper task, with a
// group service in Consul (an http check on the group's port), a task
// service in Consul and a group service in Nomad's own catalog.
func serviceJob(id string) *api.Job {
	job := testJob(id)
	tg := job.TaskGroups[0]
	tg.Networks = []*api.NetworkResource{{DynamicPorts: []api.Port{{Label: "http"}}}}
	tg.Services = []*api.Service{
		{Name: "web-svc", Provider: "consul", PortLabel: "http", Tags: []string{"svc", "alloc-${NOMAD_ALLOC_INDEX}"},
			Meta:   map[string]string{"app_id": "app_1", "job": "${NOMAD_JOB_ID}"},
			Checks: []api.ServiceCheck{{Name: "health", Type: "http", Path: "/health", Interval: 200 * time.Millisecond, Timeout: time.Second}}},
		{Name: "web-native", Provider: "nomad", PortLabel: "http"},
	}
	task := tg.Tasks[0]
	task.Config = map[string]any{"command": os.Args[0], "args": []any{"-test.run=^TestHelperTask$"}}
	task.Env = map[string]string{helperTaskEnv: "serve"}
	task.Services = []*api.Service{{Name: "web-task", PortLabel: "http"}}
	return job
}

// consulEntry is what the tests read of /v1/health/service/<name>.
type consulEntry struct {
	Service struct {
		ID, Service, Address string
		Port                 int
		Tags                 []string
		Meta                 map[string]string
	}
	Checks []struct{ CheckID, Name, Status, Output, Type string }
}

// check returns the entry's check of the service (after serfHealth).
func (e consulEntry) check(t *testing.T) (id, name, status, output, typ string) {
	t.Helper()
	if len(e.Checks) != 2 {
		t.Fatalf("%s has checks %+v, want serfHealth and one of its own", e.Service.ID, e.Checks)
	}
	c := e.Checks[1]
	return c.CheckID, c.Name, c.Status, c.Output, c.Type
}

// waitConsul reads a service's health from Consul with blocking queries
// until until says what it reads will do, and returns that.
func waitConsul(t *testing.T, c *fakeconsul.Server, name string, until func([]consulEntry) bool) []consulEntry {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var index uint64
	for {
		resp, err := http.Get(fmt.Sprintf("%s/v1/health/service/%s?index=%d&wait=10s", c.URL(), name, index))
		if err != nil {
			t.Fatal(err)
		}
		var es []consulEntry
		err = json.NewDecoder(resp.Body).Decode(&es)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if until(es) {
			return es
		}
		if time.Now().After(deadline) {
			t.Fatalf("Consul's %s is still %+v after a minute", name, es)
		}
		index, _ = strconv.ParseUint(resp.Header.Get("X-Consul-Index"), 10, 64)
	}
}

func withStatus(status string) func([]consulEntry) bool {
	return func(es []consulEntry) bool {
		return len(es) == 1 && len(es[0].Checks) == 2 && es[0].Checks[1].Status == status
	}
}

func gone(es []consulEntry) bool { return len(es) == 0 }

// TestConsulServices: the fake's client registers a running allocation's
// consul services in Consul as Nomad's does (ID, address and port of the
// port label, tags and meta interpolated, meta external-source, one TTL
// check per check with Nomad's check ID), keeps the check's status with
// the task's health, leaves provider nomad services out, and deregisters
// when the job is deregistered.
func TestConsulServices(t *testing.T) {
	c := fakeconsul.New()
	defer c.Close()
	_, client := startFake(t, Config{Consul: &Consul{Address: c.URL()}, Drivers: []string{"raw_exec"}})
	if _, _, err := client.Jobs().Register(serviceJob("web"), nil); err != nil {
		t.Fatal(err)
	}
	e := waitConsul(t, c, "web-svc", withStatus("passing"))[0]
	allocs, _, err := client.Jobs().Allocations("web", false, nil)
	if err != nil || len(allocs) != 1 {
		t.Fatalf("allocations: %d, %v", len(allocs), err)
	}
	alloc, _, err := client.Allocations().Info(allocs[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	port := alloc.AllocatedResources.Shared.Ports[0].Value

	wantID := "_nomad-task-" + alloc.ID + "-group-web-web-svc-http"
	if e.Service.ID != wantID || e.Service.Address != "127.0.0.1" || e.Service.Port != port {
		t.Errorf("service %s at %s:%d, want %s at 127.0.0.1:%d", e.Service.ID, e.Service.Address, e.Service.Port, wantID, port)
	}
	if diff := cmp.Diff([]string{"svc", "alloc-0"}, e.Service.Tags); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"app_id": "app_1", "job": "web", "external-source": "nomad"}, e.Service.Meta); diff != "" {
		t.Errorf("meta (-want +got):\n%s", diff)
	}
	id, name, _, output, typ := e.check(t)
	if !regexp.MustCompile(`^_nomad-check-[0-9a-f]{64}$`).MatchString(id) || name != "health" || typ != "ttl" || output == "" {
		t.Errorf("check %q %q (%s) output %q, want Nomad's check ID, the check's name, a TTL check with output", id, name, typ, output)
	}
	// The task's service is registered while the task runs; the nomad one
	// is not Consul's.
	if te := waitConsul(t, c, "web-task", func(es []consulEntry) bool { return len(es) == 1 }); te[0].Service.ID != "_nomad-task-"+alloc.ID+"-web-web-task-http" {
		t.Errorf("task service ID %s", te[0].Service.ID)
	}
	if es := waitConsul(t, c, "web-native", func([]consulEntry) bool { return true }); len(es) != 0 {
		t.Errorf("the provider nomad service is in Consul: %+v", es)
	}

	// The check follows the task's health.
	get := func(path string) {
		t.Helper()
		resp, err := http.Get("http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get("/fail")
	waitConsul(t, c, "web-svc", withStatus("critical"))
	get("/recover")
	waitConsul(t, c, "web-svc", withStatus("passing"))

	// Deregistering the job stops the allocation and deregisters first.
	if _, _, err := client.Jobs().Deregister("web", false, nil); err != nil {
		t.Fatal(err)
	}
	waitConsul(t, c, "web-svc", gone)
	waitConsul(t, c, "web-task", gone)
}

// TestConsulServicesGoOnClose: closing the fake stops every allocation,
// and their services leave Consul before Close returns.
func TestConsulServicesGoOnClose(t *testing.T) {
	c := fakeconsul.New()
	defer c.Close()
	s, client := startFake(t, Config{Consul: &Consul{Address: c.URL()}, Drivers: []string{"raw_exec"}})
	if _, _, err := client.Jobs().Register(serviceJob("web"), nil); err != nil {
		t.Fatal(err)
	}
	waitConsul(t, c, "web-svc", withStatus("passing"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web-svc", "web-task"} {
		if es := waitConsul(t, c, name, func([]consulEntry) bool { return true }); len(es) != 0 {
			t.Errorf("%s is still in Consul after Close: %+v", name, es)
		}
	}
}

// TestConsulServicesHeldRegisterNothing: an allocation that is placed but
// never run has nothing in Consul.
func TestConsulServicesHeldRegisterNothing(t *testing.T) {
	c := fakeconsul.New()
	defer c.Close()
	s, client := startFake(t, Config{Hold: true, Consul: &Consul{Address: c.URL()}})
	if _, _, err := client.Jobs().Register(serviceJob("web"), nil); err != nil {
		t.Fatal(err)
	}
	s.syncServices()
	if es := waitConsul(t, c, "web-svc", func([]consulEntry) bool { return true }); len(es) != 0 {
		t.Errorf("a held allocation registered %+v", es)
	}
}

func TestServiceAddress(t *testing.T) {
	a := &alloc{ports: []api.PortMapping{{Label: "http", Value: 23456, HostIP: "127.0.0.1"}}}
	for _, tc := range []struct {
		custom, label string
		addr          string
		port          int
		ok            bool
	}{
		{"", "http", "127.0.0.1", 23456, true},
		{"10.0.0.9", "http", "10.0.0.9", 23456, true},
		{"", "8080", "", 8080, true},
		{"", "", "127.0.0.1", 0, true},
		{"", "grpc", "", 0, false},
	} {
		addr, port, ok := a.serviceAddress(tc.custom, tc.label)
		if addr != tc.addr || port != tc.port || ok != tc.ok {
			t.Errorf("serviceAddress(%q, %q) = %q, %d, %v; want %q, %d, %v", tc.custom, tc.label, addr, port, ok, tc.addr, tc.port, tc.ok)
		}
	}
}
