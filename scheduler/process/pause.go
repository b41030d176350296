package process

import (
	"context"
	"syscall"
)

// Pause stops every process of a job's workloads (SIGSTOP to each
// workload's process group) until resume is called (SIGCONT), so that a
// copy of the job's volumes taken meanwhile is as consistent as a
// filesystem snapshot: nothing writes while it is taken, and what the
// processes wrote before is on disk (what they hold in memory is not,
// as after a power cut). A workload restarted meanwhile is not paused.
// Resume is safe to call more than once.
func (r *Runtime) Pause(_ context.Context, jobID string) (func(), error) {
	j := r.job(jobID)
	if j == nil {
		return nil, notFound(jobID)
	}
	var groups []int
	for _, w := range j.snapshot() {
		if w.sup == nil {
			continue
		}
		if st := w.sup.read(); st.pid > 1 && st.pid != syscall.Getpgrp() {
			if syscall.Kill(-st.pid, syscall.SIGSTOP) == nil {
				groups = append(groups, st.pid)
			}
		}
	}
	done := false
	return func() {
		if done {
			return
		}
		done = true
		for _, pgid := range groups {
			_ = syscall.Kill(-pgid, syscall.SIGCONT)
		}
	}, nil
}

// HoldsVolumes says that the process runtime keeps its volumes' data on
// this server (under the work dir), where backups read and restore it.
func (r *Runtime) HoldsVolumes() bool { return true }
