package fakenomad

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

func startFake(t *testing.T, cfg Config) (*Server, *api.Client) {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c, err := api.NewClient(&api.Config{Address: s.URL(), SecretID: cfg.Token})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func testJob(id string) *api.Job {
	return &api.Job{ID: ptr(id), Datacenters: []string{"*"}, TaskGroups: []*api.TaskGroup{{Name: ptr("web"), Count: ptr(1),
		Tasks: []*api.Task{{Name: "web", Driver: "raw_exec", Config: map[string]any{"command": "sleep", "args": []any{"1000"}}}}}}}
}

func status(err error) int {
	var ure api.UnexpectedResponseError
	if errors.As(err, &ure) {
		return ure.StatusCode()
	}
	return 0
}

// TestEnforceIndex: the fake refuses registrations as Nomad does, with a
// 500 and Nomad's text, in each of Nomad's three cases.
func TestEnforceIndex(t *testing.T) {
	_, c := startFake(t, Config{Hold: true})
	jobs := c.Jobs()
	if _, _, err := jobs.EnforceRegister(testJob("a"), 7, nil); status(err) != 500 || !strings.Contains(err.Error(), "Enforcing job modify index 7: job does not exist") {
		t.Errorf("register a new job with index 7 = %v, want 500 job does not exist", err)
	}
	resp, _, err := jobs.EnforceRegister(testJob("a"), 0, nil)
	if err != nil {
		t.Fatalf("register a new job with index 0: %v", err)
	}
	if _, _, err := jobs.EnforceRegister(testJob("a"), 0, nil); status(err) != 500 || !strings.Contains(err.Error(), "Enforcing job modify index 0: job already exists") {
		t.Errorf("register an existing job with index 0 = %v, want 500 job already exists", err)
	}
	if _, _, err := jobs.EnforceRegister(testJob("a"), resp.JobModifyIndex+100, nil); status(err) != 500 || !strings.Contains(err.Error(), "conflicting job modify index") {
		t.Errorf("register with a wrong index = %v, want 500 conflicting", err)
	}
	again, _, err := jobs.EnforceRegister(testJob("a"), resp.JobModifyIndex, nil)
	if err != nil {
		t.Fatalf("register with the current index: %v", err)
	}
	job, _, err := jobs.Info("a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *job.JobModifyIndex != again.JobModifyIndex || *job.Version != 1 {
		t.Errorf("job = index %d version %d, want index %d version 1", *job.JobModifyIndex, *job.Version, again.JobModifyIndex)
	}
	// A plan reports the index a registration must enforce.
	plan, _, err := jobs.Plan(testJob("a"), false, nil)
	if err != nil || plan.JobModifyIndex != again.JobModifyIndex {
		t.Errorf("plan = %+v, %v; want the job's modify index %d", plan, err, again.JobModifyIndex)
	}
}

// TestBlockingQuery: a query with an index answers once the table moves
// past it (a query that did not block would answer with the same index),
// and with the same index when its wait ends without a change.
func TestBlockingQuery(t *testing.T) {
	_, c := startFake(t, Config{Hold: true})
	allocs, meta, err := c.Jobs().Allocations("a", false, nil)
	if err != nil || len(allocs) != 0 {
		t.Fatalf("allocations of an unknown job = %v, %v; want none", allocs, err)
	}
	type result struct {
		allocs []*api.AllocationListStub
		index  uint64
		err    error
	}
	done := make(chan result, 1)
	go func() {
		a, m, err := c.Jobs().Allocations("a", false, &api.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: time.Minute})
		r := result{allocs: a, err: err}
		if m != nil {
			r.index = m.LastIndex
		}
		done <- r
	}()
	if _, _, err := c.Jobs().Register(testJob("a"), nil); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.index <= meta.LastIndex || len(r.allocs) != 1 {
		t.Fatalf("blocking query = %d allocations at index %d, %v; want the new allocation past index %d", len(r.allocs), r.index, r.err, meta.LastIndex)
	}
	_, m2, err := c.Jobs().Allocations("a", false, &api.QueryOptions{WaitIndex: r.index, WaitTime: 20 * time.Millisecond})
	if err != nil || m2.LastIndex != r.index {
		t.Errorf("query whose wait ended = index %d, %v; want the unchanged %d", m2.LastIndex, err, r.index)
	}
}

// TestDeregister: purge=false keeps the job, stopped; its allocations are
// told to stop. Deregistering an unknown job is no error.
func TestDeregister(t *testing.T) {
	_, c := startFake(t, Config{Hold: true})
	if _, _, err := c.Jobs().Register(testJob("a"), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Deregister("a", false, nil); err != nil {
		t.Fatal(err)
	}
	job, _, err := c.Jobs().Info("a", nil)
	if err != nil || !*job.Stop || *job.Status != "dead" {
		t.Fatalf("job after deregister = %+v, %v; want it kept, stopped", job, err)
	}
	allocs, _, _ := c.Jobs().Allocations("a", false, nil)
	for _, a := range allocs {
		if a.DesiredStatus != "stop" {
			t.Errorf("allocation %s desired %s, want stop", a.ID, a.DesiredStatus)
		}
	}
	if _, _, err := c.Jobs().Deregister("a", true, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Info("a", nil); status(err) != http.StatusNotFound {
		t.Errorf("job after purge = %v, want 404", err)
	}
	if _, _, err := c.Jobs().Deregister("nope", false, nil); err != nil {
		t.Errorf("deregister an unknown job = %v, want no error", err)
	}
}

// TestPlanFailures: the plan's metrics say why a group cannot be placed.
func TestPlanFailures(t *testing.T) {
	_, c := startFake(t, Config{Hold: true, NodeMemoryMB: 512, Drivers: []string{"raw_exec"}})
	big := testJob("big")
	big.TaskGroups[0].Tasks[0].Resources = &api.Resources{MemoryMB: ptr(1024)}
	plan, _, err := c.Jobs().Plan(big, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := plan.FailedTGAllocs["web"]
	if m == nil || m.NodesExhausted != 1 || m.DimensionExhausted["memory"] != 1 {
		t.Errorf("plan of a job too big = %+v, want memory exhausted", m)
	}
	exec := testJob("exec")
	exec.TaskGroups[0].Tasks[0].Driver = "exec"
	plan, _, err = c.Jobs().Plan(exec, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := plan.FailedTGAllocs["web"]; m == nil || m.NodesFiltered != 1 || m.ConstraintFiltered["missing drivers"] != 1 {
		t.Errorf("plan with a missing driver = %+v, want filtered", m)
	}
	elsewhere := testJob("dc2")
	elsewhere.Datacenters = []string{"dc2"}
	plan, _, err = c.Jobs().Plan(elsewhere, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := plan.FailedTGAllocs["web"]; m == nil || m.NodesEvaluated != 0 {
		t.Errorf("plan in another datacenter = %+v, want no node evaluated", m)
	}
	if plan, _, err := c.Jobs().Plan(testJob("fits"), false, nil); err != nil || len(plan.FailedTGAllocs) != 0 {
		t.Errorf("plan of a job that fits = %+v, %v", plan, err)
	}
}

// TestToken: with ACLs on, a request without the token is refused as
// Nomad refuses it.
func TestToken(t *testing.T) {
	s, c := startFake(t, Config{Hold: true, Token: "secret-token"})
	if _, _, err := c.Jobs().List(nil); err != nil {
		t.Errorf("list with the token: %v", err)
	}
	anon, _ := api.NewClient(&api.Config{Address: s.URL()})
	if _, _, err := anon.Jobs().List(nil); status(err) != http.StatusForbidden {
		t.Errorf("list without the token = %v, want 403", err)
	}
}

func TestInterpolate(t *testing.T) {
	env := map[string]string{"NOMAD_PORT_http": "8080", "X": "x"}
	for in, want := range map[string]string{
		"${NOMAD_PORT_http}":       "8080",
		"a ${X} b ${env.X}":        "a x b x",
		"$${NOMAD_PORT_http}":      "${NOMAD_PORT_http}",
		"%%{ if }":                 "%{ if }",
		"${UNKNOWN_SVC_TEST_NAME}": "${UNKNOWN_SVC_TEST_NAME}",
		"100% $ plain":             "100% $ plain",
	} {
		if got := interpolate(in, env); got != want {
			t.Errorf("interpolate(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseEnvFile(t *testing.T) {
	got, err := parseEnvFile([]byte("# comment\nA=\"multi\\nline \\\"q\\\" \\u00e9\"\nB='lit $x'\nC = plain value # note\n\nexport D=d\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "multi\nline \"q\" é", "B": "lit $x", "C": "plain value", "D": "d"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseEnvFile (-want +got):\n%s", diff)
	}
	if _, err := parseEnvFile([]byte("A=\"open\n")); err == nil {
		t.Errorf("an unterminated quote parsed")
	}
}

// TestVolumeMounts: a read-only request for a mkdir volume (which offers
// single-node-writer only) is not placed, as Nomad's scheduler refuses
// it; a read-write one is, and its task's volume_mount at a relative
// destination reaches the volume's directory.
func TestVolumeMounts(t *testing.T) {
	s, c := startFake(t, Config{})
	resp, _, err := c.HostVolumes().Create(&api.HostVolumeCreateRequest{Volume: &api.HostVolume{Name: "vol", PluginID: "mkdir"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(resp.Volume.HostPath, "marker"), []byte("in the volume\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	job := func(id string, readOnly bool) *api.Job {
		j := testJob(id)
		j.Type = ptr(api.JobTypeBatch)
		tg := j.TaskGroups[0]
		tg.Volumes = map[string]*api.VolumeRequest{"v": {Name: "v", Type: "host", Source: "vol", ReadOnly: readOnly}}
		tg.Tasks[0].Config = map[string]any{"command": "/bin/sh", "args": []any{"-c", "cat local/v/marker > local/seen"}}
		tg.Tasks[0].VolumeMounts = []*api.VolumeMount{{Volume: ptr("v"), Destination: ptr("local/v"), ReadOnly: ptr(true)}}
		return j
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, _, err := c.HostVolumes().Get(resp.Volume.ID, nil)
		if err == nil && v.State == api.HostVolumeStateReady {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the volume is not ready within 10s: %+v, %v", v, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	plan, _, err := c.Jobs().Plan(job("ro", true), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := plan.FailedTGAllocs["web"]; m == nil || m.ConstraintFiltered["missing compatible host volumes"] != 1 {
		t.Errorf("plan of a read-only request = %+v, want filtered for missing compatible host volumes", m)
	}
	if _, _, err := c.Jobs().Register(job("rw", false), nil); err != nil {
		t.Fatal(err)
	}
	var allocID string
	for {
		allocs, _, err := c.Jobs().Allocations("rw", false, nil)
		if err == nil && len(allocs) == 1 && allocs[0].ClientStatus == api.AllocClientStatusComplete {
			allocID = allocs[0].ID
			break
		}
		if err == nil && len(allocs) == 1 && allocs[0].ClientStatus == api.AllocClientStatusFailed {
			t.Fatalf("the task failed: %+v", allocs[0].TaskStates)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job did not complete within 10s: %+v, %v", allocs, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	task := filepath.Join(s.cfg.DataDir, "allocs", allocID, "web")
	if b, err := os.ReadFile(filepath.Join(task, "local", "seen")); err != nil || string(b) != "in the volume\n" {
		t.Errorf("the task read %q (%v) through its mount; want the volume's marker", b, err)
	}
	if target, err := os.Readlink(filepath.Join(task, "local", "v")); err != nil || target != resp.Volume.HostPath {
		t.Errorf("the mount is %q (%v); want a link to %s", target, err, resp.Volume.HostPath)
	}
}
