package nomad

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
)

// Nomad's reasons in svc's words: pure functions from what Nomad reports
// (an evaluation's or a plan's placement metrics, an allocation's task
// states and events) to a coded error with the specification's code, a
// message that keeps Nomad's own facts (the constraints that filtered the
// nodes, the dimension exhausted, the Vault path a template waits for,
// the driver's error) and a remedy that fits the cause. Table tests feed
// them payloads captured from a real Nomad agent (testdata/nomad).

// Task event types Nomad records that the API client has no constant for.
const (
	// eventTemplate is the template hook's event: "Missing: <dependency>"
	// while a template waits for data it cannot read (a Vault path that
	// does not exist or that the task's policy may not read), or the
	// failure to render.
	eventTemplate = "Template"
	// missingPrefix starts a Template event that names what it waits for.
	missingPrefix = "Missing: "
)

// placementFailure is why Nomad could not place a group, from its
// allocation metric: no room on the nodes that could run it
// (CAPACITY_WOULD_OVERSUBSCRIBE, with the dimensions exhausted and the
// resources asked), or no node that can run it at all (ADAPTER_FAILED:
// none in the datacenters or node pool, or every one filtered out by a
// constraint, which the message names).
func placementFailure(jobID, group string, m *api.AllocationMetric) *errcode.Error {
	if m == nil {
		m = &api.AllocationMetric{}
	}
	var e *errcode.Error
	switch {
	case m.NodesExhausted > 0 || len(m.DimensionExhausted) > 0 || len(m.QuotaExhausted) > 0 || len(m.ClassExhausted) > 0:
		what := counted(m.DimensionExhausted)
		if len(m.QuotaExhausted) > 0 {
			what = append(what, "quota: "+strings.Join(m.QuotaExhausted, ", "))
		}
		if len(what) == 0 {
			what = []string{fmt.Sprintf("%d node(s) full", m.NodesExhausted)}
		}
		e = errcode.New(errcode.CapacityOversubscribe, "nomad has no room for workload %s of job %s: %s exhausted on the nodes that could run it",
			group, jobID, strings.Join(what, ", ")).
			WithRemedy("lower the workload's resources in the spec, free resources on the Nomad clients, or add clients")
		if ask := asked(m.ResourcesExhausted); ask != "" {
			e.WithDetail("resources_asked", ask)
		}
	case len(m.ConstraintFiltered) > 0 || len(m.ClassFiltered) > 0:
		filtered := counted(m.ConstraintFiltered)
		filtered = append(filtered, counted(m.ClassFiltered)...)
		e = errcode.New(errcode.AdapterFailed, "nomad has no node that can run workload %s of job %s: %d of %d node(s) filtered out (%s)",
			group, jobID, m.NodesFiltered, m.NodesEvaluated, strings.Join(filtered, "; ")).
			WithRemedy("%s", constraintRemedy(m.ConstraintFiltered))
	default:
		where := "in the job's datacenters and node pool"
		if m.NodePool != "" {
			where = fmt.Sprintf("in node pool %q of the job's datacenters", m.NodePool)
		}
		e = errcode.New(errcode.AdapterFailed, "nomad has no node that can run workload %s of job %s: no node %s (%d evaluated)", group, jobID, where, m.NodesEvaluated).
			WithRemedy("check the nomad adapter's datacenters and node_pool against the Nomad clients (`nomad node status`)")
	}
	e.WithDetail("workload", group).WithDetail("reason", "placement_failed").
		WithDetail("nodes_evaluated", m.NodesEvaluated).WithDetail("nodes_filtered", m.NodesFiltered).WithDetail("nodes_exhausted", m.NodesExhausted)
	if len(m.DimensionExhausted) > 0 {
		e.WithDetail("dimensions_exhausted", m.DimensionExhausted)
	}
	if len(m.ConstraintFiltered) > 0 {
		e.WithDetail("constraints_filtered", m.ConstraintFiltered)
	}
	if len(m.QuotaExhausted) > 0 {
		e.WithDetail("quota_exhausted", m.QuotaExhausted)
	}
	return e
}

// counted lists "<what> on <n> node(s)" by name.
func counted(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s on %d node(s)", k, m[k]))
	}
	return out
}

// asked describes the resources a group asked for that no node had.
func asked(m map[string]*api.Resources) string {
	var parts []string
	for _, task := range slices.Sorted(maps.Keys(m)) {
		r := m[task]
		if r == nil {
			continue
		}
		if r.MemoryMB != nil && *r.MemoryMB > 0 {
			parts = append(parts, fmt.Sprintf("%s: memory %d MB", task, *r.MemoryMB))
		}
		if r.CPU != nil && *r.CPU > 0 {
			parts = append(parts, fmt.Sprintf("%s: cpu %d MHz", task, *r.CPU))
		}
	}
	return strings.Join(parts, ", ")
}

// constraintRemedy fits the constraints that filtered every node.
func constraintRemedy(filtered map[string]int) string {
	for c := range filtered {
		switch {
		case strings.Contains(c, "driver"):
			return "enable the nomad adapter's driver (raw_exec or exec) on the Nomad clients, or configure the adapter with a driver they have"
		case strings.Contains(c, "host volume"):
			return "let the Nomad clients create host volumes (the mkdir plugin, with host_volumes_dir) or declare the app's volume as a host_volume in a client's configuration"
		}
	}
	return "the job asks for node attributes no Nomad client has: change the constraint in the job templates (templates_dir), or add a client that meets it"
}

// setupEvent returns the event that tells best why a task never ran: a
// driver failure, an artifact download or a setup failure, a template's,
// else the last event that failed the task. nil when none does.
func setupEvent(ts *api.TaskState) *api.TaskEvent {
	if ts == nil {
		return nil
	}
	var best, fails *api.TaskEvent
	for _, ev := range ts.Events {
		switch ev.Type {
		case api.TaskDriverFailure, api.TaskArtifactDownloadFailed, api.TaskSetupFailure, eventTemplate:
			best = ev
		}
		if ev.FailsTask {
			fails = ev
		}
	}
	if best != nil {
		return best
	}
	return fails
}

// missingData returns what a task's template waits for ("vault.read(<path>)")
// when its latest Template event says it misses data and the task has not
// started; "" otherwise.
func missingData(ts *api.TaskState) string {
	if ts == nil || ts.State == "running" {
		return ""
	}
	for i := len(ts.Events) - 1; i >= 0; i-- {
		ev := ts.Events[i]
		if ev.Type == api.TaskStarted {
			return ""
		}
		if ev.Type == eventTemplate {
			if what, ok := strings.CutPrefix(ev.DisplayMessage, missingPrefix); ok {
				return what
			}
			return ""
		}
	}
	return ""
}

// vaultPaths returns the Vault paths a template's "Missing:" names
// ("vault.read(a), vault.read(b)"), in order.
func vaultPaths(missing string) []string {
	var out []string
	for rest := missing; ; {
		i := strings.Index(rest, "vault.read(")
		if i < 0 {
			return out
		}
		rest = rest[i+len("vault.read("):]
		j := strings.IndexByte(rest, ')')
		if j < 0 {
			return out
		}
		out = append(out, rest[:j])
		rest = rest[j+1:]
	}
}

// taskFailure is why a workload's task did not start, from its task state
// (nil when the state tells nothing): a template waiting for a Vault path
// (ADAPTER_FAILED naming the path: the secret is not in Vault, or the
// task's Vault role may not read it), a driver that could not launch the
// command (STATE_APP_EXITED: the app never ran), an artifact that could
// not be downloaded or another setup failure (ADAPTER_FAILED).
func taskFailure(workload string, ts *api.TaskState) *errcode.Error {
	if what := missingData(ts); what != "" {
		paths := vaultPaths(what)
		if len(paths) == 0 {
			return errcode.New(errcode.AdapterFailed, "workload %s waits for data its template cannot read: %s", workload, what).
				WithDetail("workload", workload).WithDetail("reason", "template_missing").
				WithRemedy("check the job template's template blocks against what the Nomad clients can read")
		}
		return errcode.New(errcode.AdapterFailed, "workload %s cannot start: its secrets template cannot read Vault path %s (no secret there, or the workload's Vault policy does not allow reading it)",
			workload, strings.Join(paths, ", ")).
			WithDetail("workload", workload).WithDetail("reason", "vault_path_missing").WithDetail("vault_paths", paths).
			WithRemedy("%s", vaultRemedy(paths))
	}
	ev := setupEvent(ts)
	if ev == nil {
		return nil
	}
	msg := redactQueries(eventText(ev))
	e := errcode.New(errcode.AdapterFailed, "nomad could not start workload %s: %s: %s", workload, ev.Type, msg).
		WithDetail("workload", workload).WithDetail("event", ev.Type)
	switch ev.Type {
	case api.TaskDriverFailure:
		e = errcode.New(errcode.StateAppExited, "workload %s could not be started by Nomad's driver: %s", workload, msg).
			WithDetail("workload", workload).WithDetail("reason", "driver_failure").
			WithRemedy("check the workload's run.command: the program must exist in the build's output (paths are relative to it) or on the Nomad clients")
	case api.TaskArtifactDownloadFailed:
		e.WithDetail("reason", "artifact_download_failed").
			WithRemedy("check that the Nomad clients reach svc at the nomad adapter's artifact URL (server.external_url)")
	case eventTemplate:
		e.WithDetail("reason", "template_failed").
			WithRemedy("check the secrets the workload binds: svc renders them through a Vault template")
	default:
		e.WithDetail("reason", "setup_failed").
			WithRemedy("read the allocation's events with `nomad alloc status` for the Nomad client's side")
	}
	return e
}

// vaultRemedy fits a Vault path a workload cannot read: an app secret is
// written to Vault by the vault secrets adapter when it is set; a slot's
// credentials by the runtime before each deploy.
func vaultRemedy(paths []string) string {
	for _, p := range paths {
		if strings.Contains(p, "/job-env/") {
			return "svc writes a deployment's slot credentials to this path before registering its job: check the vault secrets adapter's mount and prefix match the nomad adapter's vault_mount and vault_prefix, and that the workloads' Vault role may read them"
		}
	}
	put := "PUT /api/v1/apps/{appID}/secrets/{key}"
	if app, key, ok := secretOf(paths[0]); ok {
		put = "PUT /api/v1/apps/" + app + "/secrets/" + key
	}
	return "set the secret again (" + put + ") while the vault secrets adapter is the primary one, so that it is written to Vault; and check that the nomad adapter's vault_mount, vault_prefix and vault_role match the Vault role's policy for workload identities"
}

// secretOf reads the app and the key of an app secret's Vault path
// (<mount>/data/<prefix>/apps/<app>/<key>, jobtemplates.VaultSecretPath).
func secretOf(path string) (app, key string, ok bool) {
	parts := strings.Split(path, "/")
	if n := len(parts); n >= 3 && parts[n-3] == "apps" && scheduler.PlainName(parts[n-2]) && scheduler.PlainName(parts[n-1]) {
		return parts[n-2], parts[n-1], true
	}
	return "", "", false
}

// eventText is an event's message: its display message, else the error
// it carries.
func eventText(ev *api.TaskEvent) string {
	for _, s := range []string{ev.DisplayMessage, ev.DriverError, ev.DownloadError, ev.SetupError, ev.ValidationError, ev.VaultError, ev.Message} {
		if s != "" {
			return s
		}
	}
	return ev.Type
}
