package nomad

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
)

// JobSecrets keeps the values of jobs' sealed variables (Task.SealedEnv: a
// filled slot's credentials, such as a database URL with its password) in
// Vault, in an entry per job and workload that the job's template block
// reads (jobtemplates.VaultJobEnvPath). The runtime writes them before it
// registers the job, so that no value is ever in the job, in Nomad's state
// or in a log, and each job has its own, so that an old job keeps its
// values while a new one deploys. The vault secrets adapter implements it.
type JobSecrets interface {
	// PutJobSecrets writes the values, by workload and then variable name,
	// as the job's entries; each workload's replaces what an earlier write
	// put there. Its errors never show a value.
	PutJobSecrets(ctx context.Context, appID, jobID string, values map[string]map[string]string) error
	// DeleteJobSecrets removes the job's entries with all their versions;
	// a job that has none is no error.
	DeleteJobSecrets(ctx context.Context, appID, jobID string) error
}

// jobSecrets returns where jobs' sealed variables go, or nil for nowhere.
func (r *Runtime) jobSecrets() JobSecrets {
	if r.cfg.JobSecrets == nil {
		return nil
	}
	return r.cfg.JobSecrets()
}

// noJobSecrets refuses a workload's sealed variables when there is no
// Vault to deliver them through: they would have to travel in the job.
func noJobSecrets(workload string, vars []string) error {
	return errcode.New(errcode.PlanCapabilityUnsupp,
		"the nomad runtime delivers slot credentials (%s of workload %s) through Vault, and the primary secrets adapter is not the vault one",
		strings.Join(vars, ", "), workload).
		WithDetail("workload", workload).
		WithRemedy("configure the vault secrets adapter as the primary secrets adapter (POST /api/v1/adapters, category secrets, kind vault, with the mount and prefix the nomad runtime's vault_mount and vault_prefix name) and restart svc: slot credentials then reach workloads from Vault and never travel in the job")
}

// appOf is the app a job's entries are kept under: the one render names
// the job's Vault paths after.
func appOf(job scheduler.Job) string {
	if job.AppID == "" {
		return noApp
	}
	return job.AppID
}

// sealedValues are the values of the job's sealed variables, by workload
// and variable: those its template reads from Vault
// (jobtemplates.SealedVars).
func sealedValues(job scheduler.Job) map[string]map[string]string {
	out := map[string]map[string]string{}
	for name, t := range job.Workloads {
		vars := jobtemplates.SealedVars(t)
		if len(vars) == 0 {
			continue
		}
		values := make(map[string]string, len(vars))
		for _, v := range vars {
			values[v] = t.Env[v]
		}
		out[name] = values
	}
	return out
}

// putJobSecrets writes the job's sealed variables where its template reads
// them, before the job is registered; it reports whether it wrote any.
func (r *Runtime) putJobSecrets(ctx context.Context, job scheduler.Job) (bool, error) {
	values := sealedValues(job)
	if len(values) == 0 {
		return false, nil
	}
	w := r.jobSecrets()
	if w == nil {
		first := slices.Min(slices.Collect(maps.Keys(values)))
		return false, noJobSecrets(first, slices.Sorted(maps.Keys(values[first])))
	}
	if err := w.PutJobSecrets(ctx, appOf(job), job.ID, values); err != nil {
		// Some workloads' entries may have been written: no job will read
		// them.
		r.dropJobSecrets(ctx, job)
		return false, fmt.Errorf("run job %s: write its slot credentials to vault: %w", job.ID, err)
	}
	return true, nil
}

// dropJobSecrets deletes what putJobSecrets wrote for a run that failed:
// the job will not run again without a new Run, which writes them anew. A
// failure is only logged: the entries go when the job is discarded.
func (r *Runtime) dropJobSecrets(ctx context.Context, job scheduler.Job) {
	w := r.jobSecrets()
	if w == nil {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	if err := w.DeleteJobSecrets(dctx, appOf(job), job.ID); err != nil {
		r.log.Warn("nomad: delete the slot credentials of a job that failed to run", "job_id", job.ID, "err", errcode.MessageOf(err))
	}
}

// discardJobSecrets deletes the Vault entries of a stopped Nomad job's
// sealed variables, found by its meta (its app and deployment) and only
// when its templates read them: what discarding a job (Discard, and
// RemoveJobLogs, which purges it) must call while Nomad still knows the
// job. Without a writer it does nothing: the entries, if any, go with the
// app.
func (r *Runtime) discardJobSecrets(ctx context.Context, job *api.Job) error {
	appID, depID := job.Meta[jobtemplates.MetaAppID], job.Meta[jobtemplates.MetaDeploymentID]
	if appID == "" || depID == "" || !readsJobEnv(job, depID) {
		return nil
	}
	w := r.jobSecrets()
	if w == nil {
		return nil
	}
	if err := w.DeleteJobSecrets(ctx, appID, depID); err != nil {
		return fmt.Errorf("discard job %s: delete its slot credentials from vault: %w", depID, err)
	}
	return nil
}

// readsJobEnv says whether a task of the job reads its sealed variables
// from Vault.
func readsJobEnv(job *api.Job, depID string) bool {
	marker := "/" + jobtemplates.JobEnvFolder + "/" + depID + "/"
	for _, tg := range job.TaskGroups {
		for _, task := range tg.Tasks {
			for _, t := range task.Templates {
				if t != nil && t.EmbeddedTmpl != nil && strings.Contains(*t.EmbeddedTmpl, marker) {
					return true
				}
			}
		}
	}
	return false
}
