package process

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/svchost/svc/scheduler"
)

// Usage is read from /proc on demand: each call samples every process of
// each workload's process group twice, UsageWindow (200ms) apart, and
// reports the CPU used between the samples (utime+stime of the processes
// in the group at both samples) as thousandths of a core; memory is the
// group's resident set at the second sample. Nothing samples in the
// background. Disk is the size of the workload's working directory (its
// working copy of the artifact and what it wrote there; a static site's
// artifact), and each mounted volume's apart, by a bounded walk (maxWalk
// entries each; past that it counts what it saw; links are not followed,
// so a volume's link in the working directory does not count). DiskUsage
// reads the disk alone, without the sampling window. Limits are the
// task's resources as declared: the process runtime reads use but
// enforces no limit (the scheduler stops an app over its disk limit). A
// static workload is served by the runtime's own process: its CPU and
// memory read as 0.

// maxWalk bounds the entries one disk reading visits.
const maxWalk = 100_000

// Usage reads the job's resource use.
func (r *Runtime) Usage(ctx context.Context, jobID string) (scheduler.Usage, error) {
	j := r.job(jobID)
	if j == nil {
		return scheduler.Usage{}, notFound(jobID)
	}
	if runtime.GOOS != "linux" {
		return scheduler.Usage{}, nil
	}
	host, err := r.Host(ctx)
	if err != nil {
		return scheduler.Usage{}, nil // no /proc to read: not supported here
	}
	ws := j.snapshot()
	groups := map[int]bool{}
	pgidOf := map[string]int{}
	for name, w := range ws {
		if w.sup == nil {
			continue
		}
		if st := w.sup.read(); st.pid > 0 {
			groups[st.pid] = true
			pgidOf[name] = st.pid
		}
	}
	first, err := groupMembers(groups)
	if err != nil {
		return scheduler.Usage{}, nil
	}
	began := time.Now()
	t := time.NewTimer(r.cfg.UsageWindow)
	select {
	case <-ctx.Done():
		t.Stop()
		return scheduler.Usage{}, ctx.Err()
	case <-t.C:
	}
	second, err := groupMembers(groups)
	if err != nil {
		return scheduler.Usage{}, nil
	}
	elapsed := time.Since(began)
	u := scheduler.Usage{
		Supported:       true,
		HostCPUMillis:   host.CPUMillis,
		HostMemoryBytes: host.MemoryBytes,
		Workloads:       map[string]scheduler.WorkloadUsage{},
	}
	page := int64(os.Getpagesize())
	for name, w := range ws {
		wu := scheduler.WorkloadUsage{Volumes: map[string]int64{}}
		if pgid, ok := pgidOf[name]; ok {
			before := map[int]uint64{}
			for _, p := range first[pgid] {
				before[p.pid] = p.utime + p.stime
			}
			var ticks uint64
			for _, p := range second[pgid] {
				now := p.utime + p.stime
				if was, ok := before[p.pid]; ok && now > was {
					ticks += now - was
				}
				wu.MemoryBytes += p.rssPages * page
			}
			cpuMs := float64(ticks) * 1000 / clockTicks
			wu.CPUMillis = int64(cpuMs * 1000 / (float64(elapsed) / float64(time.Millisecond)))
		}
		wu.DiskBytes = dirSize(w.workingDir())
		for _, m := range w.task.Mounts {
			wu.Volumes[m.Volume] = dirSize(r.VolumeDir(j.appID, m))
		}
		if res := w.task.Resources; res != nil {
			wu.Limits = scheduler.Limits{CPUMillis: res.CPUMillis, MemoryBytes: res.MemoryBytes, DiskBytes: res.DiskBytes}
		}
		u.Workloads[name] = wu
	}
	return u, nil
}

// DiskUsage reads only each workload's disk use, as Usage reports it
// (the size of its working directory), without Usage's sampling window.
func (r *Runtime) DiskUsage(ctx context.Context, jobID string) (map[string]int64, error) {
	j := r.job(jobID)
	if j == nil {
		return nil, notFound(jobID)
	}
	out := map[string]int64{}
	for name, w := range j.snapshot() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[name] = dirSize(w.workingDir())
	}
	return out, nil
}

// Host says what this machine has: every CPU and MemTotal.
func (r *Runtime) Host(ctx context.Context) (scheduler.Host, error) {
	mem, err := memTotal()
	if err != nil {
		return scheduler.Host{}, err
	}
	return scheduler.Host{CPUMillis: int64(runtime.NumCPU()) * 1000, MemoryBytes: mem}, nil
}

// dirSize adds up the sizes of the regular files under dir, following no
// link, visiting at most maxWalk entries.
func dirSize(dir string) int64 {
	var size int64
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: skip it
		}
		if n++; n > maxWalk {
			return filepath.SkipAll
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				size += fi.Size()
			}
		}
		return nil
	})
	return size
}
