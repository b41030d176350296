package nomad

import (
	"context"
	"slices"

	"github.com/hashicorp/nomad/api"

	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
)

// Usage reads each workload's use from its running allocation's stats
// (/v1/client/allocation/<id>/stats): CPU is Nomad's percent of one core
// in thousandths of a core (ten per percent), memory the RSS (or, where Nomad measures no
// RSS, its memory usage). Nomad reports no disk use: DiskBytes is 0, so
// the scheduler's disk limits never stop a Nomad app (Nomad itself only
// places by ephemeral_disk, it does not enforce it).
// Limits are the task's as the job asked (CPU shares count 1000 MHz per
// core). The host is Host's sum of the eligible nodes. A workload without
// a running allocation reads as 0. Limits: see limitsOf.
func (r *Runtime) Usage(ctx context.Context, jobID string) (scheduler.Usage, error) {
	job, err := r.liveJob(ctx, jobID)
	if err != nil {
		return scheduler.Usage{}, err
	}
	host, err := r.Host(ctx)
	if err != nil {
		return scheduler.Usage{}, err
	}
	allocs, _, err := r.client.Jobs().Allocations(*job.ID, false, r.query(ctx))
	if err != nil {
		return scheduler.Usage{}, r.translate(err, "read the allocations of job "+jobID, "job "+jobID)
	}
	u := scheduler.Usage{Supported: true, HostCPUMillis: host.CPUMillis, HostMemoryBytes: host.MemoryBytes,
		Workloads: map[string]scheduler.WorkloadUsage{}}
	for _, tg := range job.TaskGroups {
		if tg.Name == nil || len(tg.Tasks) == 0 {
			continue
		}
		g := *tg.Name
		wu := scheduler.WorkloadUsage{Volumes: map[string]int64{}, Limits: r.limitsOf(tg, tg.Tasks[0])}
		if stub := job.pick(allocs, g); stub != nil && stub.ClientStatus == api.AllocClientStatusRunning {
			stats, err := r.client.Allocations().Stats(&api.Allocation{ID: stub.ID, NodeID: stub.NodeID}, r.query(ctx))
			if err != nil {
				return scheduler.Usage{}, r.translate(err, "read the stats of allocation "+stub.ID, "allocation "+stub.ID)
			}
			if tu := stats.Tasks[taskName(stub.TaskStates, g)]; tu != nil && tu.ResourceUsage != nil {
				wu.CPUMillis, wu.MemoryBytes = usageOf(tu.ResourceUsage)
			}
		}
		u.Workloads[g] = wu
	}
	return u, nil
}

// usageOf reads CPU (thousandths of a core) and memory from Nomad's
// resource usage.
func usageOf(ru *api.ResourceUsage) (cpuMillis, memBytes int64) {
	if c := ru.CpuStats; c != nil {
		cpuMillis = int64(c.Percent * 10)
	}
	if m := ru.MemoryStats; m != nil {
		memBytes = int64(m.RSS)
		if memBytes == 0 || !slices.Contains(m.Measured, "RSS") && m.Usage > 0 {
			memBytes = int64(m.Usage)
		}
	}
	return max(cpuMillis, 0), memBytes
}

// limitsOf reads a task's limits back from what the job asks of Nomad:
// CPU MHz in thousandths of a core (jobtemplates' factor), memory and the
// group's ephemeral disk. A job that asks for none has none (0).
func (r *Runtime) limitsOf(tg *api.TaskGroup, t *api.Task) scheduler.Limits {
	var l scheduler.Limits
	if res := t.Resources; res != nil {
		if res.CPU != nil && *res.CPU > 0 {
			l.CPUMillis = jobtemplates.CPUMillis(float64(*res.CPU), r.cfg.CPUMHzPerCore)
		}
		if res.MemoryMB != nil {
			l.MemoryBytes = int64(*res.MemoryMB) << 20
		}
	}
	if tg.EphemeralDisk != nil && tg.EphemeralDisk.SizeMB != nil {
		l.DiskBytes = int64(*tg.EphemeralDisk.SizeMB) << 20
	}
	return l
}

// Host sums what the ready, eligible nodes of the runtime's datacenters
// and node pool offer, less what they reserve: CPU as cores (1000
// thousandths each; CPU shares in MHz where Nomad counts no cores) and
// memory.
func (r *Runtime) Host(ctx context.Context) (scheduler.Host, error) {
	q := r.query(ctx)
	q.Params = map[string]string{"resources": "true"}
	nodes, _, err := r.client.Nodes().List(q)
	if err != nil {
		return scheduler.Host{}, r.translate(err, "list nodes", "the nodes")
	}
	var h scheduler.Host
	for _, n := range nodes {
		if !r.eligible(n) || n.NodeResources == nil {
			continue
		}
		cpu := int64(n.NodeResources.Cpu.TotalCpuCores) * 1000
		if cpu == 0 {
			cpu = n.NodeResources.Cpu.CpuShares
		}
		mem := n.NodeResources.Memory.MemoryMB
		if res := n.ReservedResources; res != nil {
			if n.NodeResources.Cpu.TotalCpuCores == 0 {
				cpu -= int64(res.Cpu.CpuShares)
			}
			mem -= int64(res.Memory.MemoryMB)
		}
		h.CPUMillis += max(cpu, 0)
		h.MemoryBytes += max(mem, 0) << 20
	}
	return h, nil
}

// eligible says whether a node runs the runtime's jobs.
func (r *Runtime) eligible(n *api.NodeListStub) bool {
	if n.Status != "ready" || n.SchedulingEligibility != "eligible" || n.Drain {
		return false
	}
	if r.cfg.NodePool != "" && r.cfg.NodePool != "all" && n.NodePool != r.cfg.NodePool {
		return false
	}
	if len(r.cfg.Datacenters) > 0 && !slices.Contains(r.cfg.Datacenters, n.Datacenter) && !slices.Contains(r.cfg.Datacenters, "*") {
		return false
	}
	if d := n.Drivers[r.cfg.Driver]; d == nil || !d.Healthy {
		return false
	}
	return true
}
