package nomad

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
)

func TestPlanRefusal(t *testing.T) {
	tests := []struct {
		name   string
		failed map[string]*api.AllocationMetric
		want   errcode.Code
	}{
		{"placed", nil, ""},
		{"memory exhausted", map[string]*api.AllocationMetric{"web": {NodesEvaluated: 3, NodesExhausted: 3, DimensionExhausted: map[string]int{"memory": 3}}}, errcode.CapacityOversubscribe},
		{"quota", map[string]*api.AllocationMetric{"web": {NodesEvaluated: 1, QuotaExhausted: []string{"cpu exhausted"}}}, errcode.CapacityOversubscribe},
		{"port collision", map[string]*api.AllocationMetric{"web": {NodesEvaluated: 1, DimensionExhausted: map[string]int{"network: reserved port collision http=8080": 1}}}, errcode.CapacityOversubscribe},
		{"missing driver", map[string]*api.AllocationMetric{"web": {NodesEvaluated: 2, NodesFiltered: 2, ConstraintFiltered: map[string]int{"missing drivers": 2}}}, errcode.AdapterFailed},
		{"no node in datacenters", map[string]*api.AllocationMetric{"web": {NodesEvaluated: 0}}, errcode.AdapterFailed},
		{"nil metric", map[string]*api.AllocationMetric{"web": nil}, errcode.AdapterFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := planRefusal("job-x", tt.failed)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("planRefusal = %v, want nil", err)
				}
				return
			}
			if got := errcode.CodeOf(err); got != tt.want {
				t.Fatalf("planRefusal = %v (%s), want %s", err, got, tt.want)
			}
			if e, _ := errcode.As(err); e.Details["workload"] != "web" {
				t.Errorf("details = %v, want the workload", e.Details)
			}
		})
	}
}

func terminated(code int) *api.TaskEvent {
	return &api.TaskEvent{Type: api.TaskTerminated, Details: map[string]string{"exit_code": fmt.Sprint(code)}}
}

func TestReadinessOf(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name  string
		alloc api.AllocationListStub
		want  readiness
		code  int
	}{
		{"pending", api.AllocationListStub{ClientStatus: "pending", TaskStates: map[string]*api.TaskState{"web": {State: "pending"}}}, starting, 0},
		{"running, health unknown", api.AllocationListStub{ClientStatus: "running", TaskStates: map[string]*api.TaskState{"web": {State: "running"}}}, starting, 0},
		{"healthy", api.AllocationListStub{ClientStatus: "running", TaskStates: map[string]*api.TaskState{"web": {State: "running"}},
			DeploymentStatus: &api.AllocDeploymentStatus{Healthy: &yes}}, ready, 0},
		{"healthy but restarting", api.AllocationListStub{ClientStatus: "running", TaskStates: map[string]*api.TaskState{"web": {State: "pending"}},
			DeploymentStatus: &api.AllocDeploymentStatus{Healthy: &yes}}, starting, 0},
		{"unhealthy", api.AllocationListStub{ClientStatus: "running", TaskStates: map[string]*api.TaskState{"web": {State: "running"}},
			DeploymentStatus: &api.AllocDeploymentStatus{Healthy: &no}}, unhealthy, 0},
		{"exited before healthy", api.AllocationListStub{ClientStatus: "running", TaskStates: map[string]*api.TaskState{"web": {State: "pending",
			Events: []*api.TaskEvent{{Type: api.TaskStarted}, terminated(7), {Type: api.TaskRestarting}}}}}, exited, 7},
		{"exit code in the old field", api.AllocationListStub{ClientStatus: "running", TaskStates: map[string]*api.TaskState{"web": {State: "pending",
			Events: []*api.TaskEvent{{Type: api.TaskTerminated, ExitCode: 3}}}}}, exited, 3},
		{"artifact failed", api.AllocationListStub{ClientStatus: "failed", TaskStates: map[string]*api.TaskState{"web": {State: "dead", Failed: true,
			Events: []*api.TaskEvent{{Type: api.TaskArtifactDownloadFailed, FailsTask: true}}}}}, failedSetup, 0},
		{"task named otherwise", api.AllocationListStub{ClientStatus: "running", TaskStates: map[string]*api.TaskState{"main": {State: "running"}},
			DeploymentStatus: &api.AllocDeploymentStatus{Healthy: &yes}}, ready, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, code, _ := readinessOf(&tt.alloc, "web")
			if got != tt.want || code != tt.code {
				t.Errorf("readinessOf = %d (code %d), want %d (code %d)", got, code, tt.want, tt.code)
			}
		})
	}
}

func TestWorkloadStatus(t *testing.T) {
	yes := true
	ports := &api.AllocatedResources{Shared: api.AllocatedSharedResources{Ports: []api.PortMapping{{Label: "http", Value: 23456, HostIP: "10.0.0.5"}}}}
	code3, code4 := 3, 4
	tests := []struct {
		name   string
		alloc  api.Allocation
		checks api.AllocCheckStatuses
		want   scheduler.WorkloadStatus
	}{
		{"running and passing", api.Allocation{ClientStatus: "running", AllocatedResources: ports,
			TaskStates: map[string]*api.TaskState{"web": {State: "running"}}},
			api.AllocCheckStatuses{"a": {Status: "success"}},
			scheduler.WorkloadStatus{Running: true, Health: scheduler.HealthPassing, Address: "10.0.0.5:23456"}},
		{"a check failing", api.Allocation{ClientStatus: "running", AllocatedResources: ports,
			TaskStates: map[string]*api.TaskState{"web": {State: "running"}}},
			api.AllocCheckStatuses{"a": {Status: "success"}, "b": {Status: "failure"}},
			scheduler.WorkloadStatus{Running: true, Health: scheduler.HealthFailing, Address: "10.0.0.5:23456"}},
		{"restarted after exit 3, no checks: deployment health", api.Allocation{ClientStatus: "running", AllocatedResources: ports,
			DeploymentStatus: &api.AllocDeploymentStatus{Healthy: &yes},
			TaskStates:       map[string]*api.TaskState{"web": {State: "running", Restarts: 1, Events: []*api.TaskEvent{terminated(3), {Type: api.TaskRestarting}}}}},
			nil,
			scheduler.WorkloadStatus{Running: true, Restarts: 1, ExitCode: &code3, Health: scheduler.HealthPassing, Address: "10.0.0.5:23456"}},
		{"dead after its restart policy", api.Allocation{ClientStatus: "failed", AllocatedResources: ports,
			TaskStates: map[string]*api.TaskState{"web": {State: "dead", Failed: true, Restarts: 2, Events: []*api.TaskEvent{terminated(4), {Type: api.TaskNotRestarting}}}}},
			nil,
			scheduler.WorkloadStatus{Dead: true, Restarts: 2, ExitCode: &code4, Health: scheduler.HealthFailing, Address: "10.0.0.5:23456"}},
		{"stopped", api.Allocation{ClientStatus: "complete", TaskStates: map[string]*api.TaskState{"web": {State: "dead"}}},
			nil,
			scheduler.WorkloadStatus{Health: scheduler.HealthFailing}},
		{"no task state yet", api.Allocation{ClientStatus: "pending"}, nil, scheduler.WorkloadStatus{Health: scheduler.HealthUnknown}},
		{"address from the network block", api.Allocation{ClientStatus: "pending",
			AllocatedResources: &api.AllocatedResources{Shared: api.AllocatedSharedResources{Networks: []*api.NetworkResource{
				{IP: "10.0.0.6", DynamicPorts: []api.Port{{Label: "http", Value: 31000}}}}}}},
			nil, scheduler.WorkloadStatus{Health: scheduler.HealthUnknown, Address: "10.0.0.6:31000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := workloadStatus(&tt.alloc, "web", tt.checks)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("workloadStatus (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTailLines(t *testing.T) {
	tests := []struct {
		in   string
		n    int64
		want []string
	}{
		{"", 10, []string{}},
		{"a\nb\n", 10, []string{"a", "b"}},
		{"first line\nsecond\nthird\n", 13, []string{"second", "third"}},
		{"first line\nsecond\nthird\n", 12, []string{"third"}},
		{"x\nsecond\n", 9, []string{"x", "second"}},
		{"abc\ndef\n", 5, []string{"def"}},
		{"abc\ndef\n", 4, []string{"def"}},
		{"abc\ndef", 3, []string{"def"}},
	}
	for _, tt := range tests {
		if got := tailLines([]byte(tt.in), tt.n); !cmp.Equal(got, tt.want) {
			t.Errorf("tailLines(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestConflict(t *testing.T) {
	tests := []struct {
		expected uint64
		exists   bool
		current  uint64
		want     bool
	}{
		{0, true, 12, true},   // we expected a new job; another writer made it
		{0, false, 0, false},  // a new job that does not exist: not an index problem
		{12, true, 15, true},  // it moved past our index
		{12, true, 12, false}, // our index is still the job's: another failure
		{12, false, 0, true},  // it went away
	}
	for _, tt := range tests {
		if got := conflict(tt.expected, tt.exists, tt.current); got != tt.want {
			t.Errorf("conflict(%d, %v, %d) = %v, want %v", tt.expected, tt.exists, tt.current, got, tt.want)
		}
	}
}

func TestDefaultPrimary(t *testing.T) {
	job := scheduler.Job{Workloads: map[string]scheduler.Task{"db": {}, "web": {}, "worker": {NoPort: true}}}
	if got := defaultPrimary(job, []string{"db", "web", "worker"}); got != "web" {
		t.Errorf("defaultPrimary = %q, want the last serving workload of the order", got)
	}
	if got := defaultPrimary(job, []string{"worker"}); got != "worker" {
		t.Errorf("defaultPrimary of one = %q", got)
	}
}

// TestTranslate: vendor errors become codes by status, never by text.
func TestTranslate(t *testing.T) {
	status := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		// A body that would mislead a text matcher.
		_, _ = w.Write([]byte("job not found: permission denied: Enforcing job modify index"))
	}))
	t.Cleanup(srv.Close)
	r := newTestRuntime(t, srv.URL)
	for _, tt := range []struct {
		status int
		want   errcode.Code
	}{
		{http.StatusForbidden, errcode.AdapterFailed},
		{http.StatusNotFound, errcode.NotFound},
		{http.StatusInternalServerError, errcode.AdapterFailed},
		{http.StatusServiceUnavailable, errcode.AdapterFailed},
		{http.StatusBadRequest, errcode.AdapterFailed},
	} {
		status = tt.status
		_, _, err := r.client.Jobs().Info("x", nil)
		got := r.translate(err, "read job x", "job x")
		e, ok := errcode.As(got)
		if !ok || e.Code != tt.want {
			t.Errorf("status %d: %v, want %s", tt.status, got, tt.want)
			continue
		}
		if tt.status == http.StatusForbidden && e.Remedy == "" {
			t.Errorf("403: no remedy naming the token")
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	down := newTestRuntime(t, "http://"+addr)
	_, _, err = down.client.Jobs().Info("x", nil)
	if got := down.translate(err, "read job x", "job x"); errcode.CodeOf(got) != errcode.AdapterUnavailable {
		t.Errorf("unreachable: %v, want ADAPTER_UNAVAILABLE", got)
	}
	if got := down.translate(errors.New("odd"), "x", "x"); errcode.CodeOf(got) != errcode.AdapterFailed {
		t.Errorf("other: %v, want ADAPTER_FAILED", got)
	}
}

// builderFunc is a function-field fake of scheduler.Builder.
type builderFunc func(ctx context.Context, req scheduler.BuildRequest) (scheduler.Artifact, error)

func (f builderFunc) Build(ctx context.Context, req scheduler.BuildRequest) (scheduler.Artifact, error) {
	return f(ctx, req)
}

var _ scheduler.Builder = builderFunc(nil)

func newTestRuntime(t *testing.T, address string) *Runtime {
	t.Helper()
	arts, err := NewArtifacts(ArtifactsConfig{Dir: t.TempDir(), Key: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Address: address, Builder: builderFunc(nil), Artifacts: arts, ArtifactBaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRedactQueries(t *testing.T) {
	in := `failed to download artifact "https://svc:8443/artifacts/b1.tar.gz?expires=1&sig=abc": bad response code: 403`
	if got := redactQueries(in); strings.Contains(got, "sig=") || !strings.Contains(got, "b1.tar.gz?…") {
		t.Errorf("redactQueries = %q", got)
	}
}
