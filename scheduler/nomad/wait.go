package nomad

import (
	"context"
	"time"

	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/scheduler"
)

// goneEvery bounds each blocking query of a wait for readiness, so that
// the job going is noticed within it: a real Nomad (v2.0.5) does not wake
// a blocking query on a purged job's allocations when it stops them.
const goneEvery = 3 * time.Second

// startTimeout is how long a wait for a workload (or its volume) to be
// ready may last: the start timeout the context carries (the scheduler's
// runtime.start_timeout, scheduler.WithStartTimeout), else the runtime's
// own (Config.StartTimeout).
func (r *Runtime) startTimeout(ctx context.Context) time.Duration {
	return scheduler.StartTimeout(ctx, r.cfg.StartTimeout)
}

// gone says whether the Nomad job a wait is for went away behind svc's
// back: stopped (deregistered) or purged. The error is NOT_FOUND, naming
// what the wait was for; nil while the job is registered and not stopped
// (or Nomad cannot say: the wait goes on, within its bound).
func (r *Runtime) gone(ctx context.Context, nomadID, workload string) error {
	job, _, err := r.client.Jobs().Info(nomadID, r.query(ctx))
	switch {
	case statusOf(err) == 404:
		return errcode.New(errcode.NotFound, "nomad job %s was purged while workload %s was starting", nomadID, workload).
			WithDetail("workload", workload)
	case err != nil:
		return nil
	case job.Stop != nil && *job.Stop:
		return errcode.New(errcode.NotFound, "nomad job %s was stopped while workload %s was starting", nomadID, workload).
			WithDetail("workload", workload)
	}
	return nil
}
