package main

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/svchost/svc/internal/adapters"
	"github.com/svchost/svc/internal/config"
	"github.com/svchost/svc/internal/errcode"
	"github.com/svchost/svc/internal/plan"
	"github.com/svchost/svc/internal/policy"
	"github.com/svchost/svc/internal/source"
	"github.com/svchost/svc/internal/spec"
	"github.com/svchost/svc/raftstore"
	"github.com/svchost/svc/scheduler"
	"github.com/svchost/svc/scheduler/process"
)

// processRuntime opens the process runtime under the work dir. It lives as
// long as the process, across restarts of the server, so that an in-place
// restart leaves the apps it runs running; opening it kills whatever
// workloads a previous process that died left behind (the reconciler
// starts them again).
func processRuntime(cfg *config.Config) (*process.Runtime, error) {
	return process.New(process.Config{
		WorkDir:       filepath.Join(cfg.Server.WorkDir, "runtime"),
		BuildTimeout:  cfg.Runtime.BuildTimeout,
		StartTimeout:  cfg.Runtime.StartTimeout,
		AdvertiseHost: cfg.Runtime.AdvertiseHost,
		Isolation:     cfg.Runtime.Isolation,
		HostPorts:     cfg.Runtime.SandboxHostPorts,
		PortStart:     cfg.Runtime.WorkloadPortStart,
		PortEnd:       cfg.Runtime.WorkloadPortEnd,
		Reserved:      svcPorts(cfg),
		GoCacheSeed:   cfg.Runtime.GoCacheSeed,
		// The apps' users pass through the work directory to their own
		// files, and nothing else of it is open to them.
		TraverseFrom: cfg.Server.WorkDir,
		// A sandboxed workload never sees the store (nor a copy of it
		// saved for a bundle), the key-encryption key, other apps'
		// sources, volumes copied from Nomad for a backup or the config
		// file.
		SandboxHide: sandboxHidden(cfg),
	})
}

// reportIsolation says at start how the process runtime isolates apps:
// an error when it is to sandbox them and the host cannot (no app runs
// until that is mended, or runtime.isolation: none is set), a warning when
// an operator chose no isolation, and the toolchains sandboxes cannot use.
func reportIsolation(log *slog.Logger, cfg *config.Config, procs *process.Runtime) {
	err := procs.SandboxError()
	switch {
	case cfg.Runtime.Isolation == policy.IsolationNone:
		log.Warn("runtime.isolation is none: apps run as svc's own user, on the host's network, and can read svc's files and each other's")
	case err != nil:
		log.Error("the process runtime cannot sandbox apps on this host, so it will run none: install bubblewrap and passt (apt-get install bubblewrap passt) on a kernel with user namespaces, or set runtime.isolation: none to run apps without isolation",
			"reason", err.Error())
	default:
		for _, tc := range procs.Toolchains() {
			log.Warn("a toolchain is not visible in the sandbox: builds that need it fail", "toolchain", tc)
		}
	}
}

// sandboxHidden lists what of the server's own files a sandbox hides.
func sandboxHidden(cfg *config.Config) []string {
	hide := []string{cfg.RaftDir(), filepath.Dir(kekFile(cfg.Server.WorkDir)), filepath.Join(cfg.Server.WorkDir, "apps"), bundleStaging(cfg.Server.WorkDir), remoteStaging(cfg.Server.WorkDir)}
	if cfg.File != "" {
		hide = append(hide, cfg.File)
	}
	return hide
}

// runtimeSource finds loaded runtime adapters for the scheduler.
type runtimeSource struct{ ad *adapters.Service }

var _ scheduler.Runtimes = runtimeSource{}

// Runtime returns the runtime adapter with the ID (the primary one for "").
func (s runtimeSource) Runtime(id string) (scheduler.Runtime, error) {
	set := s.ad.Current()
	if !set.Ready() {
		return nil, errcode.New(errcode.AdapterUnavailable, "adapters are not loaded yet; try again in a moment")
	}
	var l *adapters.Loaded
	var ok bool
	if id == "" {
		l, ok = set.Primary(adapters.CategoryRuntime)
	} else {
		l, ok = set.Get(id)
	}
	if !ok {
		return nil, errcode.New(errcode.AdapterUnavailable, "runtime adapter %s is not configured", id)
	}
	if l.Instance == nil {
		return nil, errcode.New(errcode.AdapterUnavailable, "runtime adapter %s did not open: %s", l.Adapter.ID, errcode.MessageOf(l.Err))
	}
	rt, ok := l.Instance.(scheduler.Runtime)
	if !ok {
		return nil, errcode.New(errcode.AdapterUnavailable, "runtime adapter %s (%s) cannot build or run apps in this build", l.Adapter.ID, l.Adapter.Kind)
	}
	return rt, nil
}

// syncInterval is how often every node fetches the builds and checkouts
// it lacks from the other servers.
const syncInterval = 15 * time.Second

// buildScheduler wires deploys, the reconciler (reporting to metrics) and
// the disk limits' check, and starts their leader loops.
func buildScheduler(gen *generation, store *raftstore.Store, st *storage, specs *spec.Service, plans *plan.Service,
	sources *source.Service, pol *policy.Service, metrics scheduler.Observer, now func() time.Time) *scheduler.Service {
	cfg := gen.cfg
	sch := scheduler.NewService(scheduler.Config{
		Backoff:      cfg.Reconciler.Backoff,
		Workers:      cfg.Reconciler.Workers,
		StartTimeout: cfg.Runtime.StartTimeout,
		RoutingMode:  cfg.Server.RoutingMode,
		PortStart:    cfg.App.PortStart,
		PortEnd:      cfg.App.PortEnd,
		DiskInterval: cfg.Disk.CheckInterval,
	}, scheduler.Deps{
		Store: store, Specs: specs, Plans: plans, Sources: sources, Slots: st.slots, Secrets: st.secrets,
		Policy: pol, Runtimes: runtimeSource{ad: st.adapters}, Now: now, Log: gen.log, Metrics: metrics,
	})
	store.RunWhileLeader("deploys", func(ctx context.Context) error {
		if err := waitAdapters(ctx, st.adapters); err != nil {
			return nil
		}
		return sch.RunDeploys(ctx)
	})
	store.RunWhileLeader("reconciler", func(ctx context.Context) error {
		if err := waitAdapters(ctx, st.adapters); err != nil {
			return nil
		}
		return sch.Reconcile(ctx)
	})
	store.RunWhileLeader("disk-limits", func(ctx context.Context) error {
		if err := waitAdapters(ctx, st.adapters); err != nil {
			return nil
		}
		return sch.CheckDisk(ctx)
	})
	store.RunWhileLeader("scheduler-sweep", raftstore.Every(sweepInterval, sch.SweepDeletedApps))
	store.RunWhileLeader("deploy-prune", raftstore.Every(sweepInterval, sch.Prune))
	return sch
}

// waitAdapters waits until the adapters are loaded: deploys and the
// reconciler need the runtime.
func waitAdapters(ctx context.Context, ad *adapters.Service) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !ad.Current().Ready() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// svcPorts are the ports of this host svc itself listens on (its own,
// the edge's apps' range), which no workload is given.
func svcPorts(cfg *config.Config) []int {
	var ports []int
	if _, p, err := net.SplitHostPort(cfg.Server.Addr); err == nil {
		if n, err := strconv.Atoi(p); err == nil && n > 0 {
			ports = append(ports, n)
		}
	}
	for p := cfg.App.PortStart; p > 0 && p <= cfg.App.PortEnd; p++ {
		ports = append(ports, p)
	}
	return ports
}
