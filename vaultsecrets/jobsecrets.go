package vaultsecrets

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/vault/api"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/secrets"
)

// Job secrets: the values of a job's sealed variables (a filled slot's
// credentials, which the Nomad runtime must not put in a job) kept where
// the job's template block reads them, one KV entry per workload at
//
//	<mount>/data/<prefix>/apps/<app id>/job-env/<job id>/<workload>
//
// with one field per variable. Each job has its own entries, so an old job
// keeps its values while a new one deploys; they are deleted with every
// version when the job is discarded, and swept when their app is gone.
// The folder's name holds a '-', which no secret's key (an environment
// variable name) can: no app secret, and no listing of them, ever meets it.
// The adapter's policy (VaultPolicy) covers it: it is under <prefix>/apps/.

// JobEnvFolder is the folder, in an app's, of its jobs' sealed variables.
const JobEnvFolder = "job-env"

// jobRel is a job's folder below the mount.
func (v *Vault) jobRel(appID, jobID string) string {
	return v.prefix + "/apps/" + appID + "/" + JobEnvFolder + "/" + jobID
}

// checkJobRef refuses an app or job ID that is not one path segment.
func checkJobRef(appID, jobID string) error {
	if !appIDRE.MatchString(appID) {
		return errcode.Invalid("app_id", "%q is not an app ID", appID)
	}
	if !appIDRE.MatchString(jobID) {
		return errcode.Invalid("job_id", "the job ID %q cannot name a vault path: it must be letters, digits, '_' and '-'", jobID)
	}
	return nil
}

// checkJobValues refuses workload names that are not one path segment,
// variable names that are not environment variable names and values a
// workload's environment cannot hold. Its errors never show a value.
func checkJobValues(values map[string]map[string]string) error {
	for workload, vars := range values {
		if !appIDRE.MatchString(workload) {
			return errcode.Invalid("workload", "the workload name %q cannot name a vault path", workload)
		}
		for name, value := range vars {
			if err := secrets.CheckKey(name); err != nil {
				return errcode.Invalid("variable", "%q is not an environment variable name", name)
			}
			if err := secrets.CheckValue(value); err != nil {
				msg := err.Error()
				if e, ok := errcode.As(err); ok {
					msg = e.Message
				}
				return errcode.Invalid("variable", "variable %s of workload %s: %s", name, workload, msg)
			}
		}
	}
	return nil
}

// PutJobSecrets writes the values of a job's sealed variables, by workload
// and variable name, each workload's as a new version of its entry (its
// fields are replaced, not merged). A workload with no variable is skipped.
// Nothing is written unless every name and value is acceptable.
func (v *Vault) PutJobSecrets(ctx context.Context, appID, jobID string, values map[string]map[string]string) error {
	if err := checkJobRef(appID, jobID); err != nil {
		return err
	}
	if err := checkJobValues(values); err != nil {
		return err
	}
	for _, workload := range slices.Sorted(maps.Keys(values)) {
		vars := values[workload]
		if len(vars) == 0 {
			continue
		}
		data := make(map[string]any, len(vars))
		for name, value := range vars {
			data[name] = value
		}
		o := v.op(fmt.Sprintf("writing the sealed variables of workload %s of job %s", workload, jobID), "create and update on "+v.policyPath("data"))
		err := v.do(ctx, func() error {
			_, err := v.client.Logical().WriteWithContext(ctx, v.mount+"/data/"+v.jobRel(appID, jobID)+"/"+workload,
				map[string]any{"data": data})
			return err
		})
		if err != nil {
			return v.translate(o, err)
		}
	}
	return nil
}

// DeleteJobSecrets removes every workload's entry of the job with all
// their versions (their metadata); a job that has none is no error.
func (v *Vault) DeleteJobSecrets(ctx context.Context, appID, jobID string) error {
	if err := checkJobRef(appID, jobID); err != nil {
		return err
	}
	folder := v.mount + "/metadata/" + v.jobRel(appID, jobID)
	workloads, err := v.list(ctx, folder, fmt.Sprintf("listing the sealed variables of job %s", jobID))
	if err != nil {
		return err
	}
	var errs []error
	for _, w := range workloads {
		if strings.HasSuffix(w, "/") || !appIDRE.MatchString(w) {
			continue // not an entry svc wrote
		}
		o := v.op(fmt.Sprintf("deleting the sealed variables of workload %s of job %s", w, jobID), "delete on "+v.policyPath("metadata"))
		err := v.do(ctx, func() error {
			_, err := v.client.Logical().DeleteWithContext(ctx, folder+"/"+w)
			return err
		})
		if err != nil && statusOf(err) != 404 {
			errs = append(errs, v.translate(o, err))
		}
	}
	return errors.Join(errs...)
}

// SweepJobSecrets deletes the job entries of every app that exists no
// more (exists says which do), and leaves everything else alone: the
// apps' secrets are the secrets service's to sweep, by their rows. A job
// whose entries could not be deleted is tried again by the next sweep; the
// first failure is returned once the others have been tried.
func (v *Vault) SweepJobSecrets(ctx context.Context, exists func(appID string) bool) error {
	appsFolder := v.mount + "/metadata/" + v.prefix + "/apps"
	names, err := v.list(ctx, appsFolder, "listing the apps that have secrets")
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		appID, ok := strings.CutSuffix(name, "/")
		if !ok || !appIDRE.MatchString(appID) || exists(appID) {
			continue
		}
		jobs, err := v.list(ctx, appsFolder+"/"+appID+"/"+JobEnvFolder, fmt.Sprintf("listing the jobs of deleted app %s", appID))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, j := range jobs {
			jobID, ok := strings.CutSuffix(j, "/")
			if !ok || !appIDRE.MatchString(jobID) {
				continue
			}
			if err := v.DeleteJobSecrets(ctx, appID, jobID); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("sweep the job secrets of deleted apps: %w", errs[0])
	}
	return nil
}

// list lists a metadata folder's keys (a "/" ends a subfolder's); a folder
// that does not exist lists nothing.
func (v *Vault) list(ctx context.Context, path, what string) ([]string, error) {
	o := v.op(what, "list on "+v.policyPath("metadata"))
	var sec *api.Secret
	err := v.do(ctx, func() (err error) {
		sec, err = v.client.Logical().ListWithContext(ctx, path)
		return err
	})
	if err != nil {
		if statusOf(err) == 404 {
			return nil, nil
		}
		return nil, v.translate(o, err)
	}
	var keys []string
	if sec != nil {
		raw, _ := sec.Data["keys"].([]any)
		for _, k := range raw {
			if s, ok := k.(string); ok {
				keys = append(keys, s)
			}
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// PutJobSecrets connects if need be, then writes the job's values.
func (l *lazyVault) PutJobSecrets(ctx context.Context, appID, jobID string, values map[string]map[string]string) error {
	v, err := l.get(ctx)
	if err != nil {
		return err
	}
	return v.PutJobSecrets(ctx, appID, jobID, values)
}

// DeleteJobSecrets connects if need be, then deletes the job's entries.
func (l *lazyVault) DeleteJobSecrets(ctx context.Context, appID, jobID string) error {
	v, err := l.get(ctx)
	if err != nil {
		return err
	}
	return v.DeleteJobSecrets(ctx, appID, jobID)
}

// SweepJobSecrets connects if need be, then sweeps deleted apps' job
// entries.
func (l *lazyVault) SweepJobSecrets(ctx context.Context, exists func(appID string) bool) error {
	v, err := l.get(ctx)
	if err != nil {
		return err
	}
	return v.SweepJobSecrets(ctx, exists)
}
